"""What a client computes on its own rows for the federated metrics (Flower-free).

:func:`local_statistics` assigns the client's rows to the model's centroids
and returns sums over them: per-cluster counts, coordinate sums, squared and
plain distances, the simplified-silhouette sum, FFCM's outside-cluster sums,
and, when the client has ground-truth labels, a cluster-by-label contingency
table. Individual rows and labels never leave the client; the server adds
the clients' statistics (:func:`fedcluster.metrics.federated.combine`), and
because every quantity is a sum over rows, the combined metrics equal the
ones computed on the pooled data (to rounding).

Runs on NumPy or CuPy (the namespace of ``X``); the result is on the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..numerics._validation import check_centroids, check_data, check_positive_int
from ..numerics.backend import namespace_of, to_numpy
from ..numerics.distance import sq_distances
from ..numerics.lloyd import DEFAULT_CHUNK_SIZE, assign

__all__ = ["LocalStatistics", "local_statistics"]

@dataclass(frozen=True)
class LocalStatistics:
    """Sufficient statistics of a set of rows (one client's, or several added up) for centroids.

    Every entry is a sum over the client's rows, so the statistics of a
    union of clients are the sums of theirs. Rows are assigned to their
    nearest centroid (ties to the lowest index, as in the Lloyd kernels);
    ``reference`` centres (by default the centroids themselves) are what the
    plain-distance statistics are measured to.

    Attributes
    ----------
    n : int
        Rows.
    counts : ndarray of shape (k,), int64
        Rows per cluster.
    sums : ndarray of shape (k, d), float64
        Per-cluster coordinate sums (the server's cluster means are
        ``sums / counts``).
    cluster_sse : ndarray of shape (k,), float64
        Per-cluster sum of squared distances to the assigned centroid.
    sse : float
        ``cluster_sse.sum()``: the k-means objective on these rows.
    distance_sums : ndarray of shape (k,), float64
        Per-cluster sum of Euclidean distances to the cluster's reference
        centre.
    outside_distance : float
        Sum over rows of the Euclidean distances to the reference centres of
        the other ``k - 1`` clusters.
    outside_sse : float
        The same with squared distances.
    silhouette_sum : float
        Sum over rows of the simplified silhouette ``(b - a) / max(a, b)``, with
        ``a`` the distance to the own reference centre and ``b`` to the
        nearest other one (0 for a row with ``a = b = 0``; 0 for every row
        when ``k = 1``, where it is undefined).
    label_values : ndarray of shape (L,) or None
        The label vocabulary the contingency columns stand for, sorted.
    contingency : ndarray of shape (k, L), int64, or None
        Rows of cluster ``j`` with label ``label_values[l]``; ``None`` without
        labels.
    """

    n: int
    counts: np.ndarray
    sums: np.ndarray
    cluster_sse: np.ndarray
    sse: float
    distance_sums: np.ndarray
    outside_distance: float
    outside_sse: float
    silhouette_sum: float
    label_values: np.ndarray | None = None
    contingency: np.ndarray | None = None

    @property
    def k(self) -> int:
        """Number of clusters."""
        return len(self.counts)

    @property
    def dimension(self) -> int:
        """Number of features."""
        return self.sums.shape[1]


def local_statistics(
    X: Any,
    centroids: ArrayLike,
    labels: ArrayLike | None = None,
    *,
    label_values: ArrayLike | None = None,
    reference: ArrayLike | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> LocalStatistics:
    """Compute one client's sufficient statistics for the federated metrics.

    Parameters
    ----------
    X : array of shape (n, d)
        The client's rows (NumPy or CuPy); ``n`` may be 0.
    centroids : array of shape (k, d)
        The model's centroids; rows are assigned to the nearest.
    labels : array of shape (n,), optional
        Ground-truth labels of the rows (any sortable values, e.g. integers);
        they only enter the contingency table.
    label_values : array of shape (L,), optional
        The label vocabulary for the contingency columns (every label must be
        in it). By default the client's own distinct labels; the server merges
        vocabularies either way.
    reference : array of shape (k, d), optional
        Centres the plain distances (``distance_sums``, the silhouette and
        the outside sums) are measured to, by default ``centroids``. With the
        cluster means of a first pass
        (:func:`fedcluster.metrics.federated.cluster_means`) a second pass gives
        the Davies-Bouldin index and simplified silhouette of the assignment
        exactly as computed from pooled data (scikit-learn's
        ``davies_bouldin_score`` measures to cluster means).
    chunk_size : int, default DEFAULT_CHUNK_SIZE
        Rows processed at once.

    Returns
    -------
    LocalStatistics
        Host (NumPy) arrays and Python numbers.
    """
    xp = namespace_of(X)
    X = xp.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array of shape (n, d), got shape {X.shape}")
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    n, d = X.shape
    C = check_centroids(centroids, d, xp, "centroids")
    R = C if reference is None else check_centroids(reference, d, xp, "reference")
    if R.shape != C.shape:
        raise ValueError(f"reference must have the shape of centroids {C.shape}, got {R.shape}")
    k = C.shape[0]
    vocabulary, codes = _label_codes(labels, label_values, n)

    counts = xp.zeros(k, dtype=xp.int64)
    sums = xp.zeros(k * d, dtype=xp.float64)
    cluster_sse = xp.zeros(k, dtype=xp.float64)
    distance_sums = xp.zeros(k, dtype=xp.float64)
    outside_distance = xp.zeros((), dtype=xp.float64)
    outside_sse = xp.zeros((), dtype=xp.float64)
    silhouette = xp.zeros((), dtype=xp.float64)
    table = None if vocabulary is None else np.zeros(k * len(vocabulary), dtype=np.int64)
    if n:
        X = check_data(X)
        feature = xp.arange(d)
        for start in range(0, n, chunk_size):
            block = X[start:start + chunk_size]
            clusters, sqdist = assign(block, C, chunk_size=chunk_size)
            chunk = block.astype(xp.float64, copy=False)
            counts += xp.bincount(clusters, minlength=k)
            cells = (clusters[:, None] * d + feature).ravel()
            sums += xp.bincount(cells, weights=chunk.ravel(), minlength=k * d)
            cluster_sse += xp.bincount(clusters, weights=sqdist, minlength=k)
            # Direct form: exact to rounding, as the reported metrics need.
            d2 = sq_distances(chunk, R)
            rows = xp.arange(len(chunk))
            own2 = d2[rows, clusters]
            own = xp.sqrt(own2)
            distance_sums += xp.bincount(clusters, weights=own, minlength=k)
            others = d2.copy()
            others[rows, clusters] = 0.0
            outside_sse = outside_sse + others.sum()
            outside_distance = outside_distance + xp.sqrt(others).sum()
            if k > 1:
                others[rows, clusters] = xp.inf
                nearest_other = xp.sqrt(others.min(axis=1))
                scale = xp.maximum(own, nearest_other)
                safe = xp.where(scale > 0, scale, 1.0)
                values = xp.where(scale > 0, (nearest_other - own) / safe, 0.0)
                silhouette = silhouette + values.sum()
            if table is not None:
                block_codes = codes[start:start + chunk_size]
                table += np.bincount(to_numpy(clusters) * len(vocabulary) + block_codes,
                                     minlength=table.size)
    cluster_sse_host = to_numpy(cluster_sse).astype(np.float64, copy=False)
    return LocalStatistics(
        n=int(n),
        counts=to_numpy(counts).astype(np.int64, copy=False),
        sums=to_numpy(sums).reshape(k, d),
        cluster_sse=cluster_sse_host,
        sse=float(cluster_sse_host.sum()),
        distance_sums=to_numpy(distance_sums),
        outside_distance=float(outside_distance),
        outside_sse=float(outside_sse),
        silhouette_sum=float(silhouette),
        label_values=vocabulary,
        contingency=None if table is None else table.reshape(k, len(vocabulary)),
    )


def _label_codes(
    labels: ArrayLike | None, label_values: ArrayLike | None, n: int
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The sorted label vocabulary and each row's column in it (host arrays)."""
    if labels is None:
        if label_values is not None:
            raise ValueError("label_values given without labels")
        return None, None
    y = np.asarray(to_numpy(labels))
    if y.shape != (n,):
        raise ValueError(f"expected {n} labels (one per row), got shape {y.shape}")
    if label_values is None:
        vocabulary, codes = np.unique(y, return_inverse=True)
        return vocabulary, codes.reshape(n).astype(np.int64, copy=False)
    vocabulary = np.asarray(to_numpy(label_values))
    if vocabulary.ndim != 1:
        raise ValueError(f"label_values must be 1-D, got shape {vocabulary.shape}")
    if len(np.unique(vocabulary)) != len(vocabulary):
        raise ValueError("label_values must not repeat a value")
    vocabulary = np.sort(vocabulary)
    codes = np.searchsorted(vocabulary, y)
    inside = codes < len(vocabulary)
    found = np.zeros(n, dtype=bool)
    found[inside] = vocabulary[codes[inside]] == y[inside]
    if not found.all():
        missing = np.unique(y[~found])
        raise ValueError(f"labels {missing[:5].tolist()} are not in label_values")
    return vocabulary, codes.astype(np.int64, copy=False)

