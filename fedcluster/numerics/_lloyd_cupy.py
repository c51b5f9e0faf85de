"""CUDA kernels of the GPU Lloyd pass (CuPy only): compiled by CuPy at first use.

Two kernels, launched by :func:`fedcluster.numerics.lloyd._device_pass`,
which holds everything else of the GPU pass (the choice, the blocks, the
buffers) in array operations, tested on the CPU with NumPy standing in:

* :func:`fused` (small k, :func:`fedcluster.numerics.lloyd.use_fused`): one
  read of each row does it all. A thread takes a row into registers (d is a
  compile-time constant, at most 64), scores it against every centroid in
  X's dtype (``||c||^2 - 2 x.c``, lowest first, ties to the lowest index,
  as on the CPU), adds the row to its cluster's float64 sum and count in the
  block's shared memory, and its exact float64 squared distance to the
  inertia. A block adds its shared sums into the global ones once, at the
  end.
* :func:`accumulate` (large k): the labels come from cuBLAS's product
  (:func:`fedcluster.numerics.distance.nearest`); this kernel reads each row
  once more and adds it, its count and its exact squared distance, with
  float64 atomic adds in global memory ((k, d) sums need not fit in shared
  memory).

The float64 atomic adds make the order of the additions, so the last bits
of the sums and of the inertia, vary from run to run (the CPU kernel's do
not); counts of weight 1 are exact. NaN or infinity in a row makes its
squared distance, so the inertia, non-finite, which the caller checks.

Not yet run on a GPU (none was lent to the session that wrote them); their
tests are in tests/test_gpu_lloyd.py, skipped without one. Tuning to
measure there (``perf.py gpu``): rows into shared memory by coalesced loads
rather than one row per thread, warp-level aggregation of the atomic adds,
and the launch shape.
"""

from __future__ import annotations

import functools
from typing import Any

import cupy
import numpy as np

__all__ = ["THREADS", "accumulate", "fused", "fused_shared_bytes"]

#: Threads per block of both kernels.
THREADS = 256

_SOURCE = r"""
template <typename T> __device__ T infinity();
template <> __device__ float infinity<float>() { return __int_as_float(0x7f800000); }
template <> __device__ double infinity<double>() { return __longlong_as_double(0x7ff0000000000000LL); }

// Adds row i (label j, weight w) to sums and counts; returns its exact squared distance
// to centroids[j] in float64 (0 without inertia).
template <typename T>
__device__ __forceinline__ double take(const T* x, int d, int j, double w, const double* centroids,
                       int with_inertia, double* sums, double* counts) {
    atomicAdd(&counts[j], w);
    const double* c = centroids + (long long)j * d;
    double q = 0.0;
    for (int f = 0; f < d; ++f) {
        double xf = (double)x[f];
        atomicAdd(&sums[(long long)j * d + f], w * xf);
        if (with_inertia) {
            double diff = xf - c[f];
            q += diff * diff;
        }
    }
    return q;
}

// Small k: assignment, sums, counts and inertia in one read of X. D = n_features.
// Shared memory: sums (k * D), counts (k), inertia (1), all float64.
template <typename T, int D>
__global__ void lloyd_fused(const T* __restrict__ X, long long n, int k,
                            const T* __restrict__ scaled, const T* __restrict__ c_sq,
                            const double* __restrict__ centroids,
                            const double* __restrict__ weights, int weighted,
                            int with_inertia, int keep_labels, int keep_sqdist,
                            double* sums, double* counts, double* inertia,
                            long long* labels, double* sqdist) {
    extern __shared__ double shared[];
    double* s_sums = shared;
    double* s_counts = shared + (long long)k * D;
    double* s_inertia = s_counts + k;
    for (int t = threadIdx.x; t < k * D + k + 1; t += blockDim.x) shared[t] = 0.0;
    __syncthreads();
    double local = 0.0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        T x[D];  // in registers: D is a constant and the loops over it unroll
#pragma unroll
        for (int f = 0; f < D; ++f) x[f] = X[i * D + f];
        T low = infinity<T>();
        int best = 0;
        for (int j = 0; j < k; ++j) {
            T s = c_sq[j];
            const T* c = scaled + (long long)j * D;
#pragma unroll
            for (int f = 0; f < D; ++f) s += x[f] * c[f];
            if (s < low) { low = s; best = j; }
        }
        double w = weighted ? weights[i] : 1.0;
        double q = take<T>(x, D, best, w, centroids, with_inertia, s_sums, s_counts);
        local += w * q;
        if (keep_labels) labels[i] = best;
        if (keep_sqdist) sqdist[i] = q;
    }
    atomicAdd(s_inertia, local);
    __syncthreads();
    for (int t = threadIdx.x; t < k * D; t += blockDim.x) atomicAdd(&sums[t], s_sums[t]);
    for (int t = threadIdx.x; t < k; t += blockDim.x) atomicAdd(&counts[t], s_counts[t]);
    if (threadIdx.x == 0) atomicAdd(inertia, s_inertia[0]);
}

// Large k: rows labelled by the caller, added to global sums, counts and inertia.
template <typename T>
__global__ void lloyd_accumulate(const T* __restrict__ X, long long n, int d,
                                 const long long* __restrict__ labels,
                                 const double* __restrict__ centroids,
                                 const double* __restrict__ weights, int weighted,
                                 int with_inertia, int keep_sqdist,
                                 double* sums, double* counts, double* inertia, double* sqdist) {
    double local = 0.0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        double w = weighted ? weights[i] : 1.0;
        double q = take<T>(X + i * d, d, (int)labels[i], w, centroids, with_inertia, sums, counts);
        local += w * q;
        if (keep_sqdist) sqdist[i] = q;
    }
    atomicAdd(inertia, local);
}
"""

