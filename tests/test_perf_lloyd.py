"""The CPU Lloyd step: the fused numba kernel (its two direct score loops and its
matrix product), the NumPy array path of small passes, threads, layouts, the lazy
inertia.

test_numerics_lloyd.py tests the step's exactness on small data, which takes the
NumPy path; the `path` fixture here runs the tests on the kernel's direct loops, on
its matrix product (forced at every size) and on the NumPy path, and the S1
exactness tests are repeated on the kernel.
"""

import importlib
import tracemalloc

import numba
import numpy as np
import pytest
from helpers import NumpyGpuKernels, naive_stats

from fedcluster.numerics import _lloyd_numba as kernel
from fedcluster.numerics import assign, cluster_stats, lloyd

# The module (the package exports its function `lloyd` under the same name).
lloyd_module = importlib.import_module("fedcluster.numerics.lloyd")


def force_product(monkeypatch, on=True):
    """Every kernel pass scores by the matrix product (`on`) or by the direct loops."""
    for name in ("PRODUCT_MIN_CLUSTERS", "PRODUCT_MIN_FEATURES"):
        monkeypatch.setattr(lloyd_module, name, 0 if on else 1 << 62)


@pytest.fixture(params=["kernel", "product", "numpy"])
def path(request, monkeypatch):
    """Every pass through the kernel's direct loops, its matrix product, or the NumPy path."""
    monkeypatch.setattr(lloyd_module, "KERNEL_MIN_WORK", 1 << 62 if request.param == "numpy" else 0)
    force_product(monkeypatch, request.param == "product")
    return request.param


@pytest.fixture
def kernel_path(monkeypatch):
    monkeypatch.setattr(lloyd_module, "KERNEL_MIN_WORK", 0)


def separated(n, d, k, dtype, seed=0):
    """Points near k far-apart centres (no near-ties) and a start near those centres."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=50.0, size=(k, d))
    X = centres[rng.integers(0, k, n)] + rng.normal(size=(n, d))
    start = centres + rng.normal(scale=0.1, size=(k, d))
    return X.astype(dtype), start


# Row lanes (d <= 64) and feature lanes (d > 64); k not a multiple of 4; n not a
# multiple of the tile (64) or of the group of four rows.
SHAPES = [(1, 1, 1), (5, 2, 3), (1001, 2, 15), (777, 16, 16), (643, 64, 5), (257, 65, 7),
          (130, 784, 20), (99, 100, 1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("n", "d", "k"), SHAPES)
def test_both_score_loops_match_the_distance_matrix(n, d, k, dtype, path):
    X, start = separated(n, d, k, dtype)
    labels, expected = naive_stats(X, start)
    stats = cluster_stats(X, start)
    np.testing.assert_array_equal(assign(X, start)[0], labels)
    np.testing.assert_array_equal(stats.counts, expected.counts)
    np.testing.assert_allclose(stats.sums, expected.sums, rtol=1e-12, atol=1e-9)
    assert stats.inertia == pytest.approx(expected.inertia, rel=1e-10)


@pytest.mark.parametrize("d", [16, 784])
def test_weights_and_labels_and_squared_distances(d, path):
    X, start = separated(301, d, 6, np.float64, seed=1)
    weights = np.random.default_rng(2).uniform(0, 3, len(X))
    labels, expected = naive_stats(X, start, weights)
    stats = cluster_stats(X, start, sample_weight=weights)
    np.testing.assert_allclose(stats.counts, expected.counts, rtol=1e-13)
    np.testing.assert_allclose(stats.sums, expected.sums, rtol=1e-12, atol=1e-9)
    assert stats.inertia == pytest.approx(expected.inertia, rel=1e-12)
    got_labels, sqdist = assign(X, start)
    np.testing.assert_array_equal(got_labels, labels)
    np.testing.assert_allclose(sqdist, ((X - start[labels]) ** 2).sum(axis=1), rtol=1e-12)


@pytest.mark.parametrize("product", [False, True])
@pytest.mark.parametrize("d", [8, 100])
def test_thread_count_changes_nothing(d, product, kernel_path, monkeypatch):
    """Blocks depend on the data's shape only and are added up in block order."""
    force_product(monkeypatch, product)
    X, start = separated(5000, d, 9, np.float32, seed=3)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = cluster_stats(X, start)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        many = cluster_stats(X, start)
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(one.counts, many.counts)
    np.testing.assert_array_equal(one.sums, many.sums)
    assert one.inertia == many.inertia


