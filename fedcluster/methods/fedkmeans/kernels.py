"""Federated mini-batch k-means (Triebe & Rajagopal, paper ``003``): client epochs and server rules.

:func:`client_kmeans` is ``ClientKMeans`` of Algorithm 1/2: E epochs of
mini-batch steps ``mu_k += beta * lambda_k^b / lambda_k * (mu_k^b - mu_k)``
from the global centroids. :func:`count_weighted_mean` is the server's
``Gamma* = sum_i Lambda_i Gamma_i / Lambda``; the step towards it with the
server learning rate is :func:`~fedcluster.numerics.aggregate.momentum_update`.
:func:`small_clusters` says which clusters are too small (relative to the mean
cluster size) and :func:`reseed` moves clusters that stayed too small to new
positions without any raw data point.
"""

from __future__ import annotations

import itertools
import numbers
from typing import Any, NamedTuple

import numpy as np

from ...numerics._validation import check_centroids, check_data, check_positive_int
from ...numerics.aggregate import weighted_centroid_mean
from ...numerics.backend import namespace_of, to_numpy
from ...numerics.lloyd import DEFAULT_CHUNK_SIZE, ClusterStats, cluster_stats

__all__ = ["LocalKMeans", "client_kmeans", "count_weighted_mean", "minibatch_step", "reseed",
           "small_clusters"]


class LocalKMeans(NamedTuple):
    """Outcome of :func:`client_kmeans`.

    Attributes
    ----------
    centroids : array of shape (k, n_features), float64
        The client's centroids after the last epoch (``Gamma_i``).
    counts : array of shape (k,), float64
        The cluster sizes counted over the last epoch (``Lambda_i``; the
        algorithm resets them at the start of every epoch).
    inertia : float
        Sum of squared distances of the client's points to their nearest
        *global* centroid, the ones the round started from.
    """

    centroids: Any
    counts: Any
    inertia: float


def minibatch_step(centroids: Any, batch: ClusterStats, counts: Any, lr: float) -> Any:
    """One mini-batch update of Algorithm 2 (client side).

    Parameters
    ----------
    centroids : array of shape (k, n_features)
        Centroids ``mu_k`` before the step.
    batch : ClusterStats
        The batch's assignment to `centroids`: per-cluster sums and sizes
        ``lambda_k^b``.
    counts : array of shape (k,)
        Sizes ``lambda_k`` counted so far in this epoch, the batch included.
    lr : float
        Client learning rate ``beta`` in (0, 1].

    Returns
    -------
    array of shape (k, n_features), float64
        ``mu_k + beta * lambda_k^b / lambda_k * (mu_k^b - mu_k)`` with
        ``mu_k^b`` the batch mean of cluster k, written as
        ``mu_k + beta * (sum_k^b - lambda_k^b mu_k) / lambda_k``; a cluster
        the batch does not touch (``lambda_k^b = 0``) stays where it is.
    """
    xp = namespace_of(centroids)
    touched = batch.counts > 0
    step = (batch.sums - batch.counts[:, None] * centroids) / xp.where(touched, counts, 1.0)[:, None]
    return xp.where(touched[:, None], centroids + lr * step, centroids)


