"""Performance figures of fedcluster, each printed as a ratio against a reference.

Every figure is measured as a ratio against a reference run in the same
process (or the same script run), with repeats, because shared machines are
noisy: a line reads ``median [25th-75th percentile] over N repeats``.

    python benchmarks/perf.py cpu          # local Lloyd step vs scikit-learn, per iteration
    python benchmarks/perf.py kernel       # the same on one thread, CPU time, best of N
    python benchmarks/perf.py crossover    # the kernel's matrix product vs its direct loops
    python benchmarks/perf.py spin         # BLAS's spinning threads vs the kernel's pass
    python benchmarks/perf.py memory       # peak extra memory of a step vs n
    python benchmarks/perf.py gpu          # CuPy step vs reading X once, and vs the CPU
    python benchmarks/perf.py rounds       # rounds to converge and score per method and start
    python benchmarks/perf.py tol          # DWF's rounds and score, tol absolute vs relative
    python benchmarks/perf.py polling      # deployed round vs a bare Flower app (loopback)
    python benchmarks/perf.py fit          # FederatedKMeans.fit vs KMeans(n_init=1) pooled
    python benchmarks/perf.py simulation   # Ray simulation: 100 clients x 50 rounds, 1000 clients
    python benchmarks/perf.py scale        # Ray simulation: 10,000 clients x 5 rounds, CPU, memory
    python benchmarks/perf.py inprocess    # in-process grid memory per client, 100 vs 1000
    python benchmarks/perf.py all

Options: ``--repeats``, ``--threads`` (cpu), ``--quick`` (smaller sizes, for a
smoke test). Nothing here is imported by the package or the tests.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

#: (n, d, k) of issue 5's CPU acceptance (small k: the kernel's direct loops).
CPU_SIZES = [(200_000, 32, 64), (1_000_000, 16, 16), (50_000, 784, 20)]
QUICK_CPU_SIZES = [(20_000, 32, 64), (100_000, 16, 16), (5_000, 784, 20)]
#: (n, d, k) of issue 17's CPU acceptance (large k: the kernel's matrix product
#: where :func:`fedcluster.numerics.lloyd.use_product` picks it).
LARGE_K_SIZES = [(100_000, 128, 256), (100_000, 128, 1024), (1_000_000, 32, 256)]
QUICK_LARGE_K_SIZES = [(10_000, 128, 256), (10_000, 128, 1024), (100_000, 32, 256)]


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def spread(values: Sequence[float]) -> str:
    """``median [p25-p75] over N`` of `values`."""
    q25, q50, q75 = np.percentile(values, [25, 50, 75])
    return f"{q50:.2f} [{q25:.2f}-{q75:.2f}] over {len(values)}"


def settle() -> None:
    """Let the thread pools of the previous measurement stop spinning.

    scikit-learn's OpenMP threads and numba's workers busy-wait for a short
    while after a parallel region; without a pause they would steal the cores
    of the next measurement.
    """
    time.sleep(0.05)


def timed(fn: Callable[[], object]) -> np.ndarray:
    """``[wall, cpu]`` seconds of ``fn()``; cpu is the process's time on all its threads."""
    settle()
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return np.array([time.perf_counter() - wall, time.process_time() - cpu])


def best_cpu_time(fn: Callable[[], object], repeats: int) -> float:
    """Least CPU time of ``fn()`` over `repeats` calls, after one untimed call (warm-up)."""
    fn()
    times = []
    for _ in range(repeats):
        settle()
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def machine() -> str:
    """One line on the machine: cores, CPU model, numpy and its BLAS."""
    model = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    blas = "?"
    try:
        from threadpoolctl import threadpool_info

        blas = ", ".join(sorted({f"{i['internal_api']} {i['version']} ({i.get('architecture')})"
                                 for i in threadpool_info() if i["user_api"] == "blas"}))
    except ImportError:
        pass
    return (f"nproc {os.cpu_count()}, {model}, Python {platform.python_version()}, "
            f"numpy {np.__version__}, BLAS {blas}")


# ---------------------------------------------------------------------------
# cpu: the local Lloyd step against scikit-learn
# ---------------------------------------------------------------------------

def _sizes(args: argparse.Namespace) -> list[tuple[int, int, int]]:
    """The (n, d, k) that ``--sizes`` and ``--quick`` select."""
    groups = {"small": QUICK_CPU_SIZES if args.quick else CPU_SIZES,
              "large": QUICK_LARGE_K_SIZES if args.quick else LARGE_K_SIZES}
    return [size for name, group in groups.items() if args.sizes in (name, "all")
            for size in group]


