"""Initial centroids: weighted greedy k-means++ and uniform draws in a box.

All random numbers come from a host-side :class:`numpy.random.Generator`, so a
seed makes the same draws whether the data live on the CPU or on a GPU.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ._validation import check_all_finite, check_data, check_positive_int, check_sample_weight
from .backend import namespace_of, one_blas_thread, to_numpy
from .distance import expanded_sq_distances, row_blocks, row_sq_norms
from .lloyd import DEFAULT_CHUNK_SIZE, worth_compiling

__all__ = ["kmeans_plusplus", "random_in_box"]


def _check_rng(rng: Any) -> None:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng must be a numpy.random.Generator such as np.random.default_rng(seed), "
            f"got {type(rng).__name__}"
        )


def _draw(rng: np.random.Generator, probs: np.ndarray, size: int) -> np.ndarray:
    """Draw `size` indices with probability proportional to `probs` (not all zero)."""
    # A sequential host cumsum is monotone for non-negative terms, which a
    # parallel device scan need not be, and searchsorted relies on it.
    cumulative = np.cumsum(probs)
    total = cumulative[-1]
    # side="right" skips indices whose cumulative sum does not grow (zero probability).
    picks = np.searchsorted(cumulative, rng.random(size) * total, side="right")
    # rng.random() * total may round up to total; the last index where the
    # cumulative sum still grows has positive probability.
    return np.minimum(picks, np.searchsorted(cumulative, total, side="left"))


def _sq_distances(
    X: Any, origin: Any, x_sq: Any, centers: Any, chunk_size: int
) -> Iterator[tuple[slice, Any]]:
    """Yield ``(rows, squared distances of X[rows] to centers)`` block by block.

    `x_sq` holds ``||x - origin||^2``. The distances only feed sampling
    probabilities, so the expanded form
    (:func:`~fedcluster.numerics.distance.expanded_sq_distances`)
    ``||x - o||^2 - 2 x.(c - o) + (2 o.(c - o) + ||c - o||^2)`` is accurate
    enough once `origin`, a data point, removes any large common offset: the
    product's rounding error then scales with ``|x| |c - o|``, not ``|x|^2``,
    and X itself never needs shifting.
    """
    xp = namespace_of(X)
    shifted = centers - origin
    offset = row_sq_norms(shifted, summation="pairwise") + 2.0 * (shifted @ origin)
    for rows in row_blocks(X.shape[0], chunk_size):
        yield rows, expanded_sq_distances(X[rows].astype(xp.float64, copy=False), shifted,
                                          x_sq[rows], offset)


def kmeans_plusplus(
    X: Any,
    k: int,
    *,
    rng: np.random.Generator,
    sample_weight: Any = None,
    n_local_trials: int | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> Any:
    """Choose `k` initial centroids among the samples by greedy k-means++.

    Each new centroid is the best, by weighted potential, of `n_local_trials`
    candidates drawn with probability proportional to ``weight * D(x)^2``,
    ``D(x)`` being the distance to the nearest centroid chosen so far (Arthur
    and Vassilvitskii, 2007; as in scikit-learn). Samples of zero weight are
    never chosen.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        Samples (NumPy or CuPy).
    k : int
        Number of centroids, at most the number of samples with positive weight.
    rng : numpy.random.Generator
        Source of all randomness, drawn on the host.
    sample_weight : array of shape (n_samples,), default=None
        Non-negative weights; ``None`` gives every sample weight 1.
    n_local_trials : int, default=None
        Candidates per centroid; ``None`` means ``2 + int(ln k)``.
    chunk_size : int, default=DEFAULT_CHUNK_SIZE
        Number of rows processed at once.

    Returns
    -------
    array of shape (k, n_features), float64
        Centroids on the namespace of `X`.
    """
    X = check_data(X)
    xp = namespace_of(X)
    k = check_positive_int(k, "k")
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    n_local_trials = check_positive_int(
        2 + int(math.log(k)) if n_local_trials is None else n_local_trials, "n_local_trials"
    )
    _check_rng(rng)
    weights = check_sample_weight(sample_weight, X.shape[0], xp)
    host_weights = to_numpy(weights)
    n_positive = int(np.count_nonzero(host_weights))
    if n_positive < k:
        raise ValueError(
            f"k={k} exceeds the number of samples with positive weight ({n_positive})"
        )

    centers = xp.empty((k, X.shape[1]), dtype=xp.float64)
    centers[0] = X[int(_draw(rng, host_weights, 1)[0])]
    passes = (_CompiledPasses(X, centers[0], weights) if _compiled(X, k)
              else _ArrayPasses(X, centers[0], weights, chunk_size))
    # The host's BLAS on one thread: the array passes' products are small (a
    # chunk by a few candidates), where its threads only wait for each other,
    # and would then spin through the Lloyd passes that follow
    # (``one_blas_thread``). OpenBLAS splits a product's rows, not its sums,
    # between threads: the same result.
    with one_blas_thread if xp is np else contextlib.nullcontext():
        for c in range(1, k):
            probs = to_numpy(weights * passes.closest)
            # All potential is zero only when every weighted sample coincides with a
            # chosen centroid; drawing by weight alone still avoids zero weights.
            candidate_ids = _draw(rng, probs if probs.any() else host_weights, n_local_trials)
            candidates = X[xp.asarray(candidate_ids)].astype(xp.float64)
            best = candidates[int(xp.argmin(passes.potentials(candidates)))]
            centers[c] = best
            passes.take(best)
    return centers


def _compiled(X: Any, k: int) -> bool:
    """Whether the seeding's passes run in the compiled kernels (else in array operations).

    As for a Lloyd pass (:func:`~fedcluster.numerics.lloyd.worth_compiling`),
    and NumPy rows in one block of memory.
    """
    return (namespace_of(X) is np and X.flags.c_contiguous
            and worth_compiling(X.shape[0], X.shape[1], k))


class _ArrayPasses:
    """The seeding's distances by array operations, chunk by chunk (NumPy or CuPy).

    ``closest`` holds each row's squared distance to its nearest chosen
    centroid; :meth:`potentials` gives each candidate's weighted potential,
    :meth:`take` lowers ``closest`` to a new centroid's distances.
    """

    def __init__(self, X: Any, first: Any, weights: Any, chunk_size: int) -> None:
        xp = namespace_of(X)
        self.X, self.weights, self.chunk_size = X, weights, chunk_size
        self.origin = first.copy()
        self.x_sq = xp.concatenate([row_sq_norms(X[rows].astype(xp.float64, copy=False)
                                                 - self.origin)
                                    for rows in row_blocks(X.shape[0], chunk_size)])
        # The origin is the first centroid, so x_sq already is D(x)^2, exactly.
        self.closest = self.x_sq.copy()

    def potentials(self, candidates: Any) -> Any:
        xp = namespace_of(self.X)
        potentials = xp.zeros(candidates.shape[0], dtype=xp.float64)
        for rows, dist in _sq_distances(self.X, self.origin, self.x_sq, candidates,
                                        self.chunk_size):
            potentials += self.weights[rows] @ xp.minimum(dist, self.closest[rows, None])
        return potentials

    def take(self, centroid: Any) -> None:
        xp = namespace_of(self.X)
        for rows, dist in _sq_distances(self.X, self.origin, self.x_sq, centroid[None, :],
                                        self.chunk_size):
            self.closest[rows] = xp.minimum(self.closest[rows], dist[:, 0])


class _CompiledPasses:
    """The seeding's distances in numba's kernels (:mod:`._lloyd_numba`), on the calling thread.

    The same interface as :class:`_ArrayPasses`, the distances from exact
    differences: the potentials differ from the array passes' by rounding
    only, so the draws and choices are the same but on a near-tie.
    """

    def __init__(self, X: np.ndarray, first: np.ndarray, weights: np.ndarray) -> None:
        from . import _lloyd_numba as kernel

        self.kernel = kernel
        self.X, self.weights = X, np.ascontiguousarray(weights)
        self.closest = np.full(X.shape[0], np.inf)
        self.take(first)

    def potentials(self, candidates: np.ndarray) -> np.ndarray:
        potentials = np.zeros(candidates.shape[0])
        self.kernel.plusplus_potentials(self.X, np.ascontiguousarray(candidates), self.closest,
                                        self.weights, potentials)
        return potentials

    def take(self, centroid: np.ndarray) -> None:
        self.kernel.plusplus_nearer(self.X, np.ascontiguousarray(centroid, dtype=np.float64),
                                    self.closest)


def random_in_box(low: Any, high: Any, k: int, *, rng: np.random.Generator) -> Any:
    """Draw `k` centroids uniformly inside the box ``[low, high]``.

    Parameters
    ----------
    low, high : arrays of shape (n_features,)
        Per-feature bounds with ``low <= high``, e.g. the minima and maxima
        over the clients' data.
    k : int
        Number of centroids.
    rng : numpy.random.Generator
        Source of randomness, drawn on the host.

    Returns
    -------
    array of shape (k, n_features), float64
        Centroids on the namespace of `low`.
    """
    xp = namespace_of(low)
    k = check_positive_int(k, "k")
    _check_rng(rng)
    low = np.asarray(to_numpy(low), dtype=np.float64)
    high = np.asarray(to_numpy(high), dtype=np.float64)
    if low.ndim != 1 or low.size < 1 or low.shape != high.shape:
        raise ValueError(
            "low and high must be 1-D arrays of the same shape (n_features,), "
            f"got {low.shape} and {high.shape}"
        )
    check_all_finite(low, "low")
    check_all_finite(high, "high")
    if (low > high).any():
        raise ValueError("low must not exceed high in any feature")
    # Rounding in low + u * (high - low) can overshoot high by one ulp.
    return xp.asarray(np.minimum(low + rng.random((k, low.size)) * (high - low), high))
