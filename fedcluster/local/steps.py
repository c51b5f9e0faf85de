"""What a client computes for each core request, on its own rows.

Each ``*_request`` function takes the local data (already on the compute
device), the global centroids sent with the request (or ``None``) and the
request's config, reads its settings with
:func:`~fedcluster.protocol.request_setting`, and returns a
:class:`~fedcluster.protocol.ClientSummary` on the host: only centroids,
counts, sums of squared distances and bounds leave the client. The methods of
:mod:`fedcluster.methods` add their own steps in modules beside this one;
:data:`fedcluster.client.app.HANDLERS` routes message types to them.
"""

from __future__ import annotations

import math

import numpy as np

from ..numerics import cluster_stats, kmeans, namespace_of, to_numpy
from ..messages import ClientSummary, ProtocolError, request_setting
from .floor import MIN_CLUSTER_SIZE_KEY, check_rows, keep_large, private_bounds


def positive(value) -> bool:
    return value >= 1


def non_negative(value) -> bool:
    return value >= 0 and math.isfinite(value)


def need_centroids(centroids):
    """The request's global centroids, or a :class:`ProtocolError` if it has none."""
    if centroids is None:
        raise ProtocolError("request carries no global centroids")
    return centroids


def chunk_size(config: dict) -> int:
    return request_setting(config, "chunk-size", int, positive)


def min_cluster_size(config: dict) -> int:
    """p of the privacy floor, which the ClientApp has set in ``config`` (see :mod:`.floor`)."""
    return request_setting(config, MIN_CLUSTER_SIZE_KEY, int, positive)


def evaluate_request(X, centroids, config: dict) -> ClientSummary:
    """Counts per cluster and the sum of squared distances to the global centroids.

    Neither reveals a row (the sum runs over all local rows, at least
    ``min-cluster-size`` of them).
    """
    check_rows(int(X.shape[0]), min_cluster_size(config))
    xp = namespace_of(X)
    stats = cluster_stats(X, xp.asarray(need_centroids(centroids)), chunk_size=chunk_size(config))
    return ClientSummary(n=int(X.shape[0]), counts=to_numpy(stats.counts), sse=float(stats.inertia))


def bounds_request(X, centroids, config: dict) -> ClientSummary:
    """Per-feature bounds for a random start in the federated bounding box.

    Not the minima and maxima, which are coordinates of rows: the means of the
    ``min-cluster-size`` smallest and largest values of each feature, rounded
    outward to two significant digits (:func:`.privacy.private_bounds`).
    """
    p = min_cluster_size(config)
    check_rows(int(X.shape[0]), p)
    low, high = private_bounds(X, p)
    return ClientSummary(n=int(X.shape[0]), low=low, high=high)


def local_kmeans(X, config: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """k-means++ and Lloyd on the local rows; ``k`` is capped at the number of distinct rows.

    Returns every local centroid (host arrays), the rows behind each (the
    last assignment, whose means the centroids are) and the mask of those the
    privacy floor lets out (:func:`.privacy.keep_large`). A step that refines
    the clusters before sending them (FeCA) needs the withheld centroids too,
    to keep their rows out of the clusters it sends.
    """
    k = request_setting(config, "k", int, positive)
    check_rows(int(X.shape[0]), min_cluster_size(config))
    distinct = int(np.unique(to_numpy(X), axis=0).shape[0])
    result = kmeans(
        X,
        min(k, distinct),
        rng=np.random.default_rng(request_setting(config, "seed", int, non_negative)),
        max_iter=request_setting(config, "max-iter", int, positive),
        tol=request_setting(config, "tol", float, non_negative),
        chunk_size=chunk_size(config),
    )
    centroids, counts = to_numpy(result.centroids), to_numpy(result.counts)
    return centroids, counts, keep_large(X, centroids, counts, min_cluster_size(config))


def local_kmeans_request(X, centroids, config: dict) -> ClientSummary:
    """The centroids of :func:`local_kmeans` that the floor lets out, with their sizes.

    Privacy floor: local clusters of fewer than ``min-cluster-size`` rows, and
    those whose centroid equals a value that fewer local rows hold, are left
    out of the reply (:func:`.privacy.keep_large`), so a client may send fewer
    than ``k`` centroids, none at all when every cluster is small (the server
    clusters whatever centroids it gets, weighted by counts).
    """
    centroids, counts, keep = local_kmeans(X, config)
    return ClientSummary(n=int(X.shape[0]), centroids=centroids[keep], counts=counts[keep])
