"""Strategies that refine global centroids over rounds of local steps.

Each round the server samples clients, sends them the global centroids, and
aggregates their replies into new centroids; a restart stops when the centroids
move less than ``tol`` or after ``num_rounds`` rounds. Subclasses say what the
clients do (:attr:`train_type`, :meth:`train_settings`, :meth:`read_train_reply`)
and how the server combines the replies (:meth:`aggregate`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from logging import INFO

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.common.logger import log
from flwr.serverapp import Grid

from ..numerics import frobenius_movement
from ..protocol import LLOYD, ClientSummary, read_reply
from ..server.artifacts import RoundRecord
from .base import ClusteringStrategy, Exchange, exact_score, exchange_metrics, round_record
from .initialisation import initial_centroids


class RoundBasedStrategy(ClusteringStrategy):
    """Base class of the iterative methods.

    Parameters
    ----------
    k : int
        Number of clusters.
    num_rounds : int
        Largest number of rounds per restart.
    tol : float
        Stop when the centroid movement (:meth:`movement`) is below ``tol``;
        ``0`` runs every round.
    init : str
        Initial centroids: ``"local-kmeans"``, ``"kfed"``, ``"random"`` or the
        path of a (k, d) array file (see :mod:`.initialisation`).
    k_prime : int, optional
        Local clusters of each client for ``init="kfed"`` (default ``k``).
    **options
        The common options of :class:`ClusteringStrategy`.
    """

    #: Message type of the round's request to the clients.
    train_type: str = LLOYD

    def __init__(self, k: int, *, num_rounds: int = 100, tol: float = 1e-4,
                 init: str = "local-kmeans", k_prime: int | None = None, **options) -> None:
        super().__init__(k, **options)
        if num_rounds < 1 or not tol >= 0.0:
            raise ValueError(f"need num_rounds >= 1 and tol >= 0, got {num_rounds}, {tol}")
        self.num_rounds = num_rounds
        self.tol = tol
        self.init = init
        self.k_prime = k_prime
        self.explicit_start: np.ndarray | None = None
        self._centroids: np.ndarray | None = None

    # -- what subclasses define --------------------------------------------------
    def train_settings(self) -> dict:
        """The config of each round's request."""
        raise NotImplementedError

    def read_train_reply(self, content, k: int, dim: int) -> ClientSummary:
        """Decode and check one client's reply to a round's request."""
        return read_reply(content, k=k, dim=dim, expect=("centroids", "counts", "sse"))

    def aggregate(self, current: np.ndarray, summaries: list[ClientSummary]) -> np.ndarray:
        """New global centroids from the current ones and the accepted replies."""
        raise NotImplementedError

    def movement(self, new: np.ndarray, current: np.ndarray) -> float:
        """How far the centroids moved (Frobenius norm unless a paper says otherwise)."""
        return frobenius_movement(new, current)

    def initialise(self, grid: Grid) -> tuple[np.ndarray, Exchange | None]:
        """The starting centroids of a restart and the exchange that made them (``init``).

        Methods with their own initial round (FKM) override this.
        """
        return initial_centroids(self, grid, self.init, k_prime=self.k_prime)

    def begin(self, centroids: np.ndarray) -> None:
        """Called with the starting centroids of each restart (reset method state here)."""

    # -- Flower hooks ------------------------------------------------------------
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Sample this round's clients and send them the global centroids."""
        nodes = self.sample_nodes(grid, self.rng)
        settings = {"chunk-size": self.chunk_size, "device": self.device,
                    **self.train_settings(), **dict(config)}
        return self.build_requests(self.train_type, nodes, settings, arrays["centroids"].numpy())

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Check the replies, aggregate them, and measure the movement."""
        current = self._require_state()
        k, dim = current.shape
        exchange = self.sort_replies(
            replies, lambda content: self.read_train_reply(content, k, dim), f"round {server_round}"
        )
        metrics = exchange_metrics(exchange)
        # sort_replies has failed the run unless enough clients answered.
        summaries = exchange.in_content_order()
        new = self.aggregate(current, summaries)
        metrics["movement"] = self.movement(new, current)
        if all(not math.isnan(s.sse) for s in summaries):
            metrics["score"] = exact_score(summaries)
        self._centroids = new
        return ArrayRecord({"centroids": Array(np.ascontiguousarray(new))}), metrics

    # -- the run -----------------------------------------------------------------
    def start(self, grid: Grid, initial_arrays: ArrayRecord | None = None,
              num_rounds: int | None = None, timeout: float | None = None, **kwargs):
        """Flower's entry point; ``initial_arrays["centroids"]`` replaces ``init``."""
        if initial_arrays is not None and "centroids" in initial_arrays:
            self.explicit_start = initial_arrays["centroids"].numpy()
        if num_rounds is not None:
            self.num_rounds = num_rounds
        return super().start(grid, timeout=timeout, **kwargs)

    def run_restart(self, grid: Grid, restart: int, history: list[RoundRecord]
                    ) -> tuple[np.ndarray, int, bool]:
        """Initial centroids, then rounds until the movement is below ``tol``."""
        if self.explicit_start is not None:
            start, init_exchange = np.array(self.explicit_start, dtype=np.float64), None
        else:
            start, init_exchange = self.initialise(grid)
        if init_exchange is not None:
            history.append(round_record(restart, 0, "init", math.nan, math.nan, init_exchange))
        self._centroids = start
        self.begin(start)
        rounds, converged = 0, False
        for t in range(1, self.num_rounds + 1):
            rounds = t
            record = ArrayRecord({"centroids": Array(np.ascontiguousarray(self._centroids))})
            messages = self.configure_train(t, record, ConfigRecord(), grid)
            replies = grid.send_and_receive(messages, timeout=self.round_timeout)
            arrays, metrics = self.aggregate_train(t, replies)
            movement = float(metrics.get("movement", math.nan))
            score = float(metrics.get("score", math.nan))
            exchange = self.last_exchange
            history.append(round_record(restart, t, "train", movement, score, exchange))
            log(INFO, "round %d/%d: movement %.6g, score %.6g, clients %d/%d", t, self.num_rounds,
                movement, score, len(exchange.accepted), len(exchange.sent))
            if movement < self.tol:
                converged = True
                break
        return self._require_state(), rounds, converged

    def _require_state(self) -> np.ndarray:
        if self._centroids is None:
            raise RuntimeError("the strategy has no global centroids yet: call fit() or start()")
        return self._centroids
