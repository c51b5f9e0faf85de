"""Federated fuzzy c-means (Stallmann & Wilbik, FFCM, paper ``001``): client step and averaging.

The client step computes the memberships of eq. 5 against the global centres,
the local centres of eq. 6 and the supports of eq. 7 in one pass over blocks
of ``chunk_size`` rows, so the extra memory is O(chunk_size * k) whatever the
number of samples; :func:`fuzzy_sums` is that pass without the division of
eq. 6, the sums that avg1's sum form sends under DP or secure aggregation
(:mod:`fedcluster.methods.ffcm.client`). The server averages the clients' local centres by the
support-weighted mean of eq. 8 (:func:`~fedcluster.numerics.aggregate.weighted_centroid_mean`)
or by k-means over all of them (eq. 9, :func:`kmeans_average`), and stops when
the summed centre movement (:func:`summed_movement`) is small.

Membership rule
---------------
Eq. 5 as printed raises the ratio of *squared* distances to the power
``2 / (m - 1)``; that rule does not minimise the objective of eq. 4 that the
paper states, and it is not the rule of Bezdek, Ehrlich & Full (1984) that
the paper says it generalises. The kernels here use Bezdek's rule, the
minimiser of eq. 4 for the centres of eq. 6::

    u_ij = 1 / sum_k (||x_i - c_j|| / ||x_i - c_k||) ** (2 / (m - 1))

A point exactly on a centre (zero distance) gets membership 1 for that centre
and 0 for every other one; where several centres coincide at the point's
position (or are all equally near), it shares its membership equally among
them. Both follow from writing the rule relative to the nearest centre,
``u_ij ~ (d_min^2 / d_ij^2) ** (1 / (m - 1))`` with the ratio set to 1 where
``d_ij = d_min``, which also never divides by zero.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from ...numerics._validation import check_centroids, check_data, check_positive_int
from ...numerics.backend import namespace_of, to_numpy
from ...numerics.pooling import pool_centroids
from ...numerics.matching import match_order
from ...numerics.kmeans import kmeans
from ...numerics.distance import expanded_sq_distances, row_blocks, row_sq_norms
from ...numerics.lloyd import DEFAULT_CHUNK_SIZE, ClusterStats, update_centroids

__all__ = [
    "FuzzyStep",
    "FuzzySums",
    "fuzzy_step",
    "fuzzy_sums",
    "kmeans_average",
    "memberships",
    "summed_movement",
]


class FuzzyStep(NamedTuple):
    """Outcome of one client step of federated fuzzy c-means (:func:`fuzzy_step`).

    Attributes
    ----------
    centres : array of shape (k, n_features), float64
        Local centres ``c_j = sum_i u_ij^m x_i / sum_i u_ij^m`` (eq. 6); a
        centre whose support is zero keeps its global position.
    supports : array of shape (k,), float64
        ``W_j = sum_i u_ij^m`` (eq. 7).
    counts : array of shape (k,), float64
        Crisp counts: points whose nearest global centre is ``j``.
    inertia : float
        Crisp sum of squared distances of the points to their nearest global
        centre (the k-means score, comparable with the other methods').
    """

    centres: Any
    supports: Any
    counts: Any
    inertia: float


def _check_fuzzifier(fuzzifier: Any) -> float:
    if isinstance(fuzzifier, bool) or not isinstance(fuzzifier, numbers.Real) \
            or not math.isfinite(fuzzifier) or fuzzifier <= 1:
        raise ValueError(f"fuzzifier must be a finite number > 1, got {fuzzifier!r}")
    return float(fuzzifier)


def _blocks(X: Any, centres: Any, fuzzifier: float, chunk_size: int
            ) -> Iterator[tuple[Any, Any, Any, Any]]:
    """Yield ``(rows, chunk, u, labels)`` block by block.

    ``chunk`` is the block as float64, ``u`` its membership matrix (eq. 5)
    and ``labels`` the index of each row's nearest centre (lowest on ties).
    """
    xp = namespace_of(X)
    # The expanded form around the centres' mean o: one matrix product per
    # block, and the cancellation error scales with the spread about o
    # instead of with ||x||^2 (data far from the origin); memberships only
    # need ratios to the nearest distance.
    origin = xp.mean(centres, axis=0)
    shifted = centres - origin
    c_sq = row_sq_norms(shifted, summation="pairwise")
    exponent = 1.0 / (fuzzifier - 1.0)
    for rows in row_blocks(X.shape[0], chunk_size):
        chunk = X[rows].astype(xp.float64, copy=False)
        centred = chunk - origin
        d2 = expanded_sq_distances(centred, shifted, row_sq_norms(centred), c_sq)
        labels = xp.argmin(d2, axis=1)
        nearest = xp.min(d2, axis=1, keepdims=True)
        farther = d2 > nearest
        ratio = xp.where(farther, nearest / xp.where(farther, d2, 1.0), 1.0) ** exponent
        yield rows, chunk, ratio / xp.sum(ratio, axis=1, keepdims=True), labels


def _check_inputs(X: Any, centres: Any, fuzzifier: Any, chunk_size: Any
                  ) -> tuple[Any, Any, float, int]:
    X = check_data(X)
    centres = check_centroids(centres, X.shape[1], namespace_of(X), "centres")
    return X, centres, _check_fuzzifier(fuzzifier), check_positive_int(chunk_size, "chunk_size")


def memberships(X: Any, centres: Any, *, fuzzifier: float = 2.0,
                chunk_size: int = DEFAULT_CHUNK_SIZE) -> Any:
    """Fuzzy memberships of the samples to the centres (eq. 5, Bezdek's rule).

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        Samples (NumPy or CuPy).
    centres : array of shape (k, n_features)
        Centres.
    fuzzifier : float, default=2.0
        The weighting exponent ``m > 1``.
    chunk_size : int, default=DEFAULT_CHUNK_SIZE
        Number of rows processed at once.

    Returns
    -------
    array of shape (n_samples, k), float64
        Rows sum to 1. A sample on a centre belongs to it alone; a sample on
        several coincident centres belongs to each equally (module docstring).
    """
    X, centres, fuzzifier, chunk_size = _check_inputs(X, centres, fuzzifier, chunk_size)
    xp = namespace_of(X)
    u = xp.empty((X.shape[0], centres.shape[0]), dtype=xp.float64)
    for rows, _, block, _ in _blocks(X, centres, fuzzifier, chunk_size):
        u[rows] = block
    return u


class FuzzySums(NamedTuple):
    """The sums behind one client step of FFCM (:func:`fuzzy_sums`).

    Attributes
    ----------
    sums : array of shape (k, n_features), float64
        ``sum_i u_ij^m x_i`` (the numerator of eq. 6), of the rows as
        ``summed`` maps them.
    supports : array of shape (k,), float64
        ``W_j = sum_i u_ij^m`` (eq. 7, the denominator of eq. 6).
    counts : array of shape (k,), float64
        Crisp counts: points whose nearest global centre is ``j``.
    inertia : float
        Crisp sum of squared distances of the points to their nearest global
        centre.
    """

    sums: Any
    supports: Any
    counts: Any
    inertia: float


def fuzzy_sums(X: Any, centres: Any, *, fuzzifier: float = 2.0,
               chunk_size: int = DEFAULT_CHUNK_SIZE,
               summed: Callable[[Any], Any] | None = None) -> FuzzySums:
    """Membership-weighted sums, supports, crisp counts and squared distances, in one pass.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        The client's samples (NumPy or CuPy).
    centres : array of shape (k, n_features)
        Global centres.
    fuzzifier : float, default=2.0
        The weighting exponent ``m > 1``.
    chunk_size : int, default=DEFAULT_CHUNK_SIZE
        Number of rows processed at once.
    summed : callable, optional
        Maps a block of rows (float64, on the namespace of `X`) to the rows
        that enter ``sums`` (the DP sum form sums clipped, shifted rows,
        :mod:`fedcluster.privacy.mechanism`). The memberships, counts and
        squared distances are always of the rows themselves.

    Returns
    -------
    FuzzySums
        Arrays on the namespace of `X`.
    """
    X, centres, fuzzifier, chunk_size = _check_inputs(X, centres, fuzzifier, chunk_size)
    return _sums(X, centres, fuzzifier, chunk_size, summed)


def _sums(X: Any, centres: Any, fuzzifier: float, chunk_size: int,
          summed: Callable[[Any], Any] | None) -> FuzzySums:
    """:func:`fuzzy_sums` of checked inputs."""
    xp = namespace_of(X)
    k = centres.shape[0]
    sums = xp.zeros_like(centres)
    supports = xp.zeros(k, dtype=xp.float64)
    counts = xp.zeros(k, dtype=xp.float64)
    inertia = 0.0
    for _, chunk, u, labels in _blocks(X, centres, fuzzifier, chunk_size):
        weights = u**fuzzifier
        supports += xp.sum(weights, axis=0)
        sums += weights.T @ (chunk if summed is None else summed(chunk))
        counts += xp.bincount(labels, minlength=k)
        # The squared distance to the nearest centre from the difference, not
        # the expansion: exact to rounding, like the other methods' scores.
        diff = centres[labels] - chunk
        inertia = inertia + xp.sum(diff * diff)
    return FuzzySums(sums, supports, counts, float(inertia))


def fuzzy_step(X: Any, centres: Any, *, fuzzifier: float = 2.0,
               chunk_size: int = DEFAULT_CHUNK_SIZE) -> FuzzyStep:
    """One client step of FFCM: local centres and supports from the global centres.

    Step 3 and 4 of the paper's protocol: the memberships of eq. 5 against
    the global ``centres``, then the local centres of eq. 6 and the supports
    of eq. 7, and the crisp counts and squared distances to the nearest
    global centre, all in one pass (:func:`fuzzy_sums`).

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        The client's samples (NumPy or CuPy).
    centres : array of shape (k, n_features)
        Global centres.
    fuzzifier : float, default=2.0
        The weighting exponent ``m > 1``.
    chunk_size : int, default=DEFAULT_CHUNK_SIZE
        Number of rows processed at once.

    Returns
    -------
    FuzzyStep
        Arrays on the namespace of `X`.
    """
    X, centres, fuzzifier, chunk_size = _check_inputs(X, centres, fuzzifier, chunk_size)
    totals = _sums(X, centres, fuzzifier, chunk_size, None)
    # Eq. 6 is update_centroids' sums / weights; a centre that no point
    # supports (every point sits on another centre) keeps its global position.
    local = update_centroids(ClusterStats(totals.sums, totals.supports, 0.0), centres)
    return FuzzyStep(local, totals.supports, totals.counts, totals.inertia)


def kmeans_average(local_centres: Sequence[Any], k: int, *, rng: np.random.Generator,
                   reference: Any = None, n_init: int = 10, max_iter: int = 300,
                   tol: float = 1e-9) -> np.ndarray:
    """Global centres by k-means over all clients' local centres (avg2, eq. 9).

    Unweighted, as in the paper (the supports do not enter eq. 9), seeded by
    k-means++ with `n_init` starts like the scikit-learn KMeans the paper
    used. The local centres are pooled in an order that does not depend on
    the clients (:func:`~fedcluster.numerics.pooling.pool_centroids`), so
    neither does the result.

    Parameters
    ----------
    local_centres : sequence of arrays of shape (k_i, n_features)
        The clients' local centres, one array per client.
    k : int
        Number of global centres.
    rng : numpy.random.Generator
        Source of the k-means++ draws.
    reference : array of shape (k, n_features), optional
        The current global centres. K-means numbers its clusters arbitrarily;
        with a reference, centre ``j`` of the result is the one matched to
        ``reference[j]`` by the assignment of least total squared distance
        (:func:`~fedcluster.numerics.matching.match_order`), so that the paper's
        convergence criterion compares each centre with its own predecessor.
    n_init, max_iter, tol
        K-means starts, Lloyd steps per start and absolute tolerance.

    Returns
    -------
    ndarray of shape (k, n_features), float64
    """
    sets = [np.asarray(to_numpy(c), dtype=np.float64) for c in local_centres]
    points, _ = pool_centroids(sets, [np.ones(len(c)) for c in sets])
    centres = np.asarray(kmeans(points, k, rng=rng, n_init=n_init, max_iter=max_iter,
                                tol=tol).centroids)
    return centres if reference is None else match_order(centres, np.asarray(to_numpy(reference)))


def summed_movement(new: Any, old: Any) -> float:
    """The paper's convergence measure ``sum_k ||c_k,t - c_k,t+1||`` (Euclidean norms)."""
    xp = namespace_of(new)
    new = xp.asarray(new, dtype=xp.float64)
    old = xp.asarray(old, dtype=xp.float64)
    if new.shape != old.shape or new.ndim != 2:
        raise ValueError(f"need two (k, n_features) arrays of one shape, got {new.shape} and {old.shape}")
    return float(xp.sum(xp.linalg.norm(new - old, axis=1)))
