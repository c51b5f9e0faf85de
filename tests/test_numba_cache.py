"""The compiled kernels: a machine compiles them once, and says so while it does."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

#: One Lloyd run on data large enough for the fused kernel (float64 rows).
FIT = ("import numpy as np; from fedcluster.numerics import lloyd; "
       "X = np.random.default_rng(0).normal(size=(200000, 3)); lloyd(X, X[:8], max_iter=2)")
NOTE = "fedcluster: compiling the numerical kernels for this machine"


@pytest.mark.slow
def test_a_cold_cache_says_once_that_the_kernels_compile_and_a_warm_one_is_silent(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    cold, warm = (subprocess.run([sys.executable, "-c", FIT], env=env, capture_output=True,
                                 text=True, timeout=600) for _ in range(2))
    assert cold.returncode == 0 and warm.returncode == 0, cold.stderr + warm.stderr
    assert cold.stderr.count(NOTE) == 1, cold.stderr
    assert NOTE not in warm.stderr, warm.stderr
    assert any((tmp_path / "numba").rglob("*.nbi"))  # the cache is where it was told to be
