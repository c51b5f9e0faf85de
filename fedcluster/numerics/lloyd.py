"""Chunked Lloyd iterations for (weighted) k-means, without empty-cluster relocation.

A pass over the data (assignment, per-cluster sums and counts, inertia) runs
where the data is:

* NumPy arrays: the fused numba kernel of :mod:`._lloyd_numba`, on all cores,
  which reads each row once; its extra memory is a bounded number of (k, d)
  slots and tiles of rows per thread, whatever the number of samples. Its
  scores come from direct loops at small k, and from a BLAS matrix product
  per tile of rows at large k (:func:`use_product`, where the crossover was
  measured).
* CuPy arrays (a GPU, :func:`_device_pass`): at small k one fused CUDA
  kernel (:mod:`._lloyd_cupy`) that reads each row once; at large k cuBLAS's
  product for the scores, then a CUDA kernel for the sums, counts and
  inertia, on blocks of at least :data:`GPU_MIN_BLOCK_ROWS` rows. Everything
  stays on the device; the (k, d) sums, the k counts and the inertia are
  what a caller brings back.

Both take float32 data as it is for the scores and accumulate in float64; the
inertia comes from exact float64 differences. Non-finite data is detected from
the inertia of the pass, not by a separate pass over the data.
"""

from __future__ import annotations

import contextlib
import math
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

from ._validation import (
    as_samples,
    check_all_finite,
    check_centroids,
    check_non_negative_float,
    check_positive_int,
    check_sample_weight,
)
from .aggregate import frobenius_movement
from .backend import namespace_of, one_blas_thread
from .distance import assigned_sq_distances, nearest, row_blocks, score_terms

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "ClusterStats",
    "LloydResult",
    "assign",
    "cluster_stats",
    "lloyd",
    "update_centroids",
]

DEFAULT_CHUNK_SIZE = 4096


class ClusterStats(NamedTuple):
    """Sufficient statistics of one assignment of samples to centroids.

    Attributes
    ----------
    sums : array of shape (k, n_features), float64
        Per-cluster (weighted) sum of the assigned samples.
    counts : array of shape (k,), float64
        Per-cluster (weighted) number of assigned samples.
    inertia : float
        (Weighted) sum of squared distances of the samples to their nearest
        centroid.
    """

    sums: Any
    counts: Any
    inertia: float


class LloydResult(NamedTuple):
    """Outcome of :func:`lloyd`.

    Attributes
    ----------
    centroids : array of shape (k, n_features), float64
        Centroids after the last step.
    counts : array of shape (k,), float64
        (Weighted) cluster sizes of the last assignment, the one that produced
        `centroids`.
    inertia : float
        Inertia of that last assignment.
    n_iter : int
        Number of Lloyd steps run.
    first : ClusterStats
        Statistics of the assignment against the starting centroids.
    """

    centroids: Any
    counts: Any
    inertia: float
    n_iter: int
    first: ClusterStats


#: Fewest rows per block on a GPU: a block costs a few kernel launches,
#: which only long blocks hide.
GPU_MIN_BLOCK_ROWS = 1 << 18
#: Most centroids and features of the fused GPU kernel: a thread holds its
#: row in registers (d <= 64), and a block's float64 sums, counts and inertia
#: (at most 64 * 65 + 65 values, 33 KiB) fit in the 48 KiB of shared memory a
#: kernel gets without asking. Larger passes take cuBLAS's product.
GPU_FUSED_MAX_CLUSTERS = 64
GPU_FUSED_MAX_FEATURES = 64


def use_fused(n_clusters: int, n_features: int) -> bool:
    """Whether a GPU pass runs the fused kernel (else cuBLAS's product and the accumulation).

    Chosen by what fits (see :data:`GPU_FUSED_MAX_CLUSTERS`). At the largest
    fused size, (10^7, 64, 64) float32 on an H100, the fused pass took 12.7 ms
    where cuBLAS's product and its argmin alone take 11.4 ms, before the
    accumulation (``perf.py gpu``; BENCHMARKS.md, "GPU").
    """
    return n_clusters <= GPU_FUSED_MAX_CLUSTERS and n_features <= GPU_FUSED_MAX_FEATURES

#: Fewest multiply-adds (n * k * d) of a NumPy pass that takes the numba kernel
#: (on all threads). A smaller pass takes the array path with NumPy: about 6 ms
#: at this size, where importing numba and loading the compiled kernel costs
#: about 0.7 s once per process, and Flower 1.39 deployments run every message
#: in a new ClientApp process.
KERNEL_MIN_WORK = 1 << 22


