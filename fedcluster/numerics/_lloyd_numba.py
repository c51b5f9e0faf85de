"""Fused CPU kernels: a Lloyd pass (assignment, sums, counts, inertia), k-means++'s passes.

Why numba: NumPy cannot fuse the steps. Its best form of the pass (a BLAS
product per block, argmin, exact-difference distances, bincount sums, a
finiteness check) makes five passes over each block, four of them on one
core, and ran 12 to 17 times slower than scikit-learn's Lloyd iteration
here. This kernel reads each row once, while it is in the cache:

1. Scores ``||c||^2 - 2 x.c`` in the dtype of `X` (float32 data keeps float32
   speed); the lowest score wins, ties go to the lowest index.
2. Weighted float64 sums and counts per cluster.
3. If asked, the squared distance to the winner from exact differences in
   float64, so that the inertia does not lose ``eps * ||x||^2`` to
   cancellation (S1's coordinates are near 5e5).

`X` is cut into blocks of ``block`` rows and the threads take the blocks one
at a time as they become free (the caller sets numba's parallel chunk size to
one), so a core that another process holds for a while delays only the block
it is on, not half of the pass. Each block accumulates into its own slot and
the caller adds the slots up in block order: the result does not depend on
the thread count or on which thread ran which block. The caller keeps the
number of blocks bounded, so the extra memory is ``O(B * k * d + T * TILE * d)``
for ``B`` blocks and ``T`` threads, whatever the number of rows.

Three score loops: the caller picks the matrix product (below) by size
(:func:`fedcluster.numerics.lloyd.use_product`), and otherwise
:func:`use_row_lanes` picks one of two direct loops:

* row lanes (short rows): a tile of ``TILE`` rows is copied transposed,
  ``(d, TILE)``, so that the vector lanes run over rows; four centroids and
  eight features per pass make each load and store of a score carry 32
  multiply-adds, and the running minimum over the centroids is a vector
  select per lane.
* feature lanes (long rows): dot products over the features, vectorised with
  reassociated partial sums as in a BLAS kernel, four rows by four centroids
  at a time, so that each load feeds four multiply-adds.
* matrix product (many centroids): a tile of ``PRODUCT_TILE`` rows is scored
  by one BLAS product ``(-2 C) X_tile^T``, shape (k, tile), on the calling
  numba thread (the caller limits BLAS to one thread for the pass, so that
  the two thread pools do not compete for the cores), then a vector select
  per row lane adds ``||c||^2`` and keeps the running minimum over the
  centroids, in the same order as the direct loops: lowest score, lowest
  index on ties. The scores are in the dtype of `X` like the direct loops';
  only their rounding differs (BLAS sums the products in its own order), so
  labels can differ from a direct loop's on near-ties alone. The product
  form is :func:`fedcluster.numerics.distance.nearest`'s, here inside the
  fused pass: the sums, counts and exact inertia of the tile are accumulated
  by the same code as the direct loops' (:func:`_take`) while the tile is in
  the cache.

Every row goes through the same arithmetic whatever its position in a block,
tile or group (a short tile or group computes on padding that is then
ignored), so the labels do not depend on the block size or the thread count.

The reassociation (fastmath ``reassoc``) only reorders sums of products; no
flag assumes finite values, so NaN and infinity propagate to the inertia,
which is how :mod:`fedcluster.numerics.lloyd` detects them without a separate
pass over `X`.

Two habits keep numba's code vectorised: the helpers take whole arrays and
row indices (an array view handed from one compiled function to another costs
two atomic reference-count updates, more than the arithmetic of a short row),
and every loop that indexes features starts at a literal 0 (numba then knows
the index is not negative and drops the wrap-around test that would stop
vectorisation).
"""

from __future__ import annotations

import sys

import numpy as np

# numba's np.dot calls the BLAS of SciPy's cython_blas: load it here, before
# the caller's thread-pool controller lists the BLAS libraries it limits.
import scipy.linalg.cython_blas  # noqa: F401
from numba import njit, prange
from numba.core import event

