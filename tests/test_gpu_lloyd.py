"""The CuPy path of the Lloyd step: same results as the CPU, data on the GPU once.

Runs where CuPy is installed and sees a CUDA GPU (``pip install ".[gpu]"``);
skipped otherwise. The host-side parts of the same code are tested without a
GPU in test_perf_lloyd.py (the GPU pass run with NumPy and NumPy twins of its
CUDA kernels) and test_perf_data_cache.py (one copy per run and device); the
CUDA kernels themselves (fedcluster/numerics/_lloyd_cupy.py) only here.
"""

import importlib

import numpy as np
import pytest
from helpers import NumpyGpuKernels

from fedcluster.numerics import assign, cluster_stats, get_namespace, lloyd, namespace_of, to_numpy

cupy = pytest.importorskip("cupy")
try:
    _GPUS = int(cupy.cuda.runtime.getDeviceCount())
except Exception:  # noqa: BLE001 - no driver: CuPy raises its own runtime error
    _GPUS = 0
pytestmark = pytest.mark.skipif(_GPUS == 0, reason="CuPy sees no CUDA GPU")


def test_auto_and_cuda_select_cupy():
    assert get_namespace("cuda") is cupy
    assert get_namespace("auto") is cupy


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
def test_step_matches_the_cpu(s1_and_start, dtype, weighted):
    X, start = s1_and_start
    X = X.astype(dtype)
    weights = np.random.default_rng(0).uniform(0, 2, len(X)) if weighted else None
    cpu = cluster_stats(X, start, sample_weight=weights)
    gpu = cluster_stats(cupy.asarray(X), cupy.asarray(start),
                        sample_weight=None if weights is None else cupy.asarray(weights))
    assert namespace_of(gpu.sums) is cupy and namespace_of(gpu.counts) is cupy
    assert isinstance(gpu.inertia, float)
    np.testing.assert_allclose(to_numpy(gpu.counts), cpu.counts, rtol=1e-12)
    np.testing.assert_allclose(to_numpy(gpu.sums), cpu.sums, rtol=1e-10)
    assert gpu.inertia == pytest.approx(cpu.inertia, rel=1e-10)


def test_labels_and_lloyd_match_the_cpu(s1_and_start):
    X, start = s1_and_start
    labels, sqdist = assign(cupy.asarray(X), cupy.asarray(start))
    cpu_labels, cpu_sqdist = assign(X, start)
    np.testing.assert_array_equal(to_numpy(labels), cpu_labels)
    np.testing.assert_allclose(to_numpy(sqdist), cpu_sqdist, rtol=1e-10)
    gpu = lloyd(cupy.asarray(X), cupy.asarray(start), max_iter=20, tol=0)
    cpu = lloyd(X, start, max_iter=20, tol=0)
    np.testing.assert_allclose(to_numpy(gpu.centroids), cpu.centroids, rtol=1e-9)
    assert gpu.inertia == pytest.approx(cpu.inertia, rel=1e-9)


def test_large_random_data_in_several_blocks():
    rng = np.random.default_rng(1)
    X = rng.random((600_000, 8)).astype(np.float32)
    start = X[:12].astype(np.float64)
    cpu = cluster_stats(X, start)
    gpu = cluster_stats(cupy.asarray(X), cupy.asarray(start))
    np.testing.assert_allclose(to_numpy(gpu.counts), cpu.counts, atol=2)  # float32 near-ties
    assert gpu.inertia == pytest.approx(cpu.inertia, rel=1e-6)


def test_non_finite_data_is_refused():
    X = cupy.ones((100, 3))
    X[50, 1] = cupy.nan
    with pytest.raises(ValueError, match="X must not contain NaN or infinity"):
        cluster_stats(X, cupy.zeros((2, 3)))