def worth_compiling(n_samples: int, n_features: int, n_clusters: int) -> bool:
    """Whether a NumPy pass of this size takes the numba kernel (:data:`KERNEL_MIN_WORK`)."""
    return n_samples * n_features * n_clusters >= KERNEL_MIN_WORK

#: Most blocks of a kernel pass. Threads take blocks as they become free, so on
#: a shared machine a core that another process holds delays one block, not a
#: fixed half of the pass.
KERNEL_MAX_BLOCKS = 64
#: Fewest rows of a kernel block (a block costs a few small allocations).
KERNEL_MIN_BLOCK_ROWS = 1024
#: Bound on the blocks' (k, d) float64 slots together.
KERNEL_SLOT_BYTES = 32 << 20

#: Fewest centroids for which the kernel scores by a matrix product
#: (:func:`use_product`). Above every k the committed benchmark grids use
#: (at most 100, MNIST's k-means non-IID split), so their passes keep the
#: direct loops bit for bit, although the product already wins at k = 64
#: where d >= 32.
PRODUCT_MIN_CLUSTERS = 128
#: Fewest features for the matrix product: below, BLAS's product is too thin
#: (its depth is d) to beat the direct row-lane loop, which keeps a row's
#: scores in registers.
PRODUCT_MIN_FEATURES = 32


def use_product(n_clusters: int, n_features: int) -> bool:
    """Whether the kernel scores by a BLAS matrix product (else by its direct loops).

    The product (``-2 C X^T`` per tile of 256 rows, then a vector argmin,
    :mod:`._lloyd_numba`) runs BLAS's blocked product, which is faster per
    multiply-add than the direct loops once the product is deep enough (d)
    and wide enough (k). Measured crossover (``perf.py crossover``: one
    thread, CPU time, best of 3, product / direct, float32 and float64, k in
    64..1024; 2-core AMD EPYC, load 11-13): the product wins at d >= 32
    (0.4-0.9, one cell of 32 at 1.03), is mixed at d = 16 (0.80-1.18) and
    loses or ties at d <= 8 (0.87-1.59); it wins most over the feature-lane
    loop (d > 64: 0.39-0.82). Hence d >= :data:`PRODUCT_MIN_FEATURES` = 32,
    and k >= :data:`PRODUCT_MIN_CLUSTERS` = 128 for the grids' sake (above).
    """
    return n_clusters >= PRODUCT_MIN_CLUSTERS and n_features >= PRODUCT_MIN_FEATURES


#: BLAS on one thread (:data:`.backend.one_blas_thread`) around the product loop's passes,
#: a name of this module so that ``perf.py spin`` can switch it off.
_one_blas_thread = one_blas_thread


def _check_finite_after(X: Any, inertia: float) -> None:
    """Raise if `X` holds NaN or infinity, given the inertia of a pass over it.

    A non-finite value in a row makes that row's squared distance NaN or
    infinite, and the (weighted, non-negative) inertia with it, so only a
    non-finite inertia calls for a look at `X` itself.
    """
    if not math.isfinite(inertia):
        check_all_finite(X, "X")


def _check_inputs(
    X: Any, centroids: Any, chunk_size: Any, name: str = "centroids"
) -> tuple[Any, Any, int]:
    # Finiteness is checked after the pass, from its inertia
    # (:func:`_check_finite_after`): a separate pass over X would cost a third
    # of a Lloyd step.
    X = as_samples(X)
    centroids = check_centroids(centroids, X.shape[1], namespace_of(X), name)
    return X, centroids, check_positive_int(chunk_size, "chunk_size")


def _weights(sample_weight: Any, n_samples: int, xp: ModuleType) -> Any:
    """Checked float64 weights, or ``None`` for weight 1 (no array of ones is made)."""
    if sample_weight is None:
        return None
    return check_sample_weight(sample_weight, n_samples, xp)