__all__ = ["FEATURE_LANES", "PRODUCT", "PRODUCT_TILE", "ROW_LANES", "TILE", "lloyd_pass",
           "plusplus_nearer", "plusplus_potentials",
           "score_loop", "use_row_lanes"]

# Reordering of sums and fused multiply-add only: NaN and infinity must propagate.
_FLAGS = {"reassoc", "contract"}


def _jit(**options):
    """numba's ``njit`` with the kernel's flags, cached on disk where a cache can live.

    The compiled code goes to ``__pycache__`` beside this file, else to the
    user's cache directory or ``NUMBA_CACHE_DIR``. Where none is writable
    (a read-only install without a home), every process compiles again
    instead of failing at import.
    """
    flags = {"nogil": True, "boundscheck": False, "fastmath": _FLAGS, **options}

    def decorate(function):
        try:
            return njit(cache=True, **flags)(function)
        except RuntimeError:  # numba: "cannot cache function ...: no locator available"
            return njit(cache=False, **flags)(function)

    return decorate


class _CompileNote(event.Listener):
    """Says, once a process, that this module's kernels are being compiled.

    numba signals a compilation only where its disk cache has no code for the
    call (the first run on a machine, or after an upgrade); it takes tens of
    seconds, which a user would otherwise sit through in silence.
    """

    said = False

    def on_start(self, ev) -> None:
        if not self.said and ev.data["dispatcher"].py_func.__module__ == __name__:
            self.said = True
            print("fedcluster: compiling the numerical kernels for this machine (once: numba "
                  "caches them for later runs; tens of seconds)", file=sys.stderr, flush=True)

    def on_end(self, ev) -> None:
        pass


event.register("numba:compile", _CompileNote())

#: Rows per transposed tile of the row-lane loop.
TILE = 64
#: Longest rows (features) for which the row-lane loop is used.
ROW_LANES_MAX_FEATURES = 64


def use_row_lanes(n_features: int) -> bool:
    """Whether rows of `n_features` take the row-lane loop (else the feature-lane loop)."""
    return n_features <= ROW_LANES_MAX_FEATURES


#: The score loops, as :func:`lloyd_pass` takes them.
ROW_LANES, FEATURE_LANES, PRODUCT = 0, 1, 2
#: Rows per tile of the product loop: at k = 1024 its float32 scores take
#: 1 MiB, about what one core's L2 holds, and 256 rows are enough for BLAS to
#: run near its peak.
PRODUCT_TILE = 256


def score_loop(n_features: int, product: bool) -> int:
    """The loop :func:`lloyd_pass` runs: :data:`PRODUCT` if `product`, else a direct one."""
    if product:
        return PRODUCT
    return ROW_LANES if use_row_lanes(n_features) else FEATURE_LANES


@_jit()
def _group_of_four(j, k):
    """The centroids ``j .. j + 3`` a score loop takes together, the last repeated past ``k - 1``.

    A repeated centroid changes nothing: it ties with itself, and a tie
    keeps the lower index.
    """
    return j, min(j + 1, k - 1), min(j + 2, k - 1), min(j + 3, k - 1)


@_jit()
def _reset_lowest(low, best, count):
    """Start the running minimum of rows ``0 .. count - 1``: no score yet, centroid 0."""
    for r in range(count):
        low[r] = np.inf
        best[r] = 0


