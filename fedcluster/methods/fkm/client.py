"""A client's steps of Garst & Reinders' federated k-means (FKM, paper ``002``, Algorithm 1).

``query.garst_init`` (:func:`init_request`) answers the initial round:
k-means++ on the local rows. ``train.garst`` (:func:`round_request`) answers a
round: drop the global centroids that get no local row, one Lloyd step from
the others. Both send only clusters of at least ``min-cluster-size`` rows whose
centroid equals no value that fewer local rows hold
(:func:`~fedcluster.local.floor.keep_large`), so the counts may add up to
fewer than the local rows, and a client of fewer than ``min-cluster-size * k``
rows sends the clusters it can.
"""

from __future__ import annotations

import numpy as np

from ...numerics import namespace_of, to_numpy
from .kernels import LocalClusters, local_step, seeded_clusters
from ...messages import ClientSummary, request_setting
from ...local.floor import check_rows, keep_large
from ...local.steps import chunk_size, min_cluster_size, need_centroids, non_negative, positive


#: The request kind of this step (Flower routes "<category>.<action>").
GARST_INIT = "query.garst_init"
GARST = "train.garst"


def _summary(X, clusters: LocalClusters, p: int, sse: float = float("nan")) -> ClientSummary:
    """The reply of ``clusters`` (already without those of fewer than p rows), under the floor."""
    centroids, counts = to_numpy(clusters.centroids), to_numpy(clusters.counts)
    keep = keep_large(X, centroids, counts, p)
    return ClientSummary(n=int(X.shape[0]), centroids=centroids[keep], counts=counts[keep],
                         sse=sse)


def init_request(X, centroids, config: dict) -> ClientSummary:
    """Means and sizes of the clusters of ``k`` k-means++ seeds (Algorithm 1, lines 2-5).

    Config: ``k``, ``seed``, ``min-cluster-size``, ``chunk-size``; only a
    client of fewer than ``min-cluster-size`` rows refuses (see
    :mod:`fedcluster.local.floor`).
    """
    k = request_setting(config, "k", int, positive)
    p = min_cluster_size(config)
    check_rows(int(X.shape[0]), p)
    clusters = seeded_clusters(
        X,
        k,
        rng=np.random.default_rng(request_setting(config, "seed", int, non_negative)),
        threshold=p,
        chunk_size=chunk_size(config),
    )
    return _summary(X, clusters, p)


def round_request(X, centroids, config: dict) -> ClientSummary:
    """One FKM round on the local rows (Algorithm 1, lines 13-18).

    The reply holds the new local centroids and their sizes (at most ``k`` of
    them, none below ``min-cluster-size``) and, for the round's score, the
    sum of squared distances of the local rows to the global centroids.
    Config: ``min-cluster-size``, ``chunk-size``.
    """
    xp = namespace_of(X)
    p = min_cluster_size(config)
    clusters = local_step(X, xp.asarray(need_centroids(centroids)), threshold=p,
                          chunk_size=chunk_size(config))
    return _summary(X, clusters, p, sse=float(clusters.inertia))