def _pass(X: Any, centroids: Any, weights: Any, chunk_size: int, *, keep_rows: bool = False,
          with_inertia: bool = True) -> tuple[ClusterStats, Any, Any]:
    """One assignment pass: statistics, and the labels and squared distances if `keep_rows`.

    Without `with_inertia` the squared distances are not computed and the
    inertia is NaN (a Lloyd step that is not the last needs only the sums and
    counts).
    """
    if namespace_of(X) is not np:
        block_rows = max(chunk_size, GPU_MIN_BLOCK_ROWS)
        stats, labels, sqdist = _device_pass(X, centroids, weights, block_rows, keep_rows,
                                             with_inertia)
    elif not worth_compiling(X.shape[0], X.shape[1], centroids.shape[0]):
        # Non-finite data raises below, from the inertia, not as NumPy warnings.
        with np.errstate(invalid="ignore", over="ignore"):
            stats, labels, sqdist = _array_pass(X, centroids, weights, chunk_size, keep_rows,
                                                with_inertia)
    else:
        stats, labels, sqdist = _cpu_pass(X, centroids, weights, chunk_size, keep_rows,
                                          with_inertia)
    if with_inertia:
        _check_finite_after(X, stats.inertia)
    return stats, labels, sqdist


def _cpu_pass(X: np.ndarray, centroids: np.ndarray, weights: np.ndarray | None,
              chunk_size: int, keep_rows: bool, with_inertia: bool
              ) -> tuple[ClusterStats, Any, Any]:
    """The fused numba kernel (:mod:`._lloyd_numba`) on all of numba's threads.

    The rows are cut into at most :data:`KERNEL_MAX_BLOCKS` blocks, which the
    threads take as they become free; each block has a (k, d) slot, at most
    :data:`KERNEL_SLOT_BYTES` in all, so the extra memory does not grow with
    the number of rows. `chunk_size` bounds the copy of a strided `X`, which
    is made one chunk at a time.
    """
    import numba  # loaded with the first large pass, like the kernel

    from . import _lloyd_numba as _kernel

    n, d = X.shape
    k = centroids.shape[0]
    product = use_product(k, d)
    loop = _kernel.score_loop(d, product)
    # The squared distances are exact differences in float64 whatever the
    # dtype of the scores.
    scaled, c_sq = score_terms(centroids, X.dtype)
    # Rows per block: the same for any thread count, so the result is too.
    rows = X.shape[0] if X.flags.c_contiguous else min(n, chunk_size)
    max_blocks = max(1, min(KERNEL_MAX_BLOCKS, KERNEL_SLOT_BYTES // (8 * k * d)))
    block = max(KERNEL_MIN_BLOCK_ROWS, -(-rows // max_blocks))
    slots = -(-rows // block)
    sums = np.zeros((slots, k, d))
    counts = np.zeros((slots, k))
    inertia = np.zeros(slots)
    labels = np.empty(n if keep_rows else 0, dtype=np.int64)
    sqdist = np.empty(n if keep_rows else 0)
    weights = np.empty(0) if weights is None else np.ascontiguousarray(weights)

    def run(part: slice, Xpart: np.ndarray) -> None:
        # Chunk size one: a thread takes the next block when it is free.
        previous = numba.set_parallel_chunksize(1)
        try:
            _kernel.lloyd_pass(
                Xpart, scaled, c_sq, centroids, weights[part] if weights.size else weights,
                block, loop, with_inertia, sums, counts, inertia,
                labels[part] if keep_rows else labels, sqdist[part] if keep_rows else sqdist,
            )
        finally:
            numba.set_parallel_chunksize(previous)

    with _one_blas_thread if product else contextlib.nullcontext():
        if X.flags.c_contiguous:
            run(slice(0, n), X)
        else:
            for part in row_blocks(n, chunk_size):
                run(part, np.ascontiguousarray(X[part]))
    total = float(inertia.sum()) if with_inertia else math.nan
    stats = ClusterStats(sums.sum(axis=0), counts.sum(axis=0), total)
    return stats, (labels if keep_rows else None), (sqdist if keep_rows else None)


def _device_pass(X: Any, centroids: Any, weights: Any, block_rows: int, keep_rows: bool,
                 with_inertia: bool, kernels: Any = None) -> tuple[ClusterStats, Any, Any]:
    """The pass on a GPU: the CUDA kernels of `kernels` (:mod:`._lloyd_cupy`) and array operations.

    Small k (:func:`use_fused`): one launch of the fused kernel over all the
    rows, which reads each row once. Large k: per block of `block_rows`
    rows, cuBLAS's product and argmin (:func:`~.distance.nearest`), then the
    accumulation kernel. The statistics are float64 device arrays; the
    inertia comes back as one number, the only transfer of the pass (none
    without `with_inertia`).

    Written with X's array namespace only, so that it runs with NumPy as
    well: the tests pass it NumPy twins of the two kernels.
    """
    xp = namespace_of(X)
    if kernels is None:
        from . import _lloyd_cupy as kernels
    n, d = X.shape
    k = centroids.shape[0]
    fused = use_fused(k, d)
    centroids = xp.ascontiguousarray(centroids)
    scaled, c_sq = score_terms(centroids, X.dtype)
    sums = xp.zeros((k, d), dtype=xp.float64)
    counts = xp.zeros(k, dtype=xp.float64)
    inertia = xp.zeros(1, dtype=xp.float64)
    labels = xp.empty(n, dtype=xp.int64) if keep_rows else None
    sqdist = xp.empty(n, dtype=xp.float64) if keep_rows and with_inertia else None
    # The fused kernel needs no scores in memory, so no blocks (one launch);
    # the product holds a block's (rows, k) scores.
    for rows in row_blocks(n, n if fused else block_rows):
        block = xp.ascontiguousarray(X[rows])
        w = None if weights is None else xp.ascontiguousarray(weights[rows])
        block_sqdist = None if sqdist is None else sqdist[rows]
        if fused:
            kernels.fused(block, scaled, c_sq, centroids, w, with_inertia, sums, counts,
                          inertia, None if labels is None else labels[rows], block_sqdist)
        else:
            block_labels = nearest(block, scaled.T, c_sq)
            kernels.accumulate(block, block_labels, centroids, w, with_inertia, sums, counts,
                               inertia, block_sqdist)
            if keep_rows:
                labels[rows] = block_labels
    total = float(inertia[0]) if with_inertia else math.nan
    return ClusterStats(sums, counts, total), labels, sqdist


def _array_pass(X: Any, centroids: Any, weights: Any, block_rows: int, keep_rows: bool,
                with_inertia: bool) -> tuple[ClusterStats, Any, Any]:
    """The same pass with array operations of X's namespace, for a NumPy pass too small to
    be worth loading the numba kernel (and the reference of the GPU pass's tests).

    Per block of `block_rows` rows: one matrix product for the scores, argmin,
    one product of the (weighted) one-hot labels with the block for the
    per-cluster sums, and the exact float64 differences to the winners for the
    inertia.
    """
    xp = namespace_of(X)
    n, d = X.shape
    k = centroids.shape[0]
    scaled, c_sq = score_terms(centroids, X.dtype, summation="pairwise")
    scaled_t = scaled.T
    sums = xp.zeros((k, d), dtype=xp.float64)
    counts = xp.zeros(k, dtype=xp.float64)
    inertia = xp.zeros((), dtype=xp.float64)
    labels = xp.empty(n, dtype=xp.int64) if keep_rows else None
    sqdist = xp.empty(n, dtype=xp.float64) if keep_rows and with_inertia else None
    for rows in row_blocks(n, block_rows):
        block = X[rows]
        m = block.shape[0]
        block_labels = nearest(block, scaled_t, c_sq)
        block64 = block.astype(xp.float64)
        w = None if weights is None else weights[rows]
        one_hot = xp.zeros((m, k), dtype=xp.float64)
        one_hot[xp.arange(m), block_labels] = 1.0 if w is None else w
        sums += one_hot.T @ block64
        counts += one_hot.sum(axis=0)
        del one_hot
        if with_inertia:
            block_sqdist = assigned_sq_distances(block64, centroids, block_labels)
            inertia += block_sqdist.sum() if w is None else w @ block_sqdist
            if keep_rows:
                sqdist[rows] = block_sqdist
        if keep_rows:
            labels[rows] = block_labels
    total = float(inertia) if with_inertia else math.nan
    return ClusterStats(sums, counts, total), labels, sqdist


def assign(
    X: Any, centroids: Any, *, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> tuple[Any, Any]:
    """Assign each sample to its nearest centroid.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        Samples (NumPy or CuPy).
    centroids : array of shape (k, n_features)
        Centroids.
    chunk_size : int, default=DEFAULT_CHUNK_SIZE
        Rows per block where blocks are copied: a strided (non C-contiguous)
        NumPy `X`, and on a GPU (at least ``GPU_MIN_BLOCK_ROWS``). Results
        do not depend on it beyond rounding.

    Returns
    -------
    labels : array of shape (n_samples,), int64
        Index of the nearest centroid; ties go to the lowest index.
    sqdist : array of shape (n_samples,), float64
        Squared Euclidean distance to that centroid.
    """
    X, centroids, chunk_size = _check_inputs(X, centroids, chunk_size)
    _, labels, sqdist = _pass(X, centroids, None, chunk_size, keep_rows=True)
    return labels, sqdist


def _cluster_stats(X: Any, centroids: Any, weights: Any, chunk_size: int,
                   with_inertia: bool = True) -> ClusterStats:
    return _pass(X, centroids, weights, chunk_size, with_inertia=with_inertia)[0]


def cluster_stats(
    X: Any,
    centroids: Any,
    *,
    sample_weight: Any = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> ClusterStats:
    """Assign the samples and accumulate per-cluster sums, counts and inertia.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        Samples (NumPy or CuPy); float32 input is accumulated in float64.
    centroids : array of shape (k, n_features)
        Centroids to assign to.
    sample_weight : array of shape (n_samples,), default=None
        Non-negative weights; ``None`` gives every sample weight 1.
    chunk_size : int, default=DEFAULT_CHUNK_SIZE
        Rows per block where blocks are copied: a strided (non C-contiguous)
        NumPy `X`, and on a GPU (at least ``GPU_MIN_BLOCK_ROWS``). Results
        do not depend on it beyond rounding.

    Returns
    -------
    ClusterStats
        Arrays on the namespace of `X`.
    """
    X, centroids, chunk_size = _check_inputs(X, centroids, chunk_size)
    weights = _weights(sample_weight, X.shape[0], namespace_of(X))
    return _cluster_stats(X, centroids, weights, chunk_size)


def update_centroids(stats: ClusterStats, previous: Any) -> Any:
    """Compute the Lloyd update ``sums / counts``, keeping empty clusters in place.

    Parameters
    ----------
    stats : ClusterStats
        Statistics of the assignment against `previous`.
    previous : array of shape (k, n_features)
        Centroids the assignment was made against.

    Returns
    -------
    array of shape (k, n_features), float64
        New centroids. A cluster whose (weighted) count is zero keeps its
        previous centroid: it is never relocated.
    """
    xp = namespace_of(stats.sums)
    previous = xp.asarray(previous, dtype=xp.float64)
    if previous.shape != stats.sums.shape:
        raise ValueError(
            f"previous must have the shape of stats.sums {stats.sums.shape}, got {previous.shape}"
        )
    filled = stats.counts > 0
    safe_counts = xp.where(filled, stats.counts, 1.0)
    return xp.where(filled[:, None], stats.sums / safe_counts[:, None], previous)


def lloyd(
    X: Any,
    init: Any,
    *,
    max_iter: int = 300,
    tol: float = 1e-4,
    sample_weight: Any = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> LloydResult:
    """Run classical Lloyd steps from `init`, never relocating empty clusters.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        Samples (NumPy or CuPy).
    init : array of shape (k, n_features)
        Starting centroids.
    max_iter : int, default=300
        Maximum number of Lloyd steps; ``max_iter=1`` is exactly one step.
    tol : float, default=1e-4
        Stop once the Frobenius norm of a step's centroid movement is below
        `tol` (absolute, as in the DWF paper); ``tol=0`` runs `max_iter` steps.
    sample_weight : array of shape (n_samples,), default=None
        Non-negative weights; ``None`` gives every sample weight 1.
    chunk_size : int, default=DEFAULT_CHUNK_SIZE
        Rows per block where blocks are copied: a strided (non C-contiguous)
        NumPy `X`, and on a GPU (at least ``GPU_MIN_BLOCK_ROWS``). Results
        do not depend on it beyond rounding.

    Returns
    -------
    LloydResult
        Arrays on the namespace of `X`.
    """
    X, centroids, chunk_size = _check_inputs(X, init, chunk_size, name="init")
    weights = _weights(sample_weight, X.shape[0], namespace_of(X))
    max_iter = check_positive_int(max_iter, "max_iter")
    tol = check_non_negative_float(tol, "tol")

    stats = first = _cluster_stats(X, centroids, weights, chunk_size)
    assigned = centroids
    for n_iter in range(1, max_iter + 1):
        new_centroids = update_centroids(stats, centroids)
        movement = frobenius_movement(new_centroids, centroids)
        centroids = new_centroids
        if n_iter == max_iter or movement < tol:
            break
        # Only the last assignment's inertia is returned, as scikit-learn's
        # Lloyd iterations compute none: a pass computes it when it is known
        # to be the last (max_iter), and a stop on `tol` repeats the last
        # assignment with it below (the same pass: same sums and counts).
        stats = _cluster_stats(X, centroids, weights, chunk_size,
                               with_inertia=n_iter + 1 == max_iter)
        assigned = centroids
    if math.isnan(stats.inertia):
        stats = _cluster_stats(X, assigned, weights, chunk_size)
    return LloydResult(centroids, stats.counts, stats.inertia, n_iter, first)