def client_kmeans(
    X: Any,
    centroids: Any,
    *,
    rng: np.random.Generator,
    epochs: int = 1,
    batch_size: int = 0,
    lr: float = 1.0,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> LocalKMeans:
    """``ClientKMeans`` of Algorithm 1/2: E epochs of mini-batch steps.

    The local points are split once into batches of `batch_size` rows, by a
    random permutation from `rng` (so the batches do not depend on how the
    rows are stored); every epoch resets the cluster sizes and visits the
    batches in a new random order.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        The client's samples (NumPy or CuPy).
    centroids : array of shape (k, n_features)
        Global centroids the round starts from.
    rng : numpy.random.Generator
        Source of the batch split and order (seeded by the server).
    epochs : int, default=1
        Local epochs E.
    batch_size : int, default=0
        Mini-batch size B; 0 (or anything >= n_samples) means one batch of
        all rows, the paper's ``B = infinity``.
    lr : float, default=1.0
        Client learning rate beta in (0, 1].
    chunk_size : int, default=DEFAULT_CHUNK_SIZE
        Rows per block of the distance computations.

    Returns
    -------
    LocalKMeans
        Arrays on the namespace of `X`.
    """
    X = check_data(X)
    xp = namespace_of(X)
    centroids = check_centroids(centroids, X.shape[1], xp, "centroids")
    epochs = check_positive_int(epochs, "epochs")
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 0:
        raise ValueError(f"batch_size must be an integer >= 0, got {batch_size!r}")
    if isinstance(lr, bool) or not isinstance(lr, numbers.Real) or not 0 < lr <= 1:
        raise ValueError(f"lr must satisfy 0 < lr <= 1, got {lr!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")

    n = X.shape[0]
    if batch_size == 0 or batch_size >= n:
        batches = [slice(None)]
    else:
        order = xp.asarray(rng.permutation(n))
        batches = [order[i:i + batch_size] for i in range(0, n, batch_size)]
    # The score: every point against the round's global centroids.
    start = cluster_stats(X, centroids, chunk_size=chunk_size)
    for epoch in range(epochs):
        counts = xp.zeros(centroids.shape[0], dtype=xp.float64)
        for position, b in enumerate(rng.permutation(len(batches))):
            # With a single batch the first step's assignment is the score's.
            first = epoch == 0 and position == 0 and len(batches) == 1
            batch = start if first else cluster_stats(X[batches[b]], centroids, chunk_size=chunk_size)
            counts += batch.counts
            centroids = minibatch_step(centroids, batch, counts, lr)
    return LocalKMeans(centroids, counts, start.inertia)


def count_weighted_mean(local_centroids: Any, counts: Any, current: Any) -> Any:
    """The server's target ``Gamma* = sum_i Lambda_i Gamma_i / Lambda`` (Algorithm 1).

    Parameters
    ----------
    local_centroids : array of shape (m, k, n_features)
        The participants' centroids ``Gamma_i``.
    counts : array of shape (m, k)
        Their cluster sizes ``Lambda_i``.
    current : array of shape (k, n_features)
        The global centroids ``Gamma_{t-1}``.

    Returns
    -------
    array of shape (k, n_features), float64
        The count-weighted mean; a cluster no participant counted a point in
        (``Lambda = 0``, where the formula is 0/0) keeps its current centroid,
        as in the authors' implementation.
    """
    xp = namespace_of(local_centroids)
    mean = weighted_centroid_mean(local_centroids, counts)
    counted = xp.asarray(counts, dtype=xp.float64).sum(axis=0) > 0
    return xp.where(counted[:, None], mean, xp.asarray(current, dtype=xp.float64))


def small_clusters(sizes: Any, points: float, fraction: float) -> np.ndarray:
    """Clusters holding less than `fraction` of the mean cluster size ``points / k``.

    The threshold scales with ``1 / k``: the paper's fixed 1 % of all points
    is a twentieth of the mean size at its k = 5, but the mean size itself at
    k = 100, where it calls about half of k equally large true clusters
    "small" (see :class:`~fedcluster.methods.fedkmeans.strategy.FederatedMiniBatchKMeans`).

    Parameters
    ----------
    sizes : array of shape (k,)
        Cluster sizes (the round's ``Lambda``).
    points : float
        Points the sizes count (the round's participants' points).
    fraction : float
        In [0, 1); 0 marks no cluster.

    Returns
    -------
    ndarray of shape (k,), bool
    """
    sizes = np.asarray(to_numpy(sizes), dtype=np.float64)
    if sizes.ndim != 1 or sizes.size == 0:
        raise ValueError(f"sizes must be a non-empty 1-D array, got shape {sizes.shape}")
    if not (np.isfinite(points) and points >= 0):
        raise ValueError(f"points must be a finite number >= 0, got {points!r}")
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"fraction must be in [0, 1), got {fraction!r}")
    return sizes < fraction * points / sizes.size


def reseed(centroids: Any, due: Any, sizes: Any, radius: float, rng: np.random.Generator) -> np.ndarray:
    """Move the `due` centroids next to the largest clusters.

    The j-th due centroid (in index order) goes to the centroid of the j-th
    largest non-empty cluster that is not due (cycling through them if there
    are more due centroids than donors), plus an offset of length `radius` in
    a uniformly random direction drawn from `rng`. Sharing the donor's
    points, it splits the donor in the following rounds. Without a donor
    nothing moves.

    Parameters
    ----------
    centroids : array of shape (k, n_features)
        Global centroids.
    due : array of shape (k,), bool
        Clusters to re-seed.
    sizes : array of shape (k,)
        Cluster sizes (the round's ``Lambda``), which rank the donors.
    radius : float
        Length of the offset (>= 0).
    rng : numpy.random.Generator
        Source of the directions.

    Returns
    -------
    ndarray of shape (k, n_features), float64
    """
    new = np.array(to_numpy(centroids), dtype=np.float64)
    due = np.asarray(to_numpy(due), dtype=bool)
    sizes = np.asarray(to_numpy(sizes), dtype=np.float64)
    if due.shape != sizes.shape or due.shape != new.shape[:1]:
        raise ValueError(f"due and sizes must have shape ({new.shape[0]},), got {due.shape}, {sizes.shape}")
    if not np.isfinite(radius) or radius < 0:
        raise ValueError(f"radius must be a finite number >= 0, got {radius!r}")
    # Largest first; the stable sort breaks ties by index.
    donors = [j for j in np.argsort(-sizes, kind="stable") if not due[j] and sizes[j] > 0]
    if not donors:
        return new
    for target, donor in zip(np.flatnonzero(due), itertools.cycle(donors)):
        direction = rng.standard_normal(new.shape[1])
        new[target] = new[donor] + radius * direction / np.linalg.norm(direction)
    return new
