"""The client step of federated mini-batch k-means (Triebe & Rajagopal, paper ``003``)."""

from __future__ import annotations

import numpy as np

from ...numerics import namespace_of, to_numpy
from .kernels import client_kmeans
from ...messages import ClientSummary, request_option, request_setting
from ...local.floor import check_rows, withhold_small
from ...local.steps import chunk_size, min_cluster_size, need_centroids, non_negative
from .options import FedKMeansOptions


#: The request kind of this step (Flower routes "<category>.<action>").
MINIBATCH = "train.minibatch"


def round_request(X, centroids, config: dict) -> ClientSummary:
    """``ClientKMeans`` (Algorithm 1/2) from the global centroids.

    Reads ``local-steps`` (epochs E >= 1), ``batch-size`` (B >= 0; 0 means
    all local rows), ``client-lr`` (beta in (0, 1]), ``seed`` (the server's
    seed of the batch split and order) and ``chunk-size``. Replies with the
    local centroids and the last epoch's cluster sizes (``centroids``,
    ``counts``) and the sum of squared distances of the local points to
    their nearest global centroid (``sse``). Privacy floor: a cluster of
    fewer than ``min-cluster-size`` rows in the last epoch, or whose centroid
    equals a value fewer local rows hold, is withheld like an empty one: its global centroid goes back with count 0, which the
    server's count-weighted mean leaves out (:mod:`.privacy`).
    """
    xp = namespace_of(X)
    given = need_centroids(centroids)
    p = min_cluster_size(config)
    check_rows(int(X.shape[0]), p)
    result = client_kmeans(
        X,
        xp.asarray(given),
        rng=np.random.default_rng(request_setting(config, "seed", int, non_negative)),
        epochs=request_option(config, FedKMeansOptions, "local-steps"),
        batch_size=request_option(config, FedKMeansOptions, "batch-size"),
        lr=request_option(config, FedKMeansOptions, "client-lr"),
        chunk_size=chunk_size(config),
    )
    counts = to_numpy(result.counts)
    sent, counts = withhold_small(X, to_numpy(result.centroids), counts, counts, p, given)
    return ClientSummary(n=int(X.shape[0]), centroids=sent, counts=counts, sse=result.inertia)
