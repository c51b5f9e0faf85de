"""Array-namespace selection: NumPy on the CPU, CuPy on a CUDA GPU.

The numerical kernels are written against a namespace ``xp`` holding only
operations that NumPy and CuPy share, so the same code runs on both.
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

import numpy as np

__all__ = ["get_namespace", "namespace_of", "one_blas_thread", "to_numpy"]

_GPU_HINT = "install the GPU extra with `pip install fedcluster[gpu]`"


def _import_cupy() -> ModuleType | None:
    try:
        import cupy
    except ImportError:
        return None
    return cupy


def _gpu_count(cupy: ModuleType) -> int:
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except RuntimeError:
        # CuPy raises CUDARuntimeError (a RuntimeError) when no driver is present.
        return 0


def get_namespace(device: str = "cpu") -> ModuleType:
    """Return the array module for a compute device.

    Parameters
    ----------
    device : {"cpu", "cuda", "auto"}, default="cpu"
        ``"cpu"`` selects NumPy, ``"cuda"`` selects CuPy and fails if it is
        unusable, ``"auto"`` selects CuPy when it is installed and sees a GPU,
        NumPy otherwise.

    Returns
    -------
    module
        ``numpy`` or ``cupy``.

    Raises
    ------
    ValueError
        If `device` is not one of the values above.
    RuntimeError
        If `device` is ``"cuda"`` and CuPy is missing or sees no GPU.
    """
    if device == "cpu":
        return np
    if device not in ("cuda", "auto"):
        raise ValueError(f"device must be one of 'cpu', 'cuda' or 'auto', got {device!r}")
    cupy = _import_cupy()
    if cupy is not None and _gpu_count(cupy) > 0:
        return cupy
    if device == "auto":
        return np
    if cupy is None:
        raise RuntimeError(f"device='cuda' needs CuPy, which is not installed: {_GPU_HINT}")
    raise RuntimeError(
        "device='cuda' was requested but CuPy sees no CUDA GPU; "
        f"check the driver, or {_GPU_HINT} matching your CUDA version"
    )


def namespace_of(array: Any) -> ModuleType:
    """Return ``cupy`` for a CuPy array and ``numpy`` for anything else.

    CuPy is imported only when `array` already is a CuPy array.
    """
    if type(array).__module__.partition(".")[0] == "cupy":
        import cupy

        return cupy
    return np


def to_numpy(array: Any) -> np.ndarray:
    """Return `array` as a NumPy array, copying it to the host if it is on a GPU."""
    if namespace_of(array) is not np:
        return array.get()
    return np.asarray(array)


class _OneBlasThread:
    """A context in which the host's BLAS runs on one thread (:data:`one_blas_thread`).

    Where: the Lloyd kernel's matrix-product passes, whose numba threads each
    call BLAS for their own tile (a BLAS with threads of its own would put
    two thread pools on the same cores: measured 5 to 24 times slower,
    ``perf.py spin``), and k-means++ seeding's small products (BLAS's
    threads wait for each other at every call: measured 3 to 4 times slower
    on a busy 2-core machine; and they busy-wait for about 0.1 s after the
    last call, through the Lloyd passes that follow a seeding).

    threadpoolctl's controller is made once (listing the loaded libraries
    costs about 4 ms), after SciPy's BLAS, the one numba calls, is loaded; a
    limit then costs about 25 us. Nested and concurrent users share one
    limit: the first in sets it, the last out restores BLAS's threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._controller: Any = None
        self._limiter: Any = None

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                if self._controller is None:
                    import scipy.linalg.cython_blas  # noqa: F401 - numba's BLAS, listed below
                    from threadpoolctl import ThreadpoolController

                    self._controller = ThreadpoolController().select(user_api="blas")
                self._limiter = self._controller.limit(limits=1)
            self._depth += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                self._limiter.restore_original_limits()
                self._limiter = None


#: The one :class:`_OneBlasThread`: ``with one_blas_thread: ...``.
one_blas_thread = _OneBlasThread()