@pytest.mark.parametrize("layout", ["fortran", "strided", "readonly"])
def test_any_memory_layout(layout, path):
    X, start = separated(1500, 12, 5, np.float64, seed=4)
    reference = cluster_stats(X, start)
    if layout == "fortran":
        other = np.asfortranarray(X)
    elif layout == "strided":
        other = np.repeat(X, 2, axis=1)[:, ::2]
    else:
        other = X.copy()
        other.flags.writeable = False
    assert not other.flags.c_contiguous or not other.flags.writeable
    stats = cluster_stats(other, start, chunk_size=100)
    np.testing.assert_array_equal(stats.counts, reference.counts)
    np.testing.assert_allclose(stats.sums, reference.sums, rtol=1e-13)
    assert stats.inertia == pytest.approx(reference.inertia, rel=1e-13)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("d", [3, 70])
def test_non_finite_data_is_refused_without_a_separate_pass(bad, d, path):
    X, start = separated(200, d, 4, np.float64, seed=5)
    X[137, d - 1] = bad
    with pytest.raises(ValueError, match="X must not contain NaN or infinity"):
        cluster_stats(X, start)
    # Also where that row weighs nothing, and in lloyd and assign.
    weights = np.ones(len(X))
    weights[137] = 0.0
    with pytest.raises(ValueError, match="X must not contain NaN or infinity"):
        cluster_stats(X, start, sample_weight=weights)
    with pytest.raises(ValueError, match="X must not contain NaN or infinity"):
        lloyd(X, start)
    with pytest.raises(ValueError, match="X must not contain NaN or infinity"):
        assign(X, start)


def test_integer_data_becomes_float64(path):
    X = np.arange(40).reshape(20, 2)
    stats = cluster_stats(X, np.array([[0.0, 1.0], [30.0, 31.0]]))
    assert stats.sums.dtype == np.float64
    assert stats.counts.sum() == 20


@pytest.mark.parametrize(("max_iter", "tol"), [(1, 0.0), (2, 0.0), (7, 0.0), (300, 1e-4), (300, 1e9)])
def test_lloyd_returns_the_inertia_of_its_last_assignment(max_iter, tol, path):
    """Intermediate passes skip the inertia; the returned one is the last assignment's."""
    X, start = separated(2000, 5, 8, np.float32, seed=6)
    start = start + 3.0
    result = lloyd(X, start, max_iter=max_iter, tol=tol)
    # Replay the steps with full passes.
    centroids, stats = start, cluster_stats(X, start)
    for _ in range(result.n_iter - 1):
        centroids = lloyd_module.update_centroids(stats, centroids)
        stats = cluster_stats(X, centroids)
    np.testing.assert_array_equal(result.counts, stats.counts)
    assert result.inertia == pytest.approx(stats.inertia, rel=1e-12)
    assert not np.isnan(result.inertia) and not np.isnan(result.first.inertia)


def test_extra_memory_does_not_grow_with_the_rows(kernel_path):
    """The step allocates a bounded number of (k, d) slots and tile buffers, not O(n) arrays."""
    rng = np.random.default_rng(7)
    start = rng.random((16, 16))
    peaks = []
    for n in (200_000, 800_000):  # both cut into the most blocks
        X = rng.random((n, 16)).astype(np.float32)
        cluster_stats(X, start)  # compiled and warm
        tracemalloc.start()
        cluster_stats(X, start)
        lloyd(X, start, max_iter=3, tol=0)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    slots = lloyd_module.KERNEL_MAX_BLOCKS * (16 * 16 + 16 + 1) * 8
    assert peaks[1] < slots + 64 * 1024 and peaks[1] < peaks[0] + 16 * 1024, peaks


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("keep_rows", [False, True])
@pytest.mark.parametrize(("d", "k"), [(24, 7), (24, 130), (100, 7)])  # fused, product, product
def test_the_gpu_pass_matches_the_cpu_kernel(dtype, weighted, keep_rows, d, k):
    """The GPU pass's host code, run here with NumPy as its namespace and NumPy twins of its
    CUDA kernels (tests/helpers.py), on both of its forms."""
    X, start = separated(3000, d, k, dtype, seed=8)
    weights = np.random.default_rng(9).uniform(0, 2, len(X)) if weighted else None
    cpu, cpu_labels, cpu_sqdist = lloyd_module._cpu_pass(X, start, weights, 4096, keep_rows, True)

    def device(with_inertia):
        return lloyd_module._device_pass(X, start, weights, 1000, keep_rows, with_inertia,
                                         kernels=NumpyGpuKernels)

    gpu, gpu_labels, gpu_sqdist = device(True)
    np.testing.assert_allclose(gpu.counts, cpu.counts, rtol=1e-13)  # weights: another order
    np.testing.assert_allclose(gpu.sums, cpu.sums, rtol=1e-12)
    assert gpu.inertia == pytest.approx(cpu.inertia, rel=1e-12)
    if keep_rows:
        np.testing.assert_array_equal(gpu_labels, cpu_labels)
        np.testing.assert_allclose(gpu_sqdist, cpu_sqdist, rtol=1e-12)
    without, without_labels, without_sqdist = device(False)
    np.testing.assert_allclose(without.sums, cpu.sums, rtol=1e-12)
    assert np.isnan(without.inertia) and without_sqdist is None
    if keep_rows:
        np.testing.assert_array_equal(without_labels, cpu_labels)
    # The NumPy path of small passes: the same statistics.
    small = lloyd_module._array_pass(X, start, weights, 1000, keep_rows, True)[0]
    np.testing.assert_allclose(small.counts, cpu.counts, rtol=1e-13)
    np.testing.assert_allclose(small.sums, cpu.sums, rtol=1e-12)


