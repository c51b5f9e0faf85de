"""Metrics that need the pooled data: for benchmarks only, never in a federation.

The full silhouette (Rousseeuw 1987) compares every row with every other
row, across clients, so it cannot be computed from per-client sums; a real
federation uses the simplified silhouette of
:func:`fedcluster.metrics.federated.combine` instead (Garst & Reinders, paper
``002``, report both on FEMNIST). Everything else that fedcluster reports can
be federated exactly.

NumPy only; memory O(chunk * n).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..numerics.backend import to_numpy
from ..numerics.distance import expanded_sq_distances, row_sq_norms
from ..numerics.lloyd import assign

__all__ = ["silhouette", "silhouette_for_centroids"]

#: Largest number of pairwise distances held at once.
_PAIR_BUDGET = 1 << 22


def silhouette(X: ArrayLike, clusters: ArrayLike) -> float:
    """Mean silhouette of a labelled pooled dataset, as scikit-learn's ``silhouette_score``.

    For row ``i`` in cluster ``A``: ``a`` is its mean distance to the other
    rows of ``A``, ``b`` the smallest mean distance to the rows of another
    cluster, ``s = (b - a) / max(a, b)``; ``s = 0`` for a row alone in its
    cluster. Euclidean distances.

    Parameters
    ----------
    X : array of shape (n, d)
        All rows.
    clusters : array of shape (n,)
        Cluster of each row (any values); 2 <= distinct values <= n - 1.

    Raises
    ------
    ValueError
        For fewer than 2 or more than ``n - 1`` clusters (as scikit-learn).
    """
    X = np.asarray(to_numpy(X), dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got shape {X.shape}")
    n = len(X)
    _, codes = np.unique(np.asarray(to_numpy(clusters)), return_inverse=True)
    codes = codes.reshape(-1)
    if codes.shape != (n,):
        raise ValueError(f"expected {n} cluster labels, got {codes.shape[0]}")
    k = int(codes.max()) + 1 if n else 0
    if not 2 <= k <= n - 1:
        raise ValueError(f"the silhouette needs 2 to n - 1 = {n - 1} clusters, got {k}")
    sizes = np.bincount(codes, minlength=k).astype(np.float64)
    onehot = np.zeros((n, k))
    onehot[np.arange(n), codes] = 1.0
    centred = X - X.mean(axis=0)
    sq_norms = row_sq_norms(centred)
    values = np.empty(n)
    step = max(1, _PAIR_BUDGET // n)
    for start in range(0, n, step):
        rows = slice(start, min(n, start + step))
        block = centred[rows]
        d2 = expanded_sq_distances(block, centred, sq_norms[rows], sq_norms)
        d2[np.arange(d2.shape[0]), np.arange(rows.start, rows.stop)] = 0.0
        totals = np.sqrt(d2) @ onehot  # (rows, k): summed distance to each cluster
        own = codes[rows]
        index = np.arange(len(own))
        own_size = sizes[own]
        with np.errstate(divide="ignore", invalid="ignore"):
            a = totals[index, own] / (own_size - 1)
            means = totals / sizes
        means[index, own] = np.inf
        b = means.min(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = (b - a) / np.maximum(a, b)
        values[rows] = np.where(own_size > 1, np.nan_to_num(s), 0.0)
    return float(values.mean())


def silhouette_for_centroids(X: ArrayLike, centroids: ArrayLike) -> float:
    """:func:`silhouette` of the rows assigned to their nearest centroid."""
    clusters, _ = assign(np.asarray(to_numpy(X), dtype=np.float64), np.asarray(centroids))
    return silhouette(X, clusters)
