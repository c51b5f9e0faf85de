"""Helpers the test files share: small data, asking one client, references, log text.

Plain functions, imported as ``from helpers import ...`` (``tests/`` is on the
path of every test); the fixtures are in ``conftest.py``. One copy of each
here, instead of one per test file, so that a change to how a client is asked
or how a reference is computed is made once.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: One plain Lloyd step on the CPU, the request config of the tests that ask the ClientApp.
LLOYD_CONFIG = {"local-steps": 1, "tol": 0.0, "chunk-size": 64, "device": "cpu"}


# -- small data --------------------------------------------------------------------------------

def column(*values) -> np.ndarray:
    """The one-feature rows ``values`` (hand cases on a line)."""
    return np.array(values, dtype=np.float64)[:, None]


def iid_parts(X: np.ndarray, n_clients: int, seed: int = 0) -> list[np.ndarray]:
    """The rows of ``X`` shuffled into ``n_clients`` clients of near-equal size, each in data order."""
    order = np.random.default_rng(seed).permutation(len(X))
    return [X[np.sort(p)] for p in np.array_split(order, n_clients)]


def grid_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Garst's regular dataset: 4 x 4 centres 5 apart, 50 points each, variance 1.

    Returns the rows (grouped by centre, not shuffled), their centre labels and the centres.
    """
    rng = np.random.default_rng(seed)
    axis = np.arange(-7.5, 7.6, 5.0)
    centres = np.array([(a, b) for a in axis for b in axis])
    X = np.concatenate([c + rng.standard_normal((50, 2)) for c in centres])
    return X, np.repeat(np.arange(16), 50), centres


def save_parts(directory: Path, parts: list[np.ndarray]) -> list[dict]:
    """Write one .npy per client and return the node configs that point at them."""
    directory.mkdir(parents=True, exist_ok=True)
    configs = []
    for i, part in enumerate(parts):
        path = directory / f"client_{i:03d}.npy"
        np.save(path, part)
        configs.append({"data-path": str(path)})
    return configs


# -- references --------------------------------------------------------------------------------

def naive_stats(X, centroids, weights=None):
    """Reference Lloyd statistics: labels and ClusterStats from the full float64 distance matrix.

    Distances by differences (not the expansion the kernels use), argmin, and
    sums added row by row in data order (``np.add.at`` is unbuffered).
    """
    from fedcluster.numerics import ClusterStats

    X = X.astype(np.float64)
    weights = np.ones(len(X)) if weights is None else weights
    sqdist = ((X[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
    labels = sqdist.argmin(axis=1)
    sums = np.zeros(centroids.shape)
    np.add.at(sums, labels, weights[:, None] * X)
    counts = np.bincount(labels, weights=weights, minlength=len(centroids))
    return labels, ClusterStats(sums, counts, float(weights @ sqdist[np.arange(len(X)), labels]))


class NumpyGpuKernels:
    """NumPy twins of the CUDA kernels of fedcluster/numerics/_lloyd_cupy.py (same arguments,
    same results to rounding), so that the GPU pass's host code runs on the CPU.

    ``fused`` assigns by the scores ``||c||^2 - 2 x.c`` in the rows' dtype, as the kernel
    does (BLAS sums the products in another order: labels agree away from near-ties).
    """

    @staticmethod
    def accumulate(X, labels, centroids, weights, with_inertia, sums, counts, inertia, sqdist):
        from fedcluster.numerics.distance import assigned_sq_distances

        X64 = X.astype(np.float64)
        w = np.ones(len(X)) if weights is None else weights
        np.add.at(sums, labels, w[:, None] * X64)
        counts += np.bincount(labels, weights=w, minlength=len(counts))
        q = assigned_sq_distances(X64, centroids, labels) if with_inertia else np.zeros(len(X))
        inertia += w @ q
        if sqdist is not None:
            sqdist[...] = q

    @classmethod
    def fused(cls, X, scaled, c_sq, centroids, weights, with_inertia, sums, counts, inertia,
              labels, sqdist):
        from fedcluster.numerics.distance import nearest

        found = nearest(X, scaled.T, c_sq)
        if labels is not None:
            labels[...] = found
        cls.accumulate(X, found, centroids, weights, with_inertia, sums, counts, inertia, sqdist)


# -- logs --------------------------------------------------------------------------------------

def messages(records) -> str:
    """The text of the log records (of the ``flwr_log`` fixture), one line each."""
    return "\n".join(r.getMessage() for r in records)


# -- in-memory clients (fedcluster.client.memory) ------------------------------------------

def ask_client(X, kind: str, config: dict, centroids=None, *, node_config=None):
    """One client's :class:`~fedcluster.federation.base.Answer` to one request.

    The client holds the rows ``X`` and answers as every client does
    (:func:`fedcluster.client.respond.respond`): ``answer.summary`` is its
    unchecked reply, or ``answer.error`` reads "error reply (code C): reason".
    """
    from fedcluster.client.memory import InMemoryFederation
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


# -- the real ClientApp, through Flower messages -----------------------------------------------

def ask_client_app(node_config: dict, kind: str, config: dict, centroids=None, *,
                   run_config=None, app=None):
    """The ClientApp's reply (a Flower message) to one request.

    The ClientApp (``app``, by default the project's) runs in an
    :class:`~harness.inprocess.InProcessGrid` as one SuperNode with
    ``node_config``: it finds its data the way a deployed one does.
    """
    from fedcluster.client.app import build_client_app
    from fedcluster.messages import Request
    from fedcluster.protocol import make_request
    from harness.inprocess import InProcessGrid

    grid = InProcessGrid(app or build_client_app(), [node_config], run_config)
    [reply] = grid.send_and_receive([make_request(Request(kind, config, centroids), grid.node_ids[0])])
    return reply
