"""CUDA kernels of the GPU Lloyd pass (CuPy only): compiled by CuPy at first use.

Two kernels, launched by :func:`fedcluster.numerics.lloyd._device_pass`,
which holds everything else of the GPU pass (the choice, the blocks, the
buffers) in array operations, tested on the CPU with NumPy standing in:

* :func:`fused` (small k, :func:`fedcluster.numerics.lloyd.use_fused`): one
  read of each row from GPU memory does it all. Per tile of a block's rows, a
  thread takes a row into registers (d is a compile-time constant, at most
  64; 16-byte loads where the rows are aligned to them) and scores it
  against every centroid in X's dtype (``||c||^2 - 2 x.c``, lowest first,
  ties to the lowest index, as on the CPU); then each warp adds whole rows
  of the tile, a lane per feature, to the block's float64 sums and counts in
  shared memory and takes each row's exact float64 squared distance as the
  warp's sum of its lanes' parts. A lane per feature makes the second read
  of the tile (from the L1 cache), the centroid reads and the atomic adds
  consecutive in memory: the first version, a thread per row for all of it,
  took 4.7 x (k = 16) and 3.0 x (k = 64) this one's time on an H100. A block
  adds its shared sums into the global ones once, at the end.
* :func:`accumulate` (large k): the labels come from cuBLAS's product
  (:func:`fedcluster.numerics.distance.nearest`); this kernel reads each row
  once more, a warp per row and a lane per feature, and adds it, its count
  and its exact squared distance with float64 atomic adds in global memory
  ((k, d) sums need not fit in shared memory). At (10^6, 128, 1024) on an
  H100 the pass is 2.8 x cuBLAS's product alone, most of it the product's
  argmin and this kernel; visiting the rows in label order (a device sort,
  running sums per segment, few atomic adds) measured the same (17.4 against
  16.9 ms) and was not kept.

The float64 atomic adds make the order of the additions, so the last bits
of the sums and of the inertia, vary from run to run (the CPU kernel's do
not); counts of weight 1 are exact. NaN or infinity in a row makes its
squared distance, so the inertia, non-finite, which the caller checks.

Measured on an H100 by ``perf.py gpu`` (BENCHMARKS.md, "GPU"); their tests
are in tests/test_gpu_lloyd.py, skipped without a GPU.
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

// A row of D values: loaded into registers, and scored against a centroid. VEC = 1: 16-byte
// vector loads (the caller checked the alignment of the rows and of the centroids).
template <typename T, int D, int VEC> struct Row {
    static __device__ __forceinline__ void load(const T* __restrict__ p, T* x) {
#pragma unroll
        for (int f = 0; f < D; ++f) x[f] = p[f];
    }
    static __device__ __forceinline__ T score(T s, const T* __restrict__ c, const T* x) {
#pragma unroll
        for (int f = 0; f < D; ++f) s += x[f] * c[f];
        return s;
    }
};
template <int D> struct Row<float, D, 1> {
    static __device__ __forceinline__ void load(const float* __restrict__ p, float* x) {
        const float4* q = reinterpret_cast<const float4*>(p);
#pragma unroll
        for (int v = 0; v < D / 4; ++v) {
            const float4 a = q[v];
            x[4 * v] = a.x; x[4 * v + 1] = a.y; x[4 * v + 2] = a.z; x[4 * v + 3] = a.w;
        }
    }
    static __device__ __forceinline__ float score(float s, const float* __restrict__ c,
                                                  const float* x) {
        const float4* q = reinterpret_cast<const float4*>(c);
#pragma unroll
        for (int v = 0; v < D / 4; ++v) {
            const float4 a = q[v];
            s += x[4 * v] * a.x; s += x[4 * v + 1] * a.y;
            s += x[4 * v + 2] * a.z; s += x[4 * v + 3] * a.w;
        }
        return s;
    }
};
template <int D> struct Row<double, D, 1> {
    static __device__ __forceinline__ void load(const double* __restrict__ p, double* x) {
        const double2* q = reinterpret_cast<const double2*>(p);
#pragma unroll
        for (int v = 0; v < D / 2; ++v) {
            const double2 a = q[v];
            x[2 * v] = a.x; x[2 * v + 1] = a.y;
        }
    }
    static __device__ __forceinline__ double score(double s, const double* __restrict__ c,
                                                   const double* x) {
        const double2* q = reinterpret_cast<const double2*>(c);
#pragma unroll
        for (int v = 0; v < D / 2; ++v) {
            const double2 a = q[v];
            s += x[2 * v] * a.x; s += x[2 * v + 1] * a.y;
        }
        return s;
    }
};

__device__ __forceinline__ double warp_sum(double q) {
    for (int offset = 16; offset > 0; offset >>= 1) q += __shfl_xor_sync(0xffffffffu, q, offset);
    return q;
}

// Small k: assignment, sums, counts and inertia in one read of X. D = n_features.
// Shared memory: sums (k * D), counts (k), inertia (1), then the tile's weights
// (blockDim.x doubles) and labels (blockDim.x ints).
template <typename T, int D, int VEC>
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
    double* s_w = s_inertia + 1;
    int* s_label = (int*)(s_w + blockDim.x);
    for (int t = threadIdx.x; t < k * D + k + 1; t += blockDim.x) shared[t] = 0.0;
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps = blockDim.x >> 5;
    double local = 0.0;
    // Every thread runs every tile (the loop bound is the block's), so the barriers hold.
    for (long long tile = (long long)blockIdx.x * blockDim.x; tile < n;
         tile += (long long)gridDim.x * blockDim.x) {
        const long long i = tile + threadIdx.x;
        int best = -1;
        double w = 0.0;
        if (i < n) {
            T x[D];  // in registers: D is a constant and the loops over it unroll
            Row<T, D, VEC>::load(X + i * D, x);
            T low = infinity<T>();
            best = 0;
            for (int j = 0; j < k; ++j) {
                const T s = Row<T, D, VEC>::score(c_sq[j], scaled + (long long)j * D, x);
                if (s < low) { low = s; best = j; }
            }
            w = weighted ? weights[i] : 1.0;
            if (keep_labels) labels[i] = best;
        }
        s_label[threadIdx.x] = best;
        s_w[threadIdx.x] = w;
        __syncthreads();
        for (int r = warp; r < (int)blockDim.x; r += warps) {  // r is the warp's: no divergence
            const int j = s_label[r];
            if (j < 0) continue;
            const double wr = s_w[r];
            const T* x = X + (tile + r) * D;
            const double* c = centroids + (long long)j * D;
            double q = 0.0;
            for (int f = lane; f < D; f += 32) {
                const double xf = (double)x[f];
                atomicAdd(&s_sums[j * D + f], wr * xf);
                if (with_inertia) {
                    const double diff = xf - c[f];
                    q += diff * diff;
                }
            }
            if (with_inertia) q = warp_sum(q);
            if (lane == 0) {
                atomicAdd(&s_counts[j], wr);
                local += wr * q;
                if (keep_sqdist) sqdist[tile + r] = q;
            }
        }
        __syncthreads();
    }
    if (lane == 0) atomicAdd(s_inertia, local);
    __syncthreads();
    for (int t = threadIdx.x; t < k * D; t += blockDim.x) atomicAdd(&sums[t], s_sums[t]);
    for (int t = threadIdx.x; t < k; t += blockDim.x) atomicAdd(&counts[t], s_counts[t]);
    if (threadIdx.x == 0) atomicAdd(inertia, s_inertia[0]);
}

// Large k: rows labelled by the caller, added to global sums, counts and inertia.
// A warp adds a row, a lane per feature: its atomic adds go to consecutive
// addresses, and its squared distance is the warp's sum of the lanes' parts.
template <typename T>
__global__ void lloyd_accumulate(const T* __restrict__ X, long long n, int d,
                                 const long long* __restrict__ labels,
                                 const double* __restrict__ centroids,
                                 const double* __restrict__ weights, int weighted,
                                 int with_inertia, int keep_sqdist,
                                 double* sums, double* counts, double* inertia, double* sqdist) {
    const int lane = threadIdx.x & 31;
    const long long first = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long long stride = ((long long)gridDim.x * blockDim.x) >> 5;
    double local = 0.0;
    for (long long i = first; i < n; i += stride) {  // the same rows for the whole warp
        const long long j = labels[i];
        const double w = weighted ? weights[i] : 1.0;
        const T* x = X + i * d;
        const double* c = centroids + j * d;
        double q = 0.0;
        for (int f = lane; f < d; f += 32) {
            double xf = (double)x[f];
            atomicAdd(&sums[j * d + f], w * xf);
            if (with_inertia) {
                double diff = xf - c[f];
                q += diff * diff;
            }
        }
        if (with_inertia) q = warp_sum(q);
        if (lane == 0) {
            atomicAdd(&counts[j], w);
            local += w * q;
            if (keep_sqdist) sqdist[i] = q;
        }
    }
    if (lane == 0 && with_inertia) atomicAdd(inertia, local);
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
    """Shared memory of a :func:`fused` block: float64 sums, counts and the inertia, and a
    tile's float64 weights and int32 labels."""
    return 8 * (n_clusters * n_features + n_clusters + 1) + 12 * THREADS


def _optional(array: Any, dtype: Any = cupy.float64) -> Any:
    """`array`, or a one-element stand-in where it is None (the kernel is told not to use it)."""
    return cupy.empty(1, dtype=dtype) if array is None else array


def _vector_rows(X: Any, scaled: Any) -> int:
    """1 where every row of `X` and of `scaled` starts on a 16-byte boundary (vector loads)."""
    row_bytes = X.shape[1] * X.itemsize
    return int(row_bytes % 16 == 0 and X.data.ptr % 16 == 0 and scaled.data.ptr % 16 == 0)


def fused(X: Any, scaled: Any, c_sq: Any, centroids: Any, weights: Any, with_inertia: bool,
          sums: Any, counts: Any, inertia: Any, labels: Any, sqdist: Any) -> None:
    """Add the rows of `X` (C-contiguous) to `sums`, `counts`, `inertia` (1,): one fused kernel.

    Writes `labels` (int64) and `sqdist` where given (None: not kept).
    """
    n, d = X.shape
    k = c_sq.shape[0]
    function = _function(f"lloyd_fused<{_TYPES[X.dtype]}, {d}, {_vector_rows(X, scaled)}>")
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