def _numpy_blas_architecture() -> str | None:
    """The kernel set NumPy's OpenBLAS chose for this CPU (``SkylakeX``, ...), if known."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    found = [i.get("architecture") for i in threadpool_info()
             if i["internal_api"] == "openblas" and "numpy" in i["filepath"]]
    return found[0] if found and found[0] else None


def _faiss_kmeans(threads: int) -> Callable | None:
    """FAISS's k-means iteration as ``fit(X32, C, m) -> None``, or None without FAISS.

    The faiss-cpu wheel bundles an OpenBLAS (0.3.15 in faiss-cpu 1.15) that
    does not know CPUs newer than itself and falls back to its generic
    Prescott (SSE3) kernels there: on this project's Xeon machines FAISS's
    product ran 3.4 x slower than with the AVX-512 kernels NumPy's OpenBLAS
    picks. FAISS is timed with the kernels NumPy's OpenBLAS detected
    (``OPENBLAS_CORETYPE``, read when FAISS's library loads), unless the
    caller set that variable.
    """
    if "OPENBLAS_CORETYPE" not in os.environ and _numpy_blas_architecture():
        os.environ["OPENBLAS_CORETYPE"] = _numpy_blas_architecture()
    try:
        import faiss
    except ImportError:
        return None
    faiss.omp_set_num_threads(threads)

    def fit(X32: np.ndarray, C: np.ndarray, m: int) -> None:
        n, d = X32.shape
        k = C.shape[0]
        # No subsampling (FAISS trains on 256 rows per centroid by default),
        # no early stop: m full iterations over every row.
        km = faiss.Kmeans(d, k, niter=m, seed=0, max_points_per_centroid=n,
                          early_stop_threshold=-1.0, verbose=False)
        km.train(X32, init_centroids=C.astype(np.float32))
        if len(km.obj) != m:
            raise RuntimeError(f"FAISS stopped after {len(km.obj)} of {m}")

    return fit


def cpu(args: argparse.Namespace) -> None:
    """fedcluster's Lloyd iteration over scikit-learn's and FAISS's, same data, start and threads.

    Per iteration on every side is ``(t(m_hi) - t(m_lo)) / (m_hi - m_lo)`` of
    whole fits with ``m`` iterations and ``tol=0`` (fixed costs cancel):
    ``KMeans(algorithm="lloyd", init=C, n_init=1, max_iter=m)`` against
    ``fedcluster.numerics.lloyd(X, C, max_iter=m, tol=0)``. fedcluster's
    iteration also computes the exact float64 inertia, which scikit-learn's
    does not. Like scikit-learn's, fedcluster's intermediate iterations skip
    the inertia (only the last one's is returned); the full step with the
    exact inertia, ``cluster_stats(X, C)``, is timed too and printed against
    the same scikit-learn iteration. The contenders alternate within each
    repeat. Two ratios: of wall-clock time (the acceptance figure) and of CPU
    time summed over the threads, which a busy machine disturbs less (a
    thread that waits for a core costs no CPU time; a thread pool that spins
    costs some).

    FAISS (where ``faiss`` is importable: ``pip install faiss-cpu``):
    ``faiss.Kmeans(d, k, niter=m, max_points_per_centroid=n,
    early_stop_threshold=-1).train(X32, init_centroids=C)``, the same
    per-iteration difference. FAISS's iteration is an exact search of the
    nearest centroid (``IndexFlatL2``: a BLAS product, then the minimum),
    float32 sums and counts of the assigned rows, and its split of empty
    clusters. FAISS takes float32 only: at float64 it runs on a float32
    copy of X made before the timing (so fedcluster's float64 iteration is
    compared with FAISS's float32 one). FAISS gets the same threads
    (``omp_set_num_threads``).

    ``--sizes``: ``small`` (issue 5's: k <= 64, the direct loops), ``large``
    (issue 17's: k of 256 and 1024, the matrix product where it is picked)
    or ``all``.
    """
    import numba
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    from fedcluster.numerics import cluster_stats, lloyd

    threads = args.threads or os.cpu_count()
    numba.set_num_threads(threads)
    if args.numpy_path:
        # The NumPy array path (small passes) at every size: why the kernel is numba.
        import importlib

        importlib.import_module("fedcluster.numerics.lloyd").KERNEL_MIN_WORK = 1 << 62
    m_lo, m_hi = 2, args.iterations
    sizes = _sizes(args)
    faiss_fit = _faiss_kmeans(threads)
    print(f"# cpu: Lloyd iteration, fedcluster / scikit-learn and / FAISS (<= 1.0: fedcluster "
          f"as fast); {threads} thread(s); per iteration from fits of {m_lo} and {m_hi} "
          "iterations" + ("; fedcluster's NumPy array path forced" if args.numpy_path else "")
          + (f"; FAISS's OpenBLAS kernels: {os.environ.get('OPENBLAS_CORETYPE', 'its own choice')}"
             if faiss_fit else "; FAISS not installed (pip install faiss-cpu): not timed"))
    print(f"# {machine()}; load average {os.getloadavg()[0]:.1f}")
    rng = np.random.default_rng(0)
    # scikit-learn limits its BLAS to one thread inside KMeans itself; the
    # limit here sets its OpenMP threads (after scipy's BLAS is loaded).
    with threadpool_limits(limits=threads, user_api="openmp"):
        for dtype in [np.dtype(name).type for name in args.dtypes.split(",")]:
            for n, d, k in sizes:
                X = rng.random((n, d)).astype(dtype)
                X32 = X.astype(np.float32)
                C = X[rng.choice(n, k, replace=False)].astype(np.float64)

                def sk(m: int) -> np.ndarray:
                    km = KMeans(n_clusters=k, init=C, n_init=1, max_iter=m, tol=0,
                                algorithm="lloyd")
                    t = timed(lambda: km.fit(X))
                    if km.n_iter_ != m:
                        raise RuntimeError(f"scikit-learn stopped after {km.n_iter_} of {m}")
                    return t

                def ours(m: int) -> np.ndarray:
                    return timed(lambda: lloyd(X, C, max_iter=m, tol=0))

                def fa(m: int) -> np.ndarray:
                    return timed(lambda: faiss_fit(X32, C, m))

                ours(1)  # compile or load the kernel
                fits: dict[str, list] = {"sk": [], "ours": [], "faiss": []}
                step_times = []
                for _ in range(args.repeats):
                    fits["sk"].append((sk(m_lo), sk(m_hi)))
                    fits["ours"].append((ours(m_lo), ours(m_hi)))
                    if faiss_fit:
                        fits["faiss"].append((fa(m_lo), fa(m_hi)))
                    step_times.append(timed(lambda: cluster_stats(X, C)))
                per_iter = {name: np.array([(hi - lo) / (m_hi - m_lo) for lo, hi in f])
                            for name, f in fits.items() if f}
                ratios = per_iter["ours"] / per_iter["sk"]
                steps = np.array(step_times) / per_iter["sk"]

                def best(f: list) -> np.ndarray:
                    """Per iteration from the fastest fit of each length (timeit's rule)."""
                    f = np.array(f)  # repeats x (lo, hi) x (wall, cpu)
                    return (f[:, 1].min(axis=0) - f[:, 0].min(axis=0)) / (m_hi - m_lo)

                bests = {name: best(f) for name, f in fits.items() if f}
                step_best = np.array(step_times).min(axis=0)
                ms = {name: np.median(t, axis=0)[0] * 1e3 for name, t in per_iter.items()}
                line = (f"cpu {np.dtype(dtype).name} n={n} d={d} k={k}: vs scikit-learn: "
                        f"iteration wall ratio {spread(ratios[:, 0])}, cpu-time ratio "
                        f"{spread(ratios[:, 1])}, best-of wall "
                        f"{bests['ours'][0] / bests['sk'][0]:.2f}; full step (exact inertia) "
                        f"wall ratio {spread(steps[:, 0])}, cpu-time ratio {spread(steps[:, 1])}, "
                        f"best-of wall {step_best[0] / bests['sk'][0]:.2f}")
                if "faiss" in per_iter:
                    vs_faiss = per_iter["ours"] / per_iter["faiss"]
                    line += (f"; vs FAISS: iteration wall ratio {spread(vs_faiss[:, 0])}, "
                             f"cpu-time ratio {spread(vs_faiss[:, 1])}, best-of wall "
                             f"{bests['ours'][0] / bests['faiss'][0]:.2f}")
                line += (" (median wall ms per iteration: "
                         + ", ".join(f"{name} {v:.1f}" for name, v in ms.items())
                         + f", step {np.median(step_times, axis=0)[0] * 1e3:.1f}; "
                         f"load {os.getloadavg()[0]:.1f})")
                print(line, flush=True)


# ---------------------------------------------------------------------------
# kernel: one thread each, CPU time, best of N (per-core efficiency)
# ---------------------------------------------------------------------------

def kernel(args: argparse.Namespace) -> None:
    """Per-core efficiency, less disturbed by a busy machine than ``cpu``.

    One thread on each side, CPU time, best of ``--repeats`` calls:
    fedcluster's pass with the exact inertia (``cluster_stats``) and without
    it (what an intermediate ``lloyd`` iteration runs), over one Lloyd
    iteration of scikit-learn's own loop (its private
    ``lloyd_iter_chunked_dense``, which ``KMeans.fit`` calls once per
    iteration; the fit's bookkeeping between iterations is left out, which
    favours scikit-learn).
    """
    import importlib

    import numba
    from threadpoolctl import threadpool_limits

    try:
        from sklearn.cluster._k_means_lloyd import lloyd_iter_chunked_dense
    except ImportError as exc:
        print(f"kernel: not measured: scikit-learn's Lloyd iteration is not importable ({exc})")
        return
    lloyd_mod = importlib.import_module("fedcluster.numerics.lloyd")

    numba.set_num_threads(1)
    sizes = _sizes(args)
    print("# kernel: one thread each, CPU time, best of N; fedcluster pass / scikit-learn "
          "iteration (<= 1.0: fedcluster as fast)")

    def best(fn: Callable[[], object]) -> float:
        return best_cpu_time(fn, args.repeats)

    rng = np.random.default_rng(0)
    with threadpool_limits(limits=1):
        for dtype in [np.dtype(name).type for name in args.dtypes.split(",")]:
            for n, d, k in sizes:
                X = rng.random((n, d), dtype=dtype)
                C = X[rng.choice(n, k, replace=False)].astype(np.float64)
                weight = np.ones(n, dtype=dtype)
                centres = C.astype(dtype)
                new = np.zeros_like(centres)
                in_cluster = np.zeros(k, dtype=dtype)
                labels = np.full(n, -1, dtype=np.int32)
                shift = np.zeros(k, dtype=dtype)
                sk = best(lambda: lloyd_iter_chunked_dense(X, weight, centres, new, in_cluster,
                                                           labels, shift, 1))
                full = best(lambda: lloyd_mod._cluster_stats(X, C, None, 4096))
                step = best(lambda: lloyd_mod._cluster_stats(X, C, None, 4096, with_inertia=False))
                print(f"kernel {np.dtype(dtype).name} n={n} d={d} k={k}: full step "
                      f"{full / sk:.2f}, iteration without inertia {step / sk:.2f} "
                      f"(scikit-learn {sk / n * 1e9:.1f} ns per row)", flush=True)


# ---------------------------------------------------------------------------
# crossover: the kernel's matrix-product scores against its direct loops
# ---------------------------------------------------------------------------

CROSSOVER_FEATURES = [2, 8, 16, 32, 48, 64, 65, 128, 784]
CROSSOVER_CLUSTERS = [64, 128, 256, 1024]


def crossover(args: argparse.Namespace) -> None:
    """Where the kernel's matrix product beats its direct loops, per (d, k).

    One thread (numba and BLAS), CPU time, best of ``--repeats`` passes
    without the inertia (what an intermediate Lloyd iteration runs), the
    product forced on and off through ``use_product``'s thresholds; n is
    chosen so that each pass holds about 2^28 multiply-adds (2^26 with
    ``--quick``). The ratio is product / direct (< 1: the product is faster).
    """
    import importlib

    import numba
    from threadpoolctl import threadpool_limits

    lloyd_mod = importlib.import_module("fedcluster.numerics.lloyd")
    numba.set_num_threads(1)
    work = 1 << (26 if args.quick else 28)
    print("# crossover: one thread, CPU time, best of N; kernel pass with the matrix product / "
          "with the direct loops (< 1: the product is faster)")
    print(f"# {machine()}")

    def best(fn: Callable[[], object]) -> float:
        return best_cpu_time(fn, args.repeats)

    rng = np.random.default_rng(0)
    saved = lloyd_mod.PRODUCT_MIN_CLUSTERS, lloyd_mod.PRODUCT_MIN_FEATURES
    try:
        with threadpool_limits(limits=1):
            for dtype in [np.dtype(name).type for name in args.dtypes.split(",")]:
                for d in CROSSOVER_FEATURES:
                    cells = []
                    for k in CROSSOVER_CLUSTERS:
                        n = max(4 * k, work // (d * k))
                        X = rng.random((n, d), dtype=dtype)
                        C = X[rng.choice(n, k, replace=False)].astype(np.float64)
                        times = []
                        for forced in (0, 1 << 62):  # product, direct
                            lloyd_mod.PRODUCT_MIN_CLUSTERS = lloyd_mod.PRODUCT_MIN_FEATURES = forced
                            times.append(best(lambda: lloyd_mod._cluster_stats(
                                X, C, None, 4096, with_inertia=False)))
                        cells.append(f"k={k} {times[0] / times[1]:.2f}")
                    print(f"crossover {np.dtype(dtype).name} d={d}: " + ", ".join(cells),
                          flush=True)
    finally:
        lloyd_mod.PRODUCT_MIN_CLUSTERS, lloyd_mod.PRODUCT_MIN_FEATURES = saved


# ---------------------------------------------------------------------------
# spin: BLAS's threads against numba's
# ---------------------------------------------------------------------------

SPIN_SIZES = [(50_000, 784, 20), (200_000, 32, 64), (100_000, 128, 256)]


def spin(args: argparse.Namespace) -> None:
    """What BLAS's own threads cost the kernel's pass, and what the kernel's handling saves.

    OpenBLAS's worker threads busy-wait for a while after each call; a
    numba pass started meanwhile shares the cores with them. Per size, wall
    time of ``cluster_stats`` on all threads, median over ``--repeats``, in
    four cases that alternate within each repeat: the pass alone or right
    after a NumPy matrix product on all of BLAS's threads, each with the
    kernel's handling (BLAS limited to one thread for the pass:
    ``lloyd._one_blas_thread``) and without it (the limit replaced by a
    no-op). Ratios: each case over the pass alone with the handling. At
    k >= 128 (the matrix product, BLAS called from every numba thread) the
    limit also keeps BLAS from starting threads of its own inside numba's.
    """
    import contextlib
    import importlib

    import numba

    lloyd_mod = importlib.import_module("fedcluster.numerics.lloyd")
    handling = lloyd_mod._one_blas_thread
    threads = args.threads or os.cpu_count()
    numba.set_num_threads(threads)
    print(f"# spin: kernel pass wall time on {threads} threads, alone or right after a NumPy "
          "BLAS product, with and without BLAS limited to one thread for the pass; ratios "
          "over 'alone, handled'")
    print(f"# {machine()}; load average {os.getloadavg()[0]:.1f}")
    rng = np.random.default_rng(0)
    A = rng.random((1024, 1024))
    sizes = [(n // 10, d, k) for n, d, k in SPIN_SIZES] if args.quick else SPIN_SIZES
    try:
        for n, d, k in sizes:
            X = rng.random((n, d), dtype=np.float32)
            C = X[rng.choice(n, k, replace=False)].astype(np.float64)
            lloyd_mod._cluster_stats(X, C, None, 4096)  # compile or load the kernel
            cases = {(after, handled): [] for after in (False, True) for handled in (True, False)}
            for _ in range(args.repeats):
                for (after, handled), times in cases.items():
                    lloyd_mod._one_blas_thread = handling if handled else contextlib.nullcontext()
                    settle()
                    if after:
                        A @ A  # wakes BLAS's threads, which then spin
                    start = time.perf_counter()
                    lloyd_mod._cluster_stats(X, C, None, 4096)
                    times.append(time.perf_counter() - start)
            base = np.array(cases[(False, True)])
            line = ", ".join(f"{'after BLAS' if after else 'alone'} "
                             f"{'handled' if handled else 'unhandled'} "
                             f"{spread(np.array(times) / base)}"
                             for (after, handled), times in cases.items())
            print(f"spin n={n} d={d} k={k} ({'product' if lloyd_mod.use_product(k, d) else 'direct'}"
                  f", alone handled {np.median(base) * 1e3:.1f} ms): {line}; "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        lloyd_mod._one_blas_thread = handling


# ---------------------------------------------------------------------------
# memory: peak extra memory of a step does not grow with n
# ---------------------------------------------------------------------------

_MEMORY_PROBE = """
import resource, sys
import numpy as np
from fedcluster.numerics import cluster_stats, lloyd
n, d, k = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
X = rng.random((n, d), dtype=np.float32)  # no float64 temporary to raise the peak
C = X[:k].astype(np.float64)
cluster_stats(X[:50_000], C)  # load numba and the kernel (a smaller pass takes the NumPy path)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cluster_stats(X, C)
lloyd(X, C, max_iter=3, tol=0)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) * 1024, X.nbytes)
"""


def memory(args: argparse.Namespace) -> None:
    """Peak resident memory a step adds above the loaded data, at growing n.

    Each n runs in a fresh process; the figure is the rise of the process's
    peak resident set (``ru_maxrss``) over ``cluster_stats`` and three
    ``lloyd`` steps, after X is loaded and the kernel compiled. The reference
    is the size of X itself.
    """
    d, k = 16, 16
    sizes = [100_000, 1_000_000] if args.quick else [100_000, 1_000_000, 4_000_000]
    print(f"# memory: peak extra resident memory of a step / size of X (d={d}, k={k}, float32)")
    for n in sizes:
        out = subprocess.run([sys.executable, "-c", _MEMORY_PROBE, str(n), str(d), str(k)],
                             capture_output=True, text=True, check=True).stdout.split()
        extra, data = int(out[0]), int(out[1])
        print(f"memory n={n}: extra {extra / 2**20:.1f} MiB, X {data / 2**20:.1f} MiB, "
              f"ratio {extra / data:.4f}", flush=True)


# ---------------------------------------------------------------------------
# gpu: the CuPy step against reading X once, and against the CPU
# ---------------------------------------------------------------------------

class NoGpu(RuntimeError):
    """``perf.py gpu`` was asked for where CuPy sees no GPU."""


def _torch_iteration(X: object, C: object, k: int) -> Callable[[], object] | None:
    """PyTorch's plain Lloyd iteration on the same device memory, or None without PyTorch.

    ``X @ C.T`` (cuBLAS), argmin of ``||c||^2 - 2 x.c``, ``index_add_`` of the
    rows into float64 sums and ``bincount`` counts: the usual hand-written
    GPU k-means iteration, without the exact inertia.
    """
    try:
        import torch
    except ImportError:
        return None
    Xt = torch.from_dlpack(X)
    Ct = torch.from_dlpack(C).to(Xt.dtype)
    c_sq = (Ct * Ct).sum(dim=1)

    def iteration() -> object:
        labels = torch.argmin(c_sq - 2.0 * (Xt @ Ct.T), dim=1)
        sums = torch.zeros((k, Xt.shape[1]), dtype=torch.float64, device=Xt.device)
        sums.index_add_(0, labels, Xt.to(torch.float64))
        return sums, torch.bincount(labels, minlength=k)

    return iteration


def gpu(args: argparse.Namespace) -> None:
    """The GPU pass against reading X once and against cuBLAS's product, on one card.

    Small k (the fused kernel, ``fedcluster.numerics.lloyd.use_fused``): at
    n = 10^7 rows (10^6 with ``--quick``), d = 64, float32, k in (16, 64),
    one pass (``cluster_stats``: labels, float64 sums and counts, exact
    inertia) and one ``lloyd`` iteration (from runs of 2 and 6, ``tol=0``)
    over one read of X: cuBLAS's GEMV ``ones @ X`` (``X.sum(axis=0)`` is a
    slow CuPy reduction, not a bandwidth reference); the target is at most 2
    reads. Large k (cuBLAS's product and the accumulation kernel): at
    (10^6, 128, 1024) (10^5 rows with ``--quick``) the pass over cuBLAS's
    product ``X @ C.T`` alone and with its argmin. Beside each, where
    installed, PyTorch's plain iteration on the same device memory
    (``_torch_iteration``) and FAISS's GPU k-means iteration (from host
    memory, runs of 2 and 6); the agreement with the CPU pass on 200,000 rows;
    then a whole ``fedcluster simulate --backend memory --device cuda`` run
    (``_gpu_simulation``). Times are medians of ``--repeats`` after a warm-up.
    """
    print("# gpu: CuPy Lloyd pass / one read of X (target <= 2 for k <= 64), "
          "and / cuBLAS's product at large k")
    try:
        import cupy

        gpus = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # noqa: BLE001 - missing CuPy or driver: say so and stop
        raise NoGpu(f"no usable CuPy GPU here ({type(exc).__name__}: {exc}); "
                    "install the GPU extra (pip install '.[gpu]') on a machine with a CUDA GPU")
    if gpus == 0:
        raise NoGpu("CuPy sees no CUDA GPU")
    from fedcluster.numerics import cluster_stats, lloyd, to_numpy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    print(f"# device: {props['name'].decode()}, {props['totalGlobalMem'] / 2**30:.0f} GiB; "
          f"CuPy {cupy.__version__}, CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}; "
          f"{machine()}")

    def gpu_time(fn: Callable[[], object]) -> float:
        cupy.cuda.Device().synchronize()
        start = time.perf_counter()
        fn()
        cupy.cuda.Device().synchronize()
        return time.perf_counter() - start

    def median_ms(fn: Callable[[], object]) -> float:
        fn()
        return float(np.median([gpu_time(fn) for _ in range(args.repeats)])) * 1e3

    rng = cupy.random.default_rng(0)
    for n, d, ks in (((10**6 if args.quick else 10**7), 64, (16, 64)),
                     ((10**5 if args.quick else 10**6), 128, (1024,))):
        X = rng.random((n, d), dtype=cupy.float32)
        ones = cupy.ones(n, dtype=cupy.float32)
        read = median_ms(lambda: ones @ X)
        print(f"gpu n={n} d={d} float32: one read of X ({X.nbytes / 2**30:.2f} GiB, GEMV) "
              f"{read:.3f} ms ({X.nbytes / read / 1e6:.0f} GB/s)", flush=True)
        for k in ks:
            C = X[:k].astype(cupy.float64)
            C32 = C.astype(cupy.float32)
            one_pass = median_ms(lambda: cluster_stats(X, C))
            lloyd(X, C, max_iter=1)
            per_iter = [(gpu_time(lambda: lloyd(X, C, max_iter=6, tol=0))
                         - gpu_time(lambda: lloyd(X, C, max_iter=2, tol=0))) / 4
                        for _ in range(args.repeats)]
            iteration = float(np.median(per_iter)) * 1e3
            line = (f"gpu n={n} d={d} k={k}: pass {one_pass:.3f} ms = {one_pass / read:.2f} reads"
                    f"; lloyd iteration {iteration:.3f} ms = {iteration / read:.2f} reads")
            if k > 64:
                product = median_ms(lambda: X @ C32.T)
                with_argmin = median_ms(lambda: cupy.argmin(X @ C32.T, axis=1))
                line += (f"; cuBLAS X @ C.T {product:.3f} ms, with argmin {with_argmin:.3f} ms: "
                         f"pass / product {one_pass / product:.2f}")
            print(line, flush=True)
            rows = min(n, 200_000)
            cpu_stats = cluster_stats(to_numpy(X[:rows]), to_numpy(C))
            gpu_stats = cluster_stats(X[:rows], C)
            print(f"gpu k={k}: GPU / CPU inertia on {rows} rows "
                  f"{gpu_stats.inertia / cpu_stats.inertia:.12f}, counts differ in "
                  f"{int(np.abs(to_numpy(gpu_stats.counts) - cpu_stats.counts).sum())} rows",
                  flush=True)
            torch_iteration = _torch_iteration(X, C, k)
            if torch_iteration is None:
                print("gpu: PyTorch not installed: no comparison with PyTorch")
            else:
                torch_ms = median_ms(torch_iteration)
                print(f"gpu k={k}: PyTorch iteration {torch_ms:.3f} ms; fedcluster pass / "
                      f"PyTorch {one_pass / torch_ms:.2f}", flush=True)
            _faiss_gpu_iteration(X, C, k, one_pass)
        del X, ones
        cupy.get_default_memory_pool().free_all_blocks()
    _gpu_simulation(10**6 if args.quick else 10**7, 64, args)


def _faiss_gpu_iteration(X: object, C: object, k: int, ours_ms: float) -> None:
    """FAISS's GPU k-means iteration on the same rows and start, where FAISS-GPU is installed."""
    try:
        import faiss
    except ImportError:
        print("gpu: FAISS not installed: no comparison with FAISS")
        return
    if not hasattr(faiss, "StandardGpuResources"):
        print("gpu: this FAISS has no GPU support (faiss-cpu): no comparison with FAISS")
        return
    from fedcluster.numerics import to_numpy

    host = to_numpy(X)
    n, d = host.shape
    walls = []
    for iters in (2, 6):
        km = faiss.Kmeans(d, k, niter=iters, gpu=True, seed=0, max_points_per_centroid=n,
                          early_stop_threshold=-1.0)
        start = time.perf_counter()
        km.train(host, init_centroids=to_numpy(C).astype(np.float32))
        walls.append(time.perf_counter() - start)
    faiss_ms = (walls[1] - walls[0]) / 4 * 1e3
    print(f"gpu k={k}: FAISS iteration {faiss_ms:.3f} ms; fedcluster pass / FAISS "
          f"{ours_ms / faiss_ms:.2f}", flush=True)


def _gpu_simulation(n: int, d: int, args: argparse.Namespace) -> None:
    """``fedcluster simulate --device cuda`` on one client of n rows: seconds per round."""
    import tempfile

    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1",
           "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1", "UV_OFFLINE": "1"}
    with tempfile.TemporaryDirectory(prefix="fedcluster-perf-") as tmp:
        rows = Path(tmp) / "rows.npy"
        data = np.lib.format.open_memmap(rows, mode="w+", dtype=np.float32, shape=(n, d))
        rng = np.random.default_rng(0)
        for part in range(0, n, 1_000_000):  # written in parts: no n x d float64 temporary
            data[part:part + 1_000_000] = rng.random((min(1_000_000, n - part), d),
                                                     dtype=np.float32)
        data.flush()
        del data
        walls = {}
        for rounds_ in (2, 6):
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "fedcluster.cli", "simulate", "--backend", "memory",
                 "--dataset",
                 str(rows), "--clients", "1", "--k", "64", "--rounds", str(rounds_), "--tol", "0",
                 "--init", "random", "--device", "cuda", "--out", str(Path(tmp) / f"out{rounds_}")],
                env=env, capture_output=True, text=True, timeout=3600)
            walls[rounds_] = time.perf_counter() - start
            if done.returncode != 0:
                raise RuntimeError(f"simulate failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    print(f"gpu simulate --device cuda, 1 client x {n} rows, d={d}, k=64 (DWF, random start): "
          f"{(walls[6] - walls[2]) / 4:.2f} s per round (runs of 2 and 6 rounds: "
          f"{walls[2]:.1f} s, {walls[6]:.1f} s)", flush=True)


# ---------------------------------------------------------------------------
# rounds: rounds to converge and score per method and start
# ---------------------------------------------------------------------------

def rounds(args: argparse.Namespace) -> None:
    """Runs benchmarks/perf-rounds.toml in-process and summarises it.

    Per method and start: the median number of rounds (tol 1e-4, at most
    100; one-shot methods 1) and the final score (sum of squared distances
    over n, federated) as a ratio to centralized k-means (best of 10 starts)
    on the same dataset, split and seed; medians over S1..S4, two splits
    (IID, Dirichlet 0.3) and the seeds. Finished runs are kept in
    benchmarks/results/perf-rounds and not run again.
    """
    from fedcluster.bench import load_grid, run_grid

    grid = load_grid(ROOT / "benchmarks" / "perf-rounds.toml")
    rows = run_grid(grid, ROOT / "benchmarks" / "results" / "perf-rounds", workers=2,
                    progress=lambda line: None)
    reference = {(r["dataset"], r["split"], r["seed"]): r["score"] for r in rows
                 if r["method"] == "centralized k-means"}
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        if row["method"] != "centralized k-means":
            groups.setdefault((row["method"], row["setting"]), []).append(row)
    print("# rounds: per method and start; score ratio = score / centralized k-means score "
          "(1.00 = as good); medians over S1..S4 x {iid, dirichlet:0.3} x seeds")
    for (method, setting), group in groups.items():
        ratios = [r["score"] / reference[(r["dataset"], r["split"], r["seed"])] for r in group]
        per_set = {ds: np.median([r["score"] / reference[(r["dataset"], r["split"], r["seed"])]
                                  for r in group if r["dataset"] == ds])
                   for ds in sorted({r["dataset"] for r in group})}
        converged = np.mean([bool(r["converged"]) for r in group])
        print(f"rounds {method} [{setting or 'defaults'}]: rounds "
              f"{np.median([r['rounds'] for r in group]):.0f} "
              f"(max {max(r['rounds'] for r in group)}), converged {converged:.0%}, "
              f"score ratio {spread(ratios)}; per set "
              + ", ".join(f"{ds} {v:.3f}" for ds, v in per_set.items()), flush=True)


# ---------------------------------------------------------------------------
# tol: the stopping rule, tol in the data's units or relative to its variance
# ---------------------------------------------------------------------------

def tol(args: argparse.Namespace) -> None:
    """Runs benchmarks/perf-tol.toml in-process and summarises it (228 runs, ~30 CPU-s).

    Per start and (tol, tol-scale): the median and largest number of rounds;
    the rounds needed, the first round after which the score is within 1 %
    of the final score of the absolute tol 1e-4 run of the same start,
    dataset and seed (the longest-running setting; a run that never gets
    there counts all its rounds); the final score against
    centralized k-means (best of 10 starts) on the same dataset and seed;
    and the largest loss against that absolute run. A run's ``history``
    holds the score of each round's incoming centroids, so the score after
    round r is ``history[r]`` and after the last round the run's score.
    Finished runs are kept in benchmarks/results/perf-tol and not run again.
    """
    from fedcluster.bench import load_grid, run_grid

    grid = load_grid(ROOT / "benchmarks" / "perf-tol.toml")
    rows = run_grid(grid, ROOT / "benchmarks" / "results" / "perf-tol", workers=2,
                    progress=lambda line: None)
    if failed := [r for r in rows if r["error"]]:
        raise SystemExit(f"tol: {len(failed)} run(s) failed, the first: {failed[0]['error']}")
    cell = lambda r: (r["dataset"], r["seed"])  # noqa: E731 - a key, used thrice
    reference = {cell(r): r["score"] for r in rows if r["method"] == "centralized k-means"}
    runs = [dict(r, init=r["setting"].split()[0].removeprefix("init="),
                 rule=" ".join(r["setting"].split()[1:])) for r in rows
            if r["method"] != "centralized k-means"]
    longest = {(r["init"], *cell(r)): r for r in runs
               if r["rule"] == "tol=0.0001 tol-scale=absolute"}

    def needed(run: dict) -> int:
        target = 1.01 * longest[(run["init"], *cell(run))]["score"]
        after = [*run["history"][1:], run["score"]]  # the score after rounds 1, 2, ...
        return next((r for r, score in enumerate(after, 1) if score <= target), run["rounds"])

    print("# tol: DWF, S1..S4 IID over 10 clients, seeds "
          f"{sorted({r['seed'] for r in rows})}; rounds median (max); needed = first round "
          "within 1 % of the absolute tol 1e-4 run's final score; score ratio = score / "
          "centralized k-means (best of 10)", flush=True)
    for (init, rule) in dict.fromkeys((r["init"], r["rule"]) for r in runs):
        group = [r for r in runs if (r["init"], r["rule"]) == (init, rule)]
        ratios = [r["score"] / reference[cell(r)] for r in group]
        loss = max(r["score"] / longest[(init, *cell(r))]["score"] - 1 for r in group)
        print(f"tol {init} [{rule}]: rounds {np.median([r['rounds'] for r in group]):.0f} "
              f"(max {max(r['rounds'] for r in group)}), converged "
              f"{np.mean([bool(r['converged']) for r in group]):.0%}, needed "
              f"{np.median([needed(r) for r in group]):.0f} (max {max(needed(r) for r in group)}), "
              f"score ratio {np.median(ratios):.4f} [{min(ratios):.4f}-{max(ratios):.4f}], "
              f"worst loss vs absolute 1e-4 {100 * loss:.3f} %", flush=True)


# ---------------------------------------------------------------------------
# polling: a deployed round against a bare Flower app, same loopback deployment
# ---------------------------------------------------------------------------

def polling(args: argparse.Namespace) -> None:
    """Seconds per deployed round: fedcluster (DWF) and an empty Flower app.

    One SuperLink and two SuperNodes on 127.0.0.1 (tests/harness/localdeploy.py). Per
    round from whole runs of r_lo and r_hi rounds (start-up and the final
    scoring cancel): the empty app with Flower's grid (which sleeps 3 s
    between pulls of replies), the empty app through fedcluster's PromptGrid,
    and fedcluster's DWF (which uses PromptGrid). The SuperNodes' own 3 s poll
    is Flower's and in all three.
    """
    import tempfile

    sys.path.insert(0, str(ROOT / "tests"))
    from harness.localdeploy import LocalDeployment

    from fedcluster.data import load_dataset, partition_indices, write_partitions

    r_lo, r_hi = 2, (6 if args.quick else 12)
    bare = ROOT / "benchmarks" / "perf_bare_app"
    print(f"# polling: seconds per deployed round (2 SuperNodes, loopback), from runs of "
          f"{r_lo} and {r_hi} rounds; ratios against the empty Flower app")
    with tempfile.TemporaryDirectory(prefix="fedcluster-perf-") as tmp:
        work = Path(tmp)
        data = load_dataset("s1")
        files = write_partitions(data.X, partition_indices(len(data.X), 2, "iid", seed=0),
                                 work / "parts")
        configs = [f'data-path="{f}"' for f in files]
        with LocalDeployment(work, configs) as dep:
            def run(app: Path, config: str) -> float:
                start = time.perf_counter()
                done = dep.flwr_run(config, timeout=900, app=app)
                if done.returncode != 0 or "ERROR" in done.stdout:
                    raise RuntimeError(f"flwr run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
                                       f"\n{dep.logs()}")
                return time.perf_counter() - start

            def per_round(app: Path, config: str) -> list[float]:
                values = []
                for _ in range(max(1, args.repeats // 3)):
                    lo = run(app, config.format(rounds=r_lo))
                    hi = run(app, config.format(rounds=r_hi))
                    values.append((hi - lo) / (r_hi - r_lo))
                return values

            out = work / "results"
            stock = per_round(bare, "rounds={rounds} nodes=2 prompt=false")
            prompt = per_round(bare, "rounds={rounds} nodes=2 prompt=true")
            dwf = per_round(ROOT, "k=15 min-nodes=2 tol=0 init=\"random\" "
                                  f"num-server-rounds={{rounds}} out-dir=\"{out}\"")
    for name, values in (("empty app, Flower's grid", stock), ("empty app, PromptGrid", prompt),
                         ("fedcluster DWF", dwf)):
        print(f"polling {name}: {np.median(values):.2f} s per round "
              f"({', '.join(f'{v:.2f}' for v in values)}); ratio to the empty app with "
              f"Flower's grid {np.median(values) / np.median(stock):.2f}, with PromptGrid "
              f"{np.median(values) / np.median(prompt):.2f}", flush=True)


# ---------------------------------------------------------------------------
# fit: the library's whole fit against scikit-learn's on the pooled rows
# ---------------------------------------------------------------------------

def fit(args: argparse.Namespace) -> None:
    """CPU time of ``FederatedKMeans.fit`` over 10 parts against ``KMeans(n_init=1)`` pooled.

    Issue 29's size (1e6 x 16, k = 16, 10 equal parts of 16 blobs), warm (one
    untimed fit of each first), interleaved: in each repeat the fit, the same
    fit with k-means++ seeding by array operations (its form before the
    compiled kernels), and scikit-learn's. All on all cores (numba's and
    scikit-learn's OpenMP threads); CPU time of the process over its threads.
    """
    from sklearn.cluster import KMeans
    from sklearn.datasets import make_blobs

    from fedcluster import FederatedKMeans
    from fedcluster.numerics import seeding

    n, d, k, owners = (100_000, 16, 16, 10) if args.quick else (1_000_000, 16, 16, 10)
    X, _ = make_blobs(n_samples=n, n_features=d, centers=k, random_state=0)
    parts = np.array_split(X, owners)
    compiled = seeding._compiled

    def ours(seed: int, seeding_compiled: bool = True) -> object:
        seeding._compiled = compiled if seeding_compiled else (lambda X, k: False)
        try:
            return FederatedKMeans(n_clusters=k, random_state=seed).fit(parts)
        finally:
            seeding._compiled = compiled

    def theirs(seed: int) -> object:
        return KMeans(n_clusters=k, n_init=1, random_state=seed).fit(X)

    def inertia(model) -> float:
        centres = np.asarray(model.cluster_centers_, dtype=np.float64)
        return sum(float(((part[:, None, :] - centres[None]) ** 2).sum(-1).min(1).sum())
                   for part in np.array_split(X, 100))

    ours(0), ours(0, False), theirs(0)  # warm: numba's kernels loaded, scikit-learn's imports
    cpu: dict[str, list[float]] = {"ours": [], "array": [], "theirs": []}
    inertias = []
    for seed in range(1, args.repeats + 1):
        models = {}
        for name, run in (("ours", lambda: ours(seed)), ("array", lambda: ours(seed, False)),
                          ("theirs", lambda: theirs(seed))):
            cpu[name].append(timed(lambda: models.__setitem__(name, run()))[1])
        inertias.append(inertia(models["ours"]) / inertia(models["theirs"]))
    ratio = np.array(cpu["ours"]) / np.array(cpu["theirs"])
    before = np.array(cpu["array"]) / np.array(cpu["theirs"])
    print(f"# fit: FederatedKMeans.fit ({owners} parts) / KMeans(n_init=1) pooled, "
          f"({n}, {d}, {k}), CPU s, {machine()}, load {os.getloadavg()[0]:.1f}")
    print(f"fit cpu ratio {spread(ratio)} (min {ratio.min():.2f}); with array seeding "
          f"{spread(before)} (min {before.min():.2f}); medians: ours "
          f"{np.median(cpu['ours']):.2f} s, array seeding {np.median(cpu['array']):.2f} s, "
          f"scikit-learn {np.median(cpu['theirs']):.2f} s; inertia ratio {spread(inertias)}", flush=True)


# ---------------------------------------------------------------------------
# simulation: Flower's Ray simulation at 100 and 1000 clients
# ---------------------------------------------------------------------------

def simulation(args: argparse.Namespace) -> None:
    """Wall time of ``fedcluster simulate`` (DWF on S1, IID, tol 0: every round runs).

    100 clients x 50 rounds against issue 5's budget of 120 s on two cores,
    and 1000 clients x 50 rounds (recorded).
    """
    import tempfile

    cases = [(100, 50, 120.0), (1000, 10, None)]
    if args.quick:
        cases = [(100, 5, None)]
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1",
           "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1", "UV_OFFLINE": "1"}
    print("# simulation: fedcluster simulate, DWF on S1, wall seconds (Ray start included)")
    for clients, rounds_, budget in cases:
        with tempfile.TemporaryDirectory(prefix="fedcluster-perf-") as tmp:
            start = time.perf_counter()
            done = subprocess.run(
                [str(Path(sys.executable).parent / "fedcluster"), "simulate", "--clients",
                 str(clients), "--rounds", str(rounds_), "--tol", "0", "--out", tmp],
                env=env, capture_output=True, text=True, timeout=3600)
            wall = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"simulate failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        ran = (done.stdout + done.stderr).count(f"/{rounds_}: movement")
        line = f"simulation {clients} clients x {rounds_} rounds: {wall:.1f} s ({ran} rounds ran)"
        if budget:
            line += f", ratio to the {budget:.0f} s budget {wall / budget:.2f}"
        print(line, flush=True)


# ---------------------------------------------------------------------------
# scale: 10,000 simulated clients x 5 rounds under Ray
# ---------------------------------------------------------------------------

def _process_tree(root: int) -> list[int]:
    """`root` and its descendants, from /proc's parent ids."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def scale(args: argparse.Namespace) -> None:
    """Wall time, CPU and memory of ``fedcluster simulate`` with 10,000 clients x 5 rounds.

    Blobs of 200,000 rows (20 a client), k = 5, tol 0. CPU and memory of all
    the command's processes (Ray's and its actors included) are sampled from
    /proc every 2 s: each process's last CPU time seen, and the largest sum
    of resident memory; the command's own process from ``getrusage``.
    """
    import resource
    import tempfile

    clients, rows = (1000, 20_000) if args.quick else (10_000, 200_000)
    command = [str(Path(sys.executable).parent / "fedcluster"), "simulate", "--dataset", "blobs",
               "--blobs-samples", str(rows), "--k", "5", "--clients", str(clients),
               "--rounds", "5", "--tol", "0"]
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1",
           "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1", "UV_OFFLINE": "1"}
    tick = os.sysconf("SC_CLK_TCK")
    cpu: dict[int, float] = {}
    peak = 0
    with tempfile.TemporaryDirectory(prefix="fedcluster-perf-") as tmp:
        start = time.perf_counter()
        process = subprocess.Popen([*command, "--out", tmp], env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        seen: set[int] = set()
        while process.poll() is None:
            resident = 0
            for pid in set(_process_tree(process.pid)) | seen:
                try:
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                cpu[pid] = (int(fields[11]) + int(fields[12])) / tick
                resident += pages * os.sysconf("SC_PAGE_SIZE")
                seen.add(pid)
            peak = max(peak, resident)
            time.sleep(2)
        wall = time.perf_counter() - start
        output = process.stdout.read()
    if process.returncode != 0:
        raise RuntimeError(f"simulate failed:\n{output[-2000:]}")
    own = resource.getrusage(resource.RUSAGE_CHILDREN)
    rounds = output.count("clients " + f"{clients}/{clients}")
    print(f"# scale: {' '.join(command[1:])}; load {os.getloadavg()[0]:.1f}")
    print(f"scale {clients} clients: wall {wall:.0f} s, rounds with every client {rounds}/5; "
          f"CPU all processes {sum(cpu.values()):.0f} s (sampled), the command "
          f"{own.ru_utime + own.ru_stime:.0f} s; peak memory all processes "
          f"{peak / 2**20:.0f} MiB (sampled), the command {own.ru_maxrss / 1024:.0f} MiB",
          flush=True)


# ---------------------------------------------------------------------------
# inprocess: memory of the in-memory federation per client
# ---------------------------------------------------------------------------

_INPROCESS_PROBE = """
import gc, logging, sys, time, tracemalloc
from pathlib import Path
import numpy as np
from fedcluster.config import RunConfig
from fedcluster.client.memory import InMemoryFederation
from fedcluster.config import build_strategy
logging.getLogger("flwr").setLevel(logging.WARNING)
files = sorted(Path(sys.argv[1]).glob("client_*.npy"))
parts = [np.load(f) for f in files]
config = RunConfig.from_mapping({"algorithm": "dwf", "k": 8, "num-server-rounds": 5,
                                 "tol": 0.0, "init": "random", "out-dir": sys.argv[2]})
# Warm up on two clients: imports, compiled kernels, Flower's machinery.
build_strategy(config).fit(InMemoryFederation(parts[:2]))
gc.collect()
tracemalloc.start()
start = time.perf_counter()
build_strategy(config).fit(InMemoryFederation(parts))
wall = time.perf_counter() - start
print(tracemalloc.get_traced_memory()[1], wall)
"""


def inprocess(args: argparse.Namespace) -> None:
    """Memory the in-process grid adds per client, against the data it holds.

    A fresh process per case runs DWF (random start, 5 rounds) over the
    clients' arrays through InMemoryFederation; the figure is the peak of the
    memory allocated during the run (tracemalloc, which NumPy reports its
    arrays to), after a warm-up run. At a fixed total of rows, 100 against 1000
    clients gives the per-client overhead; at a fixed number of clients,
    growing rows gives what the data costs.
    """
    import tempfile

    from fedcluster.data import partition_indices, write_partitions

    cases = [(100, 200_000), (1000, 200_000), (1000, 1_000_000)]
    if args.quick:
        cases = [(100, 50_000), (1000, 50_000)]
    print("# inprocess: InMemoryFederation, DWF 5 rounds, d=8; peak memory allocated during the run "
          "(tracemalloc, after a warm-up run: imports and kernels excluded) / bytes of the "
          "clients' rows")
    results = {}
    rng = np.random.default_rng(0)
    for clients, rows in cases:
        with tempfile.TemporaryDirectory(prefix="fedcluster-perf-") as tmp:
            X = rng.normal(size=(rows, 8)) + 10.0 * rng.integers(0, 8, size=(rows, 1))
            write_partitions(X, partition_indices(rows, clients, "iid", seed=0), f"{tmp}/parts")
            out = subprocess.run([sys.executable, "-c", _INPROCESS_PROBE, f"{tmp}/parts", tmp],
                                 capture_output=True, text=True, check=True).stdout.split()
        extra, wall = int(out[0]), float(out[1])
        results[(clients, rows)] = extra
        print(f"inprocess {clients} clients, {rows} rows: +{extra / 2**20:.1f} MiB "
              f"(rows {X.nbytes / 2**20:.1f} MiB, ratio {extra / X.nbytes:.2f}), {wall:.1f} s",
              flush=True)
    (c1, r1), (c2, r2) = cases[0], cases[1]
    per_client = (results[(c2, r2)] - results[(c1, r1)]) / (c2 - c1)
    print(f"inprocess per-client overhead: {per_client / 1024:.1f} KiB per client "
          f"(from {c1} to {c2} clients at {r1} rows)")


SECTIONS = {"cpu": cpu, "kernel": kernel, "crossover": crossover, "spin": spin, "memory": memory, "gpu": gpu, "rounds": rounds, "tol": tol, "polling": polling,
            "fit": fit, "simulation": simulation, "scale": scale, "inprocess": inprocess}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("section", choices=[*SECTIONS, "all"])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=0, help="cpu: threads on both sides "
                        "(default: all cores)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke test)")
    parser.add_argument("--numpy-path", action="store_true",
                        help="cpu: time the NumPy array path instead of the numba kernel")
    parser.add_argument("--dtypes", default="float32,float64", help="cpu: dtypes to time")
    parser.add_argument("--sizes", choices=["small", "large", "all"], default="all",
                        help="cpu, kernel: issue 5's sizes (small k), issue 17's (large k), or both")
    parser.add_argument("--iterations", type=int, default=8,
                        help="cpu: iterations of the longer fit (the shorter has 2)")
    args = parser.parse_args(argv)
    for name, section in SECTIONS.items():
        if args.section in (name, "all"):
            try:
                section(args)
            except NoGpu as exc:
                print(f"gpu: not measured: {exc}", flush=True)
                if args.section == "gpu":  # asked for by name: fail
                    return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
