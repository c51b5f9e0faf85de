"""Tests of the NumPy/CuPy namespace helpers."""

import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest

from fedcluster.numerics import get_namespace, namespace_of, to_numpy


def test_cpu_is_numpy():
    assert get_namespace() is np
    assert get_namespace("cpu") is np


def test_without_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` fail
    assert get_namespace("auto") is np
    with pytest.raises(RuntimeError, match=r"pip install fedcluster\[gpu\]"):
        get_namespace("cuda")


def test_unknown_device():
    with pytest.raises(ValueError, match="device must be one of 'cpu', 'cuda' or 'auto'"):
        get_namespace("tpu")


def test_numpy_arrays_stay_on_numpy():
    a = np.arange(3.0)
    assert namespace_of(a) is np
    assert namespace_of([1, 2]) is np
    assert to_numpy(a) is a
    np.testing.assert_array_equal(to_numpy([1, 2]), [1, 2])


def fake_cupy(device_count):
    """A stand-in `cupy` module whose runtime reports `device_count` GPUs or raises."""

    def get_device_count():
        if isinstance(device_count, Exception):
            raise device_count
        return device_count

    module = types.ModuleType("cupy")
    module.cuda = SimpleNamespace(runtime=SimpleNamespace(getDeviceCount=get_device_count))
    return module


@pytest.mark.parametrize("device_count", [0, RuntimeError("CUDA driver not found")])
def test_cupy_without_gpu(monkeypatch, device_count):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(device_count))
    assert get_namespace("auto") is np
    with pytest.raises(RuntimeError, match="CuPy sees no CUDA GPU"):
        get_namespace("cuda")


def test_cupy_with_gpu(monkeypatch):
    cupy = fake_cupy(1)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    assert get_namespace("cuda") is cupy
    assert get_namespace("auto") is cupy


def test_device_arrays_are_recognised_and_copied_to_the_host(monkeypatch):
    cupy = fake_cupy(1)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    DeviceArray = type(
        "ndarray", (), {"__module__": "cupy._core.core", "get": lambda self: np.ones(2)}
    )
    assert namespace_of(DeviceArray()) is cupy
    np.testing.assert_array_equal(to_numpy(DeviceArray()), np.ones(2))