@_jit()
def _take(X, first, count, best, p0, centroids, weights, with_inertia, sums, counts,
          labels, sqdist):
    """Accumulate rows ``first .. first + count - 1`` of `X`, labelled ``best[p0:p0 + count]``.

    Adds their (weighted) float64 sums and counts; returns their weighted
    inertia from exact float64 differences (0 without `with_inertia`).
    Writes labels and squared distances where `labels` is not empty.

    The feature loops start at a literal 0: numba then knows the index is not
    negative and drops the wrap-around test that would stop vectorisation.
    """
    d = X.shape[1]
    weighted = weights.shape[0] > 0
    keep_rows = labels.shape[0] > 0
    total = 0.0
    for p in range(count):
        row = first + p
        j = np.int64(best[p0 + p])
        w = weights[row] if weighted else 1.0
        counts[j] += w
        if with_inertia:
            q = 0.0
            for f in range(d):
                xf = np.float64(X[row, f])
                sums[j, f] += w * xf
                diff = xf - centroids[j, f]
                q += diff * diff
            total += w * q
            if keep_rows:
                sqdist[row] = q
        else:
            for f in range(d):
                sums[j, f] += w * np.float64(X[row, f])
        if keep_rows:
            labels[row] = j
    return total


@_jit()
def _row_lane_tile(XT, scaled, c_sq, s0, s1, s2, s3, low, best):
    """Lowest score and its centroid for each of the ``TILE`` rows of `XT` (d, TILE).

    `scaled` is ``-2 * centroids`` (k, d) in X's dtype; the centroids go in
    groups of four (:func:`_group_of_four`).
    """
    d = XT.shape[0]
    k = c_sq.shape[0]
    d8 = d - d % 8
    _reset_lowest(low, best, TILE)
    for j in range(0, k, 4):
        j, j1, j2, j3 = _group_of_four(j, k)
        for r in range(TILE):
            s0[r] = c_sq[j]
            s1[r] = c_sq[j1]
            s2[r] = c_sq[j2]
            s3[r] = c_sq[j3]
        for f in range(0, d8, 8):
            x0 = XT[f]
            x1 = XT[f + 1]
            x2 = XT[f + 2]
            x3 = XT[f + 3]
            x4 = XT[f + 4]
            x5 = XT[f + 5]
            x6 = XT[f + 6]
            x7 = XT[f + 7]
            a = scaled[j]
            b = scaled[j1]
            c = scaled[j2]
            e = scaled[j3]
            a0, a1, a2, a3, a4, a5, a6, a7 = a[f], a[f + 1], a[f + 2], a[f + 3], a[f + 4], a[f + 5], a[f + 6], a[f + 7]
            b0, b1, b2, b3, b4, b5, b6, b7 = b[f], b[f + 1], b[f + 2], b[f + 3], b[f + 4], b[f + 5], b[f + 6], b[f + 7]
            c0, c1, c2, c3, c4, c5, c6, c7 = c[f], c[f + 1], c[f + 2], c[f + 3], c[f + 4], c[f + 5], c[f + 6], c[f + 7]
            e0, e1, e2, e3, e4, e5, e6, e7 = e[f], e[f + 1], e[f + 2], e[f + 3], e[f + 4], e[f + 5], e[f + 6], e[f + 7]
            for r in range(TILE):
                v0 = x0[r]
                v1 = x1[r]
                v2 = x2[r]
                v3 = x3[r]
                v4 = x4[r]
                v5 = x5[r]
                v6 = x6[r]
                v7 = x7[r]
                s0[r] += ((v0 * a0 + v1 * a1) + (v2 * a2 + v3 * a3)) + ((v4 * a4 + v5 * a5) + (v6 * a6 + v7 * a7))
                s1[r] += ((v0 * b0 + v1 * b1) + (v2 * b2 + v3 * b3)) + ((v4 * b4 + v5 * b5) + (v6 * b6 + v7 * b7))
                s2[r] += ((v0 * c0 + v1 * c1) + (v2 * c2 + v3 * c3)) + ((v4 * c4 + v5 * c5) + (v6 * c6 + v7 * c7))
                s3[r] += ((v0 * e0 + v1 * e1) + (v2 * e2 + v3 * e3)) + ((v4 * e4 + v5 * e5) + (v6 * e6 + v7 * e7))
        for f in range(d8, d):
            x0 = XT[f]
            a0 = scaled[j, f]
            b0 = scaled[j1, f]
            c0 = scaled[j2, f]
            e0 = scaled[j3, f]
            for r in range(TILE):
                v0 = x0[r]
                s0[r] += v0 * a0
                s1[r] += v0 * b0
                s2[r] += v0 * c0
                s3[r] += v0 * e0
        i0 = np.int32(j)
        i1 = np.int32(j1)
        i2 = np.int32(j2)
        i3 = np.int32(j3)
        for r in range(TILE):
            lo = low[r]
            bi = best[r]
            v = s0[r]
            lt = v < lo
            lo = v if lt else lo
            bi = i0 if lt else bi
            v = s1[r]
            lt = v < lo
            lo = v if lt else lo
            bi = i1 if lt else bi
            v = s2[r]
            lt = v < lo
            lo = v if lt else lo
            bi = i2 if lt else bi
            v = s3[r]
            lt = v < lo
            low[r] = v if lt else lo
            best[r] = i3 if lt else bi


