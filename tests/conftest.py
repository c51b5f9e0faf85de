"""Shared fixtures: Flower offline, S1 in its forms, log capture.

The shared plain functions are in ``helpers.py``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pytest

from fedcluster.simulation import FLOWER_OFFLINE_ENV, wait_for_the_last_teardown

for _key, _value in FLOWER_OFFLINE_ENV.items():
    os.environ.setdefault(_key, _value)

SIPU = Path(__file__).resolve().parents[1] / "fedcluster" / "data" / "sipu"


@pytest.fixture(autouse=True)
def _ray_stopped_after_each_test():
    """A test ends with the Flower runtime and Ray of its last simulation stopped.

    ``simulate`` returns before they stop; a next test that starts Flower's own
    ``run_simulation`` would otherwise find Ray running and see it stopped under it.
    """
    yield
    wait_for_the_last_teardown()


@pytest.fixture(scope="session")
def s1() -> np.ndarray:
    """S1's 5000 rows (15 clusters, integer coordinates up to 1e6), as an array.

    ``s1`` names these rows only: S1 as a :class:`~fedcluster.data.Dataset` is
    ``s1_dataset``, with a start ``s1_and_start``.
    """
    return np.loadtxt(SIPU / "s1.txt", dtype=np.float64)


@pytest.fixture(scope="session")
def s1_centres() -> np.ndarray:
    """S1's 15 ground-truth centres."""
    return np.loadtxt(SIPU / "s1-cb.txt", dtype=np.float64)


@pytest.fixture(scope="session")
def s1_dataset():
    """S1 as a :class:`~fedcluster.data.Dataset`: rows, labels, true centres."""
    from fedcluster.data import load_dataset

    return load_dataset("s1")


@pytest.fixture(scope="session")
def garst_grid():
    """Garst & Reinders' 4 x 4 grid of Gaussians as a Dataset (800 rows, seed 0)."""
    from fedcluster.data import load_dataset

    return load_dataset("garst-grid", seed=0)


@pytest.fixture(scope="session")
def s1_and_start(s1, s1_centres) -> tuple[np.ndarray, np.ndarray]:
    """S1's rows and 15 distinct data rows as a start, for the Lloyd step's exactness tests.

    The start is the row nearest to each ground-truth centre, so no cluster
    empties in the first step.
    """
    start = s1[[np.argmin(((s1 - c) ** 2).sum(axis=1)) for c in s1_centres]]
    assert len(np.unique(start, axis=0)) == 15
    return s1, start


@pytest.fixture
def flwr_log():
    """Collect the records of Flower's logger (fedcluster logs through it), of every level.

    fedcluster logs to the ``"flwr"`` logger without importing Flower; until
    Flower is imported (it sets that logger's level to DEBUG) the logger passes
    on only WARNING and above, so the level is set here: a test that looks for
    an INFO line must not depend on which tests ran before it.
    """
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Keep(level=logging.DEBUG)
    logger = logging.getLogger("flwr")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.fixture(scope="session")
def s1_cli_simulation(tmp_path_factory):
    """``fedcluster simulate --dataset s1 --clients 10 --split iid --k 15`` (Flower's Ray
    simulation) run once as a fresh process: its completed process and its output folder.

    tests/test_cli.py checks its model against S1's true centres, tests/test_estimator.py
    against the library's in memory: one Ray run serves both.
    """
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("s1-cli") / "out"
    done = subprocess.run(
        [sys.executable, "-m", "fedcluster.cli", "simulate", "--dataset", "s1", "--clients", "10",
         "--split", "iid", "--k", "15", "--out", str(out)],
        capture_output=True, text=True, timeout=600)
    return done, out
