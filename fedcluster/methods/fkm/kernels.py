"""Federated k-means of Garst & Reinders (FKM, paper ``002``, Algorithm 1), Flower-free.

Clients start from k-means++ on their own rows (line 4). Each round the
server clusters all received local centroids with weighted k-means, the
weights being the clients' cluster sizes (line 10, eq. 1); each client assigns
its rows to the global centroids, drops those that get no row, so that its
local k can shrink (lines 14-16), and runs one Lloyd step from the rest
(line 17). A client never sends a cluster of fewer than ``p`` rows (the
privacy threshold of section 2).

The client kernels (:func:`seeded_clusters`, :func:`local_step`) accept NumPy
or CuPy rows; the server's weighted k-means over the pooled centroids is the
shared :func:`fedcluster.numerics.pooling.server_kmeans`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ...numerics._validation import check_positive_int
from ...numerics.lloyd import DEFAULT_CHUNK_SIZE, cluster_stats, update_centroids
from ...numerics.seeding import kmeans_plusplus

__all__ = [
    "LocalClusters",
    "local_step",
    "seeded_clusters",
    "withhold_small_clusters",
]


class LocalClusters(NamedTuple):
    """What a client may send: its clusters of at least ``p`` rows.

    Attributes
    ----------
    centroids : array of shape (k_i, n_features), float64
        Means of the clusters that are sent (``k_i <= k``).
    counts : array of shape (k_i,), float64
        Their numbers of rows (the weights of eq. 1), each at least ``p``.
    inertia : float
        Sum of squared distances of all local rows to the centroids they were
        assigned to (the k-means++ seeds, or the global centroids).
    """

    centroids: Any
    counts: Any
    inertia: float


def withhold_small_clusters(centroids: Any, counts: Any, threshold: int) -> tuple[Any, Any]:
    """Keep the clusters of at least ``threshold`` rows (Garst's privacy rule, ``p``).

    Parameters
    ----------
    centroids : array of shape (k, n_features)
        Cluster means.
    counts : array of shape (k,)
        Rows per cluster.
    threshold : int
        The privacy threshold ``p >= 1``; clusters with fewer rows are dropped.

    Returns
    -------
    centroids, counts
        The kept rows of both, in their original order.
    """
    threshold = check_positive_int(threshold, "threshold")
    keep = counts >= threshold
    return centroids[keep], counts[keep]


def seeded_clusters(
    X: Any, k: int, *, rng: np.random.Generator, threshold: int,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> LocalClusters:
    """A client's first clusters: k-means++ seeding, no Lloyd iterations (Algorithm 1, line 4).

    The seeds are data rows, so they are not sent: each row joins its nearest
    seed and the client sends the means of these clusters with their sizes
    (the "cluster means" of line 4), withholding those below ``threshold``.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        The client's rows (NumPy or CuPy).
    k : int
        The global number of clusters; capped at ``n_samples`` (``K_i = K_g``).
    rng : numpy.random.Generator
        Source of the seeding's randomness.
    threshold : int
        The privacy threshold ``p``.
    chunk_size : int, default=DEFAULT_CHUNK_SIZE
        Rows processed at once.

    Returns
    -------
    LocalClusters
        Arrays on the namespace of ``X``; ``inertia`` is measured to the seeds.
    """
    k = min(check_positive_int(k, "k"), X.shape[0])
    seeds = kmeans_plusplus(X, k, rng=rng, chunk_size=chunk_size)
    stats = cluster_stats(X, seeds, chunk_size=chunk_size)
    # Duplicate rows can make a seed lose every row to an equal, earlier one;
    # its count is then 0, below any threshold.
    centroids, counts = withhold_small_clusters(update_centroids(stats, seeds), stats.counts,
                                                threshold)
    return LocalClusters(centroids, counts, stats.inertia)


def local_step(
    X: Any, global_centroids: Any, *, threshold: int, chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> LocalClusters:
    """A client's round: drop the empty global clusters, one Lloyd step (Algorithm 1, lines 13-17).

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        The client's rows (NumPy or CuPy).
    global_centroids : array of shape (k, n_features)
        The server's centroids ``C_g``.
    threshold : int
        The privacy threshold ``p``.
    chunk_size : int, default=DEFAULT_CHUNK_SIZE
        Rows processed at once.

    Returns
    -------
    LocalClusters
        The new local centroids and their sizes, in the order of the global
        centroids they started from, without the dropped and the withheld
        ones; ``inertia`` is measured to the global centroids.

    Notes
    -----
    The Lloyd step of line 17 assigns the rows to the kept centroids. A
    dropped centroid won no row, so that assignment is the one of line 14
    (ties already went to the lowest index), and the step reduces to the
    update of the kept clusters: one pass over the rows serves both lines.
    The counts sent are the sizes of the clusters whose means are sent.
    """
    stats = cluster_stats(X, global_centroids, chunk_size=chunk_size)
    kept = stats.counts > 0  # line 15: drop the global centroids that got no row
    updated = update_centroids(stats, global_centroids)[kept]
    centroids, counts = withhold_small_clusters(updated, stats.counts[kept], threshold)
    return LocalClusters(centroids, counts, stats.inertia)