@_jit()
def _feature_lane_group(X, rows, scaled, c_sq, scores, zero):
    """``scores[p, j] = c_sq[j] + X[rows[p]] . scaled[j]`` for the four rows of `rows`.

    The centroids go in groups of four (:func:`_group_of_four`). `zero` has
    X's dtype.
    """
    d = X.shape[1]
    k = c_sq.shape[0]
    r0, r1, r2, r3 = rows[0], rows[1], rows[2], rows[3]
    for j in range(0, k, 4):
        j, j1, j2, j3 = _group_of_four(j, k)
        a00 = a01 = a02 = a03 = a10 = a11 = a12 = a13 = zero
        a20 = a21 = a22 = a23 = a30 = a31 = a32 = a33 = zero
        for f in range(d):
            x0 = X[r0, f]
            x1 = X[r1, f]
            x2 = X[r2, f]
            x3 = X[r3, f]
            c0 = scaled[j, f]
            c1 = scaled[j1, f]
            c2 = scaled[j2, f]
            c3 = scaled[j3, f]
            a00 += x0 * c0
            a01 += x0 * c1
            a02 += x0 * c2
            a03 += x0 * c3
            a10 += x1 * c0
            a11 += x1 * c1
            a12 += x1 * c2
            a13 += x1 * c3
            a20 += x2 * c0
            a21 += x2 * c1
            a22 += x2 * c2
            a23 += x2 * c3
            a30 += x3 * c0
            a31 += x3 * c1
            a32 += x3 * c2
            a33 += x3 * c3
        scores[0, j] = c_sq[j] + a00
        scores[0, j1] = c_sq[j1] + a01
        scores[0, j2] = c_sq[j2] + a02
        scores[0, j3] = c_sq[j3] + a03
        scores[1, j] = c_sq[j] + a10
        scores[1, j1] = c_sq[j1] + a11
        scores[1, j2] = c_sq[j2] + a12
        scores[1, j3] = c_sq[j3] + a13
        scores[2, j] = c_sq[j] + a20
        scores[2, j1] = c_sq[j1] + a21
        scores[2, j2] = c_sq[j2] + a22
        scores[2, j3] = c_sq[j3] + a23
        scores[3, j] = c_sq[j] + a30
        scores[3, j1] = c_sq[j1] + a31
        scores[3, j2] = c_sq[j2] + a32
        scores[3, j3] = c_sq[j3] + a33


@_jit()
def _lowest(scores, p):
    """Index of the lowest of ``scores[p]``, the first on ties (0 if all are NaN)."""
    best = 0
    low = scores[p, 0]
    for j in range(1, scores.shape[1]):
        if scores[p, j] < low:
            low = scores[p, j]
            best = j
    return best


@_jit()
def _lower(score, low, best, index):
    """The running minimum ``(low, best)`` after `score` of centroid `index`; ties keep `best`.

    Two selects on a comparison, so that the loop over rows that calls it
    vectorises.
    """
    lower = score < low
    return (score if lower else low), (index if lower else best)