def test_gpu_form_choice():
    use = lloyd_module.use_fused
    assert use(1, 1) and use(64, 64) and use(15, 2)
    assert not use(65, 2) and not use(16, 65) and not use(1024, 128)


def test_kernel_choice():
    assert kernel.use_row_lanes(1) and kernel.use_row_lanes(64)
    assert not kernel.use_row_lanes(65)
    assert kernel.score_loop(16, False) == kernel.ROW_LANES
    assert kernel.score_loop(100, False) == kernel.FEATURE_LANES
    assert kernel.score_loop(16, True) == kernel.PRODUCT


def test_the_product_is_chosen_above_every_grid_k():
    """The committed grids (k <= 100) keep the direct loops, so their results stay bit for bit."""
    use = lloyd_module.use_product
    assert not any(use(k, d) for k in range(1, 101) for d in (1, 2, 16, 32, 128, 784))
    assert use(128, 32) and use(256, 128) and use(1024, 784)
    assert not use(1024, 16) and not use(256, 2)  # thin rows: the row-lane loop wins


# Many centroids far apart, points near them: no near-ties, so labels must agree exactly.
LARGE_K = [(20_000, 32, 256), (3_001, 128, 1_024), (5_000, 784, 130), (4_000, 40, 128)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("n", "d", "k"), LARGE_K)
def test_the_product_equals_the_direct_loops(n, d, k, dtype, kernel_path, monkeypatch):
    """Both formulations at the sizes where the product is chosen (the default rule).

    Labels equal (the data has no near-ties: every point is 1 from its centre
    and the centres are about 50 sqrt(2d) apart); counts equal; sums equal to
    float64 rounding (the same rows added in the same order); the inertia is
    the exact direct distance to the assigned centre in both.
    """
    X, start = separated(n, d, k, dtype, seed=11)
    assert lloyd_module.use_product(k, d)
    weights = np.random.default_rng(12).uniform(0, 2, n)
    product = cluster_stats(X, start, sample_weight=weights), assign(X, start)
    force_product(monkeypatch, False)
    direct = cluster_stats(X, start, sample_weight=weights), assign(X, start)
    np.testing.assert_array_equal(product[1][0], direct[1][0])
    np.testing.assert_array_equal(product[1][1], direct[1][1])
    np.testing.assert_array_equal(product[0].counts, direct[0].counts)
    np.testing.assert_allclose(product[0].sums, direct[0].sums, rtol=1e-13, atol=1e-10)
    assert product[0].inertia == pytest.approx(direct[0].inertia, rel=1e-13)
    labels, expected = naive_stats(X, start, weights)
    np.testing.assert_array_equal(product[1][0], labels)
    assert product[0].inertia == pytest.approx(expected.inertia, rel=1e-12)


def test_lloyd_at_large_k_equals_the_direct_loops(kernel_path, monkeypatch):
    X, start = separated(6_000, 64, 200, np.float32, seed=13)
    start = start + 0.5  # a few steps of movement
    product = lloyd(X, start, max_iter=4, tol=0)
    force_product(monkeypatch, False)
    direct = lloyd(X, start, max_iter=4, tol=0)
    np.testing.assert_allclose(product.centroids, direct.centroids, rtol=1e-13, atol=1e-12)
    np.testing.assert_array_equal(product.counts, direct.counts)
    assert product.inertia == pytest.approx(direct.inertia, rel=1e-13)


