"""Squared Euclidean distances between rows and centres, for every part of the package.

Two forms, each used where its trade-off fits:

* direct, ``sum_f (x_f - c_f)^2`` (:func:`sq_distances`,
  :func:`assigned_sq_distances`): differences first, so exact to rounding
  whatever the offset of the data (S1's coordinates are near 5e5, where the
  expansion below loses ``eps * ||x||^2`` to cancellation). It is what every
  reported or thresholded distance uses: inertia, metrics, radii, matchings.
  It holds ``rows * k * d`` differences, so :func:`sq_distances` works in
  blocks of at most :data:`DIFF_BUDGET` of them.
* expanded, ``||x||^2 - 2 x.c + ||c||^2`` clipped at 0
  (:func:`expanded_sq_distances`): one matrix product (BLAS) per block, for
  the many distances whose rounding only moves sampling probabilities or
  membership ratios (k-means++, fuzzy memberships, the pooled silhouette).
  Its callers first subtract an origin near the data from rows and centres,
  so the cancellation scales with the spread of the data, not its offset.

The nearest-centre assignment (:func:`nearest`) ranks the centres by the
expanded form less ``||x||^2``, which is the same for every centre of a row,
from the terms of :func:`score_terms`, and the caller measures the winner
with the direct form. Every assignment of the package ranks by these terms
in the rows' dtype, lowest score first, ties to the lowest index:

* :func:`nearest`: one matrix product per block (BLAS, or cuBLAS on a GPU);
* the numba kernel of :mod:`._lloyd_numba`: the same matrix product per tile
  of rows at large k, direct loops over the features at small k (compiled
  code of their own, which a function of this module cannot be: it runs on
  numba's threads);
* the CUDA kernel of :mod:`._lloyd_cupy` at small k on a GPU.

The compiled ones compute the winner's direct distance in the loop that adds
the row to its cluster's sum, which a shared per-pair helper would split in
two (measured 4 to 13% slower on 2-D data such as S1).

The direct form adds the squares of a pair in one of two orders, chosen by
`summation`: ``"einsum"`` (NumPy's ``einsum``, SIMD partial sums) or
``"pairwise"`` (``sum``, pairwise summation). They differ in the last bits
only; each caller keeps the order it had, so results that were committed
(the benchmark grids) stay bit-identical.

These are kernels: they trust their input (2-D arrays with matching
features; the callers validate). Each works on the array namespace of its
input, NumPy or CuPy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from .backend import namespace_of

__all__ = [
    "DIFF_BUDGET",
    "assigned_sq_distances",
    "expanded_sq_distances",
    "nearest",
    "row_blocks",
    "row_sq_norms",
    "score_terms",
    "sq_distances",
]

Summation = Literal["einsum", "pairwise"]

#: Most (row, centre, feature) differences :func:`sq_distances` holds at once.
DIFF_BUDGET = 1 << 21


def row_blocks(n_samples: int, chunk_size: int) -> Iterator[slice]:
    """Yield the row slices of consecutive blocks of at most `chunk_size` rows."""
    return (slice(start, start + chunk_size) for start in range(0, n_samples, chunk_size))


def row_sq_norms(A: Any, *, summation: Summation = "einsum") -> Any:
    """Squared Euclidean norm of every vector along the last axis of `A`."""
    if summation == "pairwise":
        return namespace_of(A).sum(A * A, axis=-1)
    return namespace_of(A).einsum("...k,...k->...", A, A)


def sq_distances(X: Any, centres: Any, *, summation: Summation = "einsum") -> Any:
    """Direct squared distances of every row of `X` to every centre, shape (n, k), float64.

    A pair's distance depends on that pair alone, so the blocks (rows
    holding at most :data:`DIFF_BUDGET` differences) do not change it.
    """
    xp = namespace_of(X)
    k, d = centres.shape
    step = max(1, DIFF_BUDGET // max(1, k * d))
    out = xp.empty((X.shape[0], k), dtype=xp.float64)
    for rows in row_blocks(X.shape[0], step):
        out[rows] = row_sq_norms(X[rows, None, :] - centres[None, :, :], summation=summation)
    return out


def assigned_sq_distances(rows: Any, centres: Any, labels: Any) -> Any:
    """Direct squared distance of each row to its own centre ``centres[labels]``, shape (m,).

    The differences overwrite the gathered centres, so the block's only
    extra memory is one (m, d) array in the centres' dtype.
    """
    diff = centres[labels]
    diff -= rows
    return row_sq_norms(diff)


def expanded_sq_distances(rows: Any, centres: Any, rows_sq: Any, centres_sq: Any) -> Any:
    """Expanded squared distances ``||x||^2 - 2 x.c + ||c||^2``, clipped at 0, shape (m, k).

    `rows_sq` and `centres_sq` are the squared norms of `rows` and `centres`,
    computed once by the caller for all its blocks. The clip removes the
    negative residue of cancellation. The product is scaled by -2 in place,
    which is exact and costs no (m, d) or (k, d) copy.
    """
    d2 = rows @ centres.T
    d2 *= -2.0
    d2 += rows_sq[:, None]
    d2 += centres_sq
    return namespace_of(d2).maximum(d2, 0.0)


def score_terms(centres: Any, dtype: Any, *, summation: Summation = "einsum") -> tuple[Any, Any]:
    """The centre terms of the assignment's scores: ``-2 * centres`` (k, d), C-contiguous, and
    ``||c||^2`` (k,), both in `dtype` (the rows'), so float32 data keeps float32 speed.

    Scaling by -2 is exact; `summation` is :func:`row_sq_norms`'s (each
    caller keeps the order its committed results were made with).
    """
    xp = namespace_of(centres)
    scaled = xp.ascontiguousarray((-2.0 * centres).astype(dtype))
    return scaled, row_sq_norms(centres, summation=summation).astype(dtype)


def nearest(rows: Any, scaled_t: Any, centres_sq: Any) -> Any:
    """Index of each row's nearest centre, the lowest on ties, shape (m,).

    Ranks the centres by ``||c||^2 - 2 x.c`` (``||x||^2`` is common to the
    row), from ``scaled_t = (-2 * centres).T`` and ``centres_sq``
    (:func:`score_terms`, prepared once by the caller). Use
    :func:`assigned_sq_distances` for the winner's distance.
    """
    scores = rows @ scaled_t
    scores += centres_sq
    return namespace_of(scores).argmin(scores, axis=1)