@_jit()
def _product_tile(X, first, count, scaled, c_sq, S, low, best):
    """Lowest score and its centroid for rows ``first .. first + count - 1``, by a BLAS product.

    ``S`` (k, PRODUCT_TILE) receives ``scaled X_tile^T``; a full tile is
    written in place, a short last one through a temporary (BLAS wants the
    exact shape). The running minimum runs over the centroids with the rows
    in the vector lanes, as in :func:`_row_lane_tile`: a strict ``<`` keeps
    the lower index on ties.
    """
    k = c_sq.shape[0]
    if count == S.shape[1]:
        np.dot(scaled, X[first:first + count].T, S)
    else:
        S[:, :count] = np.dot(scaled, X[first:first + count].T)
    _reset_lowest(low, best, count)
    # Four centroids per sweep over the rows: the running minimum is loaded
    # and stored once for four scores.
    for j in range(0, k, 4):
        j, j1, j2, j3 = _group_of_four(j, k)
        c0, c1, c2, c3 = c_sq[j], c_sq[j1], c_sq[j2], c_sq[j3]
        i0, i1, i2, i3 = np.int32(j), np.int32(j1), np.int32(j2), np.int32(j3)
        s0, s1, s2, s3 = S[j], S[j1], S[j2], S[j3]
        for r in range(count):
            lo, bi = _lower(s0[r] + c0, low[r], best[r], i0)
            lo, bi = _lower(s1[r] + c1, lo, bi, i1)
            lo, bi = _lower(s2[r] + c2, lo, bi, i2)
            low[r], best[r] = _lower(s3[r] + c3, lo, bi, i3)


@_jit()
def _block(b, X, scaled, c_sq, centroids, weights, block, loop, with_inertia,
           sums, counts, inertia, labels, sqdist):
    """Block `b` (rows ``b * block`` to ``(b + 1) * block - 1``), accumulated into slot `b`."""
    n, d = X.shape
    k = centroids.shape[0]
    row_lanes = loop == ROW_LANES
    product = loop == PRODUCT
    local_sums = np.zeros((k, d))
    local_counts = np.zeros(k)
    local_inertia = 0.0
    best = np.zeros(PRODUCT_TILE if product else TILE, dtype=np.int32)
    # Row lanes: the transposed tile, four score vectors, the running minimum.
    XT = np.zeros((d if row_lanes else 0, TILE), dtype=X.dtype)
    s0 = np.empty(TILE, dtype=X.dtype)
    s1 = np.empty(TILE, dtype=X.dtype)
    s2 = np.empty(TILE, dtype=X.dtype)
    s3 = np.empty(TILE, dtype=X.dtype)
    low = np.empty(TILE, dtype=X.dtype)
    # Feature lanes: the scores of four rows.
    scores = np.empty((4, k), dtype=X.dtype)
    rows = np.empty(4, dtype=np.int64)
    zero = np.zeros(1, dtype=X.dtype)[0]
    # Product: the transposed scores of a tile and the running minimum.
    S = np.empty((k if product else 0, PRODUCT_TILE), dtype=X.dtype)
    product_low = np.empty(PRODUCT_TILE if product else 0, dtype=X.dtype)
    start = b * block
    stop = min(n, start + block)
    if product:
        for i in range(start, stop, PRODUCT_TILE):
            m = min(PRODUCT_TILE, stop - i)
            _product_tile(X, i, m, scaled, c_sq, S, product_low, best)
            local_inertia += _take(X, i, m, best, 0, centroids, weights, with_inertia,
                                   local_sums, local_counts, labels, sqdist)
        sums[b] += local_sums
        counts[b] += local_counts
        inertia[b] += local_inertia
        return
    for i in range(start, stop, TILE):
        m = min(TILE, stop - i)
        if row_lanes:
            for r in range(m):
                for f in range(d):
                    XT[f, r] = X[i + r, f]
            _row_lane_tile(XT, scaled, c_sq, s0, s1, s2, s3, low, best)
            local_inertia += _take(X, i, m, best, 0, centroids, weights, with_inertia,
                                   local_sums, local_counts, labels, sqdist)
        else:
            for g in range(0, m, 4):
                for p in range(4):
                    rows[p] = i + min(g + p, m - 1)
                _feature_lane_group(X, rows, scaled, c_sq, scores, zero)
                for p in range(4):
                    best[p] = _lowest(scores, p)
                # Taken at once, while the four rows are in L1.
                local_inertia += _take(X, i + g, min(4, m - g), best, 0, centroids,
                                       weights, with_inertia, local_sums, local_counts,
                                       labels, sqdist)
    sums[b] += local_sums
    counts[b] += local_counts
    inertia[b] += local_inertia


