"""Shared fixtures: Flower offline, small federations on disk, log capture."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pytest

from fedcluster.simulation import FLOWER_OFFLINE_ENV

for _key, _value in FLOWER_OFFLINE_ENV.items():
    os.environ.setdefault(_key, _value)

SIPU = Path(__file__).resolve().parents[1] / "fedcluster" / "data" / "sipu"


@pytest.fixture(scope="session")
def s1() -> np.ndarray:
    return np.loadtxt(SIPU / "s1.txt", dtype=np.float64)


@pytest.fixture(scope="session")
def s1_centres() -> np.ndarray:
    return np.loadtxt(SIPU / "s1-cb.txt", dtype=np.float64)


def save_parts(directory: Path, parts: list[np.ndarray]) -> list[dict]:
    """Write one .npy per client and return the node configs that point at them."""
    directory.mkdir(parents=True, exist_ok=True)
    configs = []
    for i, part in enumerate(parts):
        path = directory / f"client_{i:03d}.npy"
        np.save(path, part)
        configs.append({"data-path": str(path)})
    return configs


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


def messages(records) -> str:
    return "\n".join(r.getMessage() for r in records)


# -- in-memory clients (fedcluster.federation.memory) -------------------------------------

def ask_client(X, kind: str, config: dict, centroids=None, *, node_config=None):
    """One client's :class:`~fedcluster.federation.base.Answer` to one request.

    The client holds the rows ``X`` and answers as every client does
    (:func:`fedcluster.client.respond.respond`): ``answer.summary`` is its
    unchecked reply, or ``answer.error`` reads "error reply (code C): reason".
    """
    from fedcluster.federation.memory import InMemoryFederation
    from fedcluster.messages import Request

    federation = InMemoryFederation([X], node_configs=[dict(node_config or {})])
    [answer] = federation.ask(Request(kind, dict(config), centroids), [0], timeout=1.0)
    return answer


def altered_replies(change):
    """A responder that answers honestly, then passes its summary through ``change``.

    ``change(summary, request, node_config)`` returns the summary to send (a
    careless or lying client) or raises (a client that crashes).
    """
    from fedcluster.client.respond import respond

    def answer(X, request, node_config):
        return change(respond(X, request, node_config), request, node_config)

    return answer


def unreadable_data(path):
    """A responder for a client whose data file ``path`` cannot be read.

    It answers as a SuperNode whose ``data-path`` names a missing file: the
    client's data loader raises its :class:`~fedcluster.data.DataError`, which
    the client reports as an error reply (code 400) naming the file.
    """
    from fedcluster.client.data import local_data

    def answer(X, request, node_config):
        local_data({"data-path": str(path)}, {}, "cpu")
        raise AssertionError(f"{path} was expected to be unreadable")

    return answer