def test_the_product_pass_limits_blas_to_one_thread_and_restores_it(kernel_path):
    from threadpoolctl import threadpool_info

    def blas_threads():
        return sorted(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")

    X, start = separated(3_000, 64, 130, np.float64, seed=14)
    cluster_stats(X, start)  # loads the kernel and SciPy's BLAS
    before = blas_threads()
    limit = lloyd_module._one_blas_thread
    with limit:
        with limit:  # nested: one limit
            assert set(blas_threads()) == {1}
        assert set(blas_threads()) == {1}
    assert blas_threads() == before
    cluster_stats(X, start)
    assert blas_threads() == before


def test_small_passes_do_not_load_numba():
    """A ClientApp process with little data (Flower runs one per message) skips numba."""
    import subprocess
    import sys

    code = ("import sys, numpy as np\n"
            "from fedcluster.numerics import cluster_stats, lloyd\n"
            "X = np.random.default_rng(0).random((2000, 2))\n"
            "lloyd(X, X[:15], max_iter=5); cluster_stats(X, X[:15])\n"
            "print('numba' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# The exactness tests of test_numerics_lloyd.py on S1, through the kernel.

def test_kernel_on_s1_matches_naive_and_sklearn(s1_and_start, kernel_path):
    from sklearn.cluster import KMeans

    X, start = s1_and_start
    labels, expected = naive_stats(X, start)
    stats = cluster_stats(X, start)
    np.testing.assert_array_equal(assign(X, start)[0], labels)
    np.testing.assert_array_equal(stats.counts, expected.counts)
    np.testing.assert_allclose(stats.sums, expected.sums, rtol=1e-12)
    assert stats.inertia == pytest.approx(expected.inertia, rel=1e-12)
    km = KMeans(n_clusters=15, init=start, n_init=1, max_iter=1, algorithm="lloyd").fit(X)
    np.testing.assert_allclose(lloyd(X, start, max_iter=1).centroids, km.cluster_centers_,
                               rtol=1e-9)


def test_kernel_on_s1_float32_accumulates_in_float64(s1_and_start, kernel_path):
    X, start = s1_and_start
    stats32 = cluster_stats(X.astype(np.float32), start)
    stats64 = cluster_stats(X.astype(np.float32).astype(np.float64), start)
    np.testing.assert_array_equal(stats32.counts, stats64.counts)
    np.testing.assert_allclose(stats32.sums, stats64.sums, rtol=1e-12)
    assert stats32.inertia == pytest.approx(stats64.inertia, rel=1e-12)


def test_kernel_inertia_is_accurate(s1_and_start, kernel_path):
    X, start = s1_and_start
    centroids = lloyd(X, start, max_iter=1).centroids
    labels, _ = naive_stats(X, centroids)
    diff = X.astype(np.longdouble) - centroids.astype(np.longdouble)[labels]
    assert cluster_stats(X, centroids).inertia == pytest.approx(float((diff * diff).sum()),
                                                                rel=1e-12)
    rng = np.random.default_rng(2)
    X = 1e6 + rng.normal(size=(500, 2))
    centroids = X[:4] + 0.25
    labels, _ = naive_stats(X, centroids)
    diff = X.astype(np.longdouble) - centroids.astype(np.longdouble)[labels]
    assert cluster_stats(X, centroids).inertia == pytest.approx(float((diff * diff).sum()),
                                                                rel=1e-12)


def test_kernel_matches_the_numpy_path_on_s1(s1_and_start, monkeypatch):
    X, start = s1_and_start
    results = []
    for threshold in (0, 1 << 62):
        monkeypatch.setattr(lloyd_module, "KERNEL_MIN_WORK", threshold)
        results.append(lloyd(X, start, max_iter=20, tol=0))
    np.testing.assert_allclose(results[0].centroids, results[1].centroids, rtol=1e-12)
    np.testing.assert_array_equal(results[0].counts, results[1].counts)
    assert results[0].inertia == pytest.approx(results[1].inertia, rel=1e-12)


def test_kernel_compiles_without_a_writable_cache(monkeypatch):
    """No cache location (read-only install, no home): compile per process, do not fail."""
    from numba.core import caching

    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # renamed in numba 0.6x
    monkeypatch.setattr(impl, "_locator_classes", [])

    @kernel._jit()
    def twice(x):
        return 2 * x

    assert twice(21) == 42
    assert type(twice._cache).__name__ == "NullCache"