@_jit(parallel=True)
def lloyd_pass(X, scaled, c_sq, centroids, weights, block, loop, with_inertia,
               sums, counts, inertia, labels, sqdist):
    """One fused pass over `X` on numba's threads, one block of rows and one slot at a time.

    Adds block ``b`` into the slots ``sums[b]``, ``counts[b]``, ``inertia[b]``.

    Parameters
    ----------
    X : C-contiguous float32 or float64 array (n, d)
    scaled : ``-2 * centroids`` in X's dtype, C-contiguous (k, d)
    c_sq : squared norms of the centroids in X's dtype, shape (k,)
    centroids : float64 (k, d), for the exact differences
    weights : float64 (n,), or empty for weight 1
    block : rows per block; ``ceil(n / block)`` must not exceed the number of slots
    loop : which score loop (:func:`score_loop`); :data:`PRODUCT` calls BLAS
        on every numba thread, so the caller limits BLAS to one thread
    with_inertia : compute the squared distances (else `inertia` and `sqdist` stay as they are)
    sums, counts, inertia : float64 (B, k, d), (B, k), (B,); B slots, at least one per block
    labels, sqdist : int64 (n,) and float64 (n,) written per row, or both empty
    """
    for b in prange((X.shape[0] + block - 1) // block):
        _block(b, X, scaled, c_sq, centroids, weights, block, loop, with_inertia,
               sums, counts, inertia, labels, sqdist)


# ---------------------------------------------------------------------------
# k-means++ seeding (:func:`fedcluster.numerics.seeding.kmeans_plusplus`)
# ---------------------------------------------------------------------------
# The seeding's random draws stay on the host (the same draws as its NumPy
# form); these two passes are its arithmetic, with squared distances from exact
# differences in float64. They run on the calling thread: a pass is about a
# millisecond's work on a client's 100,000 x 16 rows (0.63 ms measured), and
# waking numba's threads for it cost 24 ms of wall time (4.6 ms of CPU) on the
# 2-core machine under load average 5.


@_jit()
def plusplus_potentials(X, candidates, closest, weights, potentials):
    """Add ``sum(weights * min(||x - c_t||^2, closest))`` over `X`'s rows to ``potentials[t]``.

    Parameters
    ----------
    X : C-contiguous float32 or float64 array (n, d)
    candidates : float64 (t, d)
    closest : float64 (n,), each row's squared distance to its nearest chosen centroid
    weights : float64 (n,)
    potentials : float64 (t,)
    """
    for i in range(X.shape[0]):
        for t in range(candidates.shape[0]):
            total = 0.0
            for j in range(X.shape[1]):
                diff = np.float64(X[i, j]) - candidates[t, j]
                total += diff * diff
            potentials[t] += weights[i] * min(total, closest[i])


@_jit()
def plusplus_nearer(X, centroid, closest):
    """Lower ``closest`` to each row's squared distance to `centroid` (float64 (d,)) if nearer."""
    for i in range(X.shape[0]):
        total = 0.0
        for j in range(X.shape[1]):
            diff = np.float64(X[i, j]) - centroid[j]
            total += diff * diff
        closest[i] = min(total, closest[i])