_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


@functools.cache
def _function(name: str) -> Any:
    """The compiled kernel ``name`` (a template instance), one module per name."""
    module = cupy.RawModule(code=_SOURCE, options=("-std=c++14",), name_expressions=[name])
    return module.get_function(name)


def _grid(n: int) -> int:
    """Blocks of a grid-stride launch over `n` rows: enough to fill the device, no more."""
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    return max(1, min(-(-n // THREADS), 8 * sms))


def fused_shared_bytes(n_clusters: int, n_features: int) -> int:
    """Shared memory of a :func:`fused` block: float64 sums, counts and the inertia."""
    return 8 * (n_clusters * n_features + n_clusters + 1)


def _optional(array: Any, dtype: Any = cupy.float64) -> Any:
    """`array`, or a one-element stand-in where it is None (the kernel is told not to use it)."""
    return cupy.empty(1, dtype=dtype) if array is None else array


def fused(X: Any, scaled: Any, c_sq: Any, centroids: Any, weights: Any, with_inertia: bool,
          sums: Any, counts: Any, inertia: Any, labels: Any, sqdist: Any) -> None:
    """Add the rows of `X` (C-contiguous) to `sums`, `counts`, `inertia` (1,): one fused kernel.

    Writes `labels` (int64) and `sqdist` where given (None: not kept).
    """
    n, d = X.shape
    k = c_sq.shape[0]
    function = _function(f"lloyd_fused<{_TYPES[X.dtype]}, {d}>")
    function((_grid(n),), (THREADS,),
             (X, np.int64(n), np.int32(k), scaled, c_sq, centroids, _optional(weights),
              np.int32(weights is not None), np.int32(with_inertia),
              np.int32(labels is not None), np.int32(sqdist is not None),
              sums, counts, inertia, _optional(labels, cupy.int64), _optional(sqdist)),
             shared_mem=fused_shared_bytes(k, d))


def accumulate(X: Any, labels: Any, centroids: Any, weights: Any, with_inertia: bool,
               sums: Any, counts: Any, inertia: Any, sqdist: Any) -> None:
    """Add the rows of `X` (C-contiguous), labelled `labels` (int64), to the statistics.

    Writes `sqdist` where given.
    """
    n, d = X.shape
    function = _function(f"lloyd_accumulate<{_TYPES[X.dtype]}>")
    function((_grid(n),), (THREADS,),
             (X, np.int64(n), np.int32(d), labels, centroids, _optional(weights),
              np.int32(weights is not None), np.int32(with_inertia),
              np.int32(sqdist is not None), sums, counts, inertia, _optional(sqdist)))