def test_client_data_is_copied_to_the_gpu_once(tmp_path):
    from fedcluster.client.data import clear_cache, local_data

    clear_cache()
    path = tmp_path / "rows.npy"
    np.save(path, np.arange(20.0).reshape(10, 2))
    first = local_data({"data-path": str(path)}, {}, "cuda")
    assert namespace_of(first) is cupy
    assert local_data({"data-path": str(path)}, {}, "auto") is first
    clear_cache()


lloyd_module = importlib.import_module("fedcluster.numerics.lloyd")


def separated(n, d, k, dtype, seed=0):
    """Points near k far-apart centres (no near-ties) and a start near those centres."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=50.0, size=(k, d))
    X = centres[rng.integers(0, k, n)] + rng.normal(size=(n, d))
    return X.astype(dtype), centres + rng.normal(scale=0.1, size=(k, d))


# Fused (k, d <= 64) and product (k or d above), at d of 1 and 64 (the register row's ends).
FORMS = [(1, 3), (64, 64), (16, 16), (200, 32), (10, 100), (1024, 128)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("k", "d"), FORMS)
@pytest.mark.parametrize("weighted", [False, True])
def test_both_forms_match_the_cpu_and_their_numpy_twins(k, d, dtype, weighted):
    X, start = separated(20_000, d, k, dtype, seed=k + d)
    weights = np.random.default_rng(3).uniform(0, 2, len(X)) if weighted else None
    labels, expected = assign(X, start)[0], cluster_stats(X, start, sample_weight=weights)
    gX, gstart = cupy.asarray(X), cupy.asarray(start)
    gweights = None if weights is None else cupy.asarray(weights)
    for with_inertia in (True, False):
        gpu, glabels, gsqdist = lloyd_module._device_pass(gX, gstart, gweights, 1 << 18, True,
                                                          with_inertia)
        np.testing.assert_array_equal(to_numpy(glabels), labels)
        np.testing.assert_allclose(to_numpy(gpu.counts), expected.counts, rtol=1e-12)
        np.testing.assert_allclose(to_numpy(gpu.sums), expected.sums, rtol=1e-10, atol=1e-9)
        if with_inertia:
            assert gpu.inertia == pytest.approx(expected.inertia, rel=1e-10)
        else:
            assert np.isnan(gpu.inertia) and gsqdist is None
    # The twins of tests/helpers.py (which test the host code on the CPU) compute what the
    # CUDA kernels compute.
    twin = lloyd_module._device_pass(X, start, weights, 1 << 18, False, True,
                                     kernels=NumpyGpuKernels)[0]
    gpu = cluster_stats(gX, gstart, sample_weight=gweights)
    np.testing.assert_allclose(to_numpy(gpu.sums), twin.sums, rtol=1e-10, atol=1e-9)
    assert gpu.inertia == pytest.approx(twin.inertia, rel=1e-10)


def test_large_k_in_several_blocks_stays_on_the_device():
    X, start = separated(600_000, 32, 256, np.float32, seed=4)
    gpu = cluster_stats(cupy.asarray(X), cupy.asarray(start))
    assert namespace_of(gpu.sums) is cupy
    cpu = cluster_stats(X, start)
    np.testing.assert_array_equal(to_numpy(gpu.counts), cpu.counts)
    assert gpu.inertia == pytest.approx(cpu.inertia, rel=1e-10)


def test_feca_cluster_geometry_matches_the_cpu(s1_and_start):
    # FeCA's per-cluster reach (the mean of the p largest distances) sorts on the device.
    from fedcluster.methods.feca.kernels import cluster_geometry

    X, start = s1_and_start
    for p in (1, 2, 5):
        cpu = cluster_geometry(X, start, min_rows=p)
        gpu = cluster_geometry(cupy.asarray(X), cupy.asarray(start), min_rows=p)
        for name in ("counts", "means", "sse", "reach"):
            np.testing.assert_allclose(getattr(gpu, name), getattr(cpu, name), rtol=1e-9,
                                       err_msg=f"{name}, p = {p}")
