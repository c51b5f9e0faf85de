"""Strategies that refine global centroids over rounds of local steps.

Each round the server samples clients, sends them the global centroids, and
aggregates their replies into new centroids; a restart stops when the centroids
move less than ``tol`` or after ``num_server_rounds`` rounds. Subclasses say what the
clients do (:attr:`train_type`, :meth:`train_settings`, :meth:`validate_train_reply`)
and how the server combines the replies (:meth:`aggregate`).
"""

from __future__ import annotations

import math
from logging import INFO

import numpy as np

from ..federation.base import Exchange, Federation
from ..logs import log
from ..messages import ClientSummary, validate_reply
from ..numerics import frobenius_movement
from ..results import RoundRecord
from .base import ClusteringStrategy, exact_score, round_record
from .progress import Progress
from .initialisation import initial_centroids


class RoundBasedStrategy(ClusteringStrategy):
    """Base class of the iterative methods.

    Besides the settings of every method, its options (a
    :class:`~fedcluster.options.RoundOptions` or a model with the same
    fields) give ``num_server_rounds``, the largest number of rounds per
    restart; ``tol``, the centroid movement (:meth:`movement`) below which a
    restart stops (0 runs every round); and the start: ``init``
    (``"local-kmeans"``, ``"kfed"``, ``"random"`` or a (k, d) array file, see
    :mod:`.initialisation`) with ``k_prime``, the clients' local clusters for
    ``init="kfed"`` (0: ``k``).
    """

    #: The kind of each round's request to the clients (the method's own step).
    train_type: str = ""

    def __init__(self, k: int | None = None, /, **settings) -> None:
        super().__init__(k, **settings)
        self.num_server_rounds = self.options.num_server_rounds
        self.tol = self.options.tol
        self.init = getattr(self.options, "init", None)
        #: Starting centroids that replace ``init`` (Flower's ``initial_arrays``).
        self.explicit_start: np.ndarray | None = None

    # -- what subclasses define --------------------------------------------------
    def train_settings(self) -> dict:
        """The config of each round's request."""
        raise NotImplementedError

    def validate_train_reply(self, summary: ClientSummary, k: int, dim: int) -> ClientSummary:
        """Check one client's reply to a round's request."""
        return validate_reply(summary, k=k, dim=dim, expect=("centroids", "counts", "sse"))

    def aggregate(self, current: np.ndarray, summaries: list[ClientSummary]) -> np.ndarray:
        """New global centroids from the current ones and the accepted replies."""
        raise NotImplementedError

    def movement(self, new: np.ndarray, current: np.ndarray) -> float:
        """How far the centroids moved (Frobenius norm unless a paper says otherwise)."""
        return frobenius_movement(new, current)

    def initialise(self, federation: Federation) -> tuple[np.ndarray, Exchange | None]:
        """The starting centroids of a restart and the exchange that made them (``init``).

        Methods with their own initial round (FKM) override this.
        """
        return initial_centroids(self, federation, self.init, k_prime=self.options.local_k)

    def begin(self, centroids: np.ndarray) -> None:
        """Called with the starting centroids of each restart (reset method state here)."""

    def checked(self, exchange: Exchange[ClientSummary], what: str) -> None:
        """Called with each round's (and the initialisation's) checked replies; DWF warns here."""

    # -- the run -----------------------------------------------------------------
    def train_round(self, federation: Federation, t: int, current: np.ndarray
                    ) -> tuple[np.ndarray, float, float, Exchange[ClientSummary]]:
        """One round: sample, send the global centroids, aggregate the replies.

        Returns the new centroids, their movement, the round's score (NaN
        unless every reply carries its squared distances) and the exchange.
        """
        k, dim = current.shape
        nodes = self.sample_nodes(federation, self.rng)  # before train_settings: both draw from rng
        settings = {"chunk-size": self.chunk_size, "device": self.device, **self.train_settings()}
        exchange = self.exchange(
            federation, self.train_type, nodes, settings,
            lambda s: self.validate_train_reply(s, k, dim), centroids=np.ascontiguousarray(current),
            what=f"round {t}")
        self.checked(exchange, f"round {t}")
        summaries = exchange.in_content_order()
        new = self.aggregate(current, summaries)
        score = (exact_score(summaries) if all(not math.isnan(s.sse) for s in summaries)
                 else math.nan)
        return new, self.movement(new, current), score, exchange

    def run_restart(self, federation: Federation, restart: int, history: list[RoundRecord],
                    resume: Progress | None = None) -> tuple[np.ndarray, int, bool]:
        """Initial centroids, then rounds until the movement is below ``tol``.

        The progress is reported after the initialisation (round 0, once
        :meth:`begin` has set the method's state) and after every round.
        With ``resume`` the restart goes on from its centroids and round.
        """
        if resume is not None:
            centroids, done, converged = resume.centroids, resume.round, resume.converged
        else:
            centroids, done, converged = self.start_restart(federation, restart, history), 0, False
        rounds = done
        for t in range(done + 1, self.num_server_rounds + 1):
            if converged:
                break
            rounds = t
            centroids, movement, score, exchange = self.train_round(federation, t, centroids)
            history.append(round_record(restart, t, "train", movement, score, exchange))
            log(INFO, "round %d/%d: movement %.6g, score %.6g, clients %d/%d", t, self.num_server_rounds,
                movement, score, len(exchange.accepted), len(exchange.sent))
            converged = movement < self.tol
            self.report_progress(restart, t, centroids, converged, history)
        return centroids, rounds, converged

    def start_restart(self, federation: Federation, restart: int, history: list[RoundRecord]
                      ) -> np.ndarray:
        """The restart's starting centroids (``init``, or the explicit start), recorded and reported."""
        if self.explicit_start is not None:
            centroids, init_exchange = np.array(self.explicit_start, dtype=np.float64), None
        else:
            centroids, init_exchange = self.initialise(federation)
        if init_exchange is not None:
            self.checked(init_exchange, "init")
            history.append(round_record(restart, 0, "init", math.nan, math.nan, init_exchange))
        self.begin(centroids)
        self.report_progress(restart, 0, centroids, False, history)
        return centroids
