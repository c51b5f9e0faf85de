"""Clustering the centroids that clients send: pooling them, and the server's weighted k-means.

Shared by the server-side initialisation and the methods that cluster local
centroids (FKM, FFCM avg2); works on the host.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._validation import check_positive_int
from .kmeans import kmeans
from .lloyd import DEFAULT_CHUNK_SIZE, cluster_stats, lloyd
from .matching import match_order


def pool_centroids(
    centroids: Sequence[np.ndarray], counts: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """All clients' centroids and counts, in an order that does not depend on the clients.

    Replies arrive in any order and node ids differ between a simulation and a
    deployment; sorting the pooled rows (lexicographically by coordinates,
    then weight) makes a seeded server computation depend on what the clients
    sent, not on who sent it first.

    Parameters
    ----------
    centroids : sequence of ndarray of shape (k_i, n_features)
        One array per client; ``k_i`` may be 0.
    counts : sequence of ndarray of shape (k_i,)
        The matching cluster sizes.

    Returns
    -------
    points : ndarray of shape (sum k_i, n_features)
    weights : ndarray of shape (sum k_i,)
    """
    if not centroids or len(centroids) != len(counts):
        raise ValueError("need one counts array per centroids array, and at least one of each")
    points = np.concatenate([np.asarray(c, dtype=np.float64) for c in centroids])
    weights = np.concatenate([np.asarray(w, dtype=np.float64) for w in counts])
    if points.ndim != 2 or weights.shape != points.shape[:1]:
        raise ValueError(f"centroids and counts disagree: shapes {points.shape} and {weights.shape}")
    order = np.lexsort(np.column_stack([points, weights]).T[::-1])
    return points[order], weights[order]


def server_kmeans(
    points: np.ndarray,
    weights: np.ndarray,
    k: int,
    *,
    rng: np.random.Generator,
    start: np.ndarray | None = None,
    n_init: int = 10,
    max_iter: int = 300,
    tol: float = 1e-9,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> np.ndarray:
    """Weighted k-means over the clients' centroids, run to convergence (line 10, eq. 1).

    The candidates are ``n_init`` weighted k-means++ starts drawn from
    ``rng`` and, when given, a start from the current global centroids;
    each runs Lloyd to convergence and the one with the lowest weighted
    inertia (eq. 1) is kept, the current centroids winning ties.

    Parameters
    ----------
    points : ndarray of shape (m, n_features)
        The pooled local centroids (:func:`pool_centroids`).
    weights : ndarray of shape (m,)
        Their cluster sizes ``S_j``.
    k : int
        The global number of clusters ``K_g``.
    rng : numpy.random.Generator
        Source of the k-means++ starts.
    start : ndarray of shape (k, n_features), optional
        The current global centroids. The result is then reordered to match
        them (:func:`~fedcluster.numerics.matching.match_order`); and with fewer than ``k`` distinct
        weighted points, where k-means++ cannot start, the Lloyd run from
        them is the result: the received centroids pull the global centroids
        nearest to them, the others stay where they are.
    n_init, max_iter, tol, chunk_size
        As in :func:`~fedcluster.numerics.kmeans`.

    Returns
    -------
    ndarray of shape (k, n_features)

    Raises
    ------
    ValueError
        If there is no point, or fewer than ``k`` distinct points of positive
        weight and no ``start``.
    """
    k = check_positive_int(k, "k")
    points = np.asarray(points, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    if points.ndim != 2 or points.shape[0] == 0:
        raise ValueError(f"the server received no centroids (shape {points.shape})")
    distinct = np.unique(points[weights > 0], axis=0).shape[0]
    options = dict(sample_weight=weights, max_iter=max_iter, tol=tol, chunk_size=chunk_size)
    candidates = []
    if start is not None:
        candidates.append(lloyd(points, start, **options).centroids)
    if distinct >= k:
        candidates.append(kmeans(points, k, rng=rng, n_init=n_init, **options).centroids)
    if not candidates:
        raise ValueError(f"the server received {distinct} distinct centroids of positive weight, "
                         f"fewer than k = {k}")
    inertia = [cluster_stats(points, c, sample_weight=weights, chunk_size=chunk_size).inertia
               for c in candidates]
    best = candidates[int(np.argmin(inertia))]  # argmin keeps the first (the current) on ties
    return best if start is None else match_order(best, start)
