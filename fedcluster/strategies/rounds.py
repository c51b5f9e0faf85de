"""Strategies that refine global centroids over rounds of local steps.

Each round the server samples clients, sends them the global centroids, and
aggregates their replies into new centroids; a restart stops when the centroids
move less than ``tol`` (:attr:`RoundBasedStrategy.stop_tolerance`, in the data's
units or relative to its variance: ``tol-scale``) or after ``num_server_rounds``
rounds. Subclasses say what the
clients do (:attr:`train_type`, :meth:`train_settings`, :meth:`validate_train_reply`)
and how the server combines the replies (:meth:`aggregate`).
"""

from __future__ import annotations

import math
from logging import INFO, WARNING

import numpy as np

from ..federation.base import Exchange, Federation
from ..logs import log
from ..messages import ClientSummary, validate_reply
from ..numerics import frobenius_movement, movement_tolerance
from ..privacy.kinds import SUMS
from ..privacy.options import privacy_on
from .private import PrivateRounds, Totals
from ..results import RoundRecord
from .base import ClusteringStrategy, exact_score, round_record
from .moments import pooled_moments
from .progress import Progress
from .initialisation import BOX_STARTS, initial_centroids, reject_far_replies


#: How the moments request of ``tol-scale = variance`` is named in the log.
TOL_SCALE = "tol-scale variance (moments)"


class RoundBasedStrategy(ClusteringStrategy):
    """Base class of the iterative methods.

    Besides the settings of every method, its options (a
    :class:`~fedcluster.options.RoundOptions` or a model with the same
    fields) give ``num_server_rounds``, the largest number of rounds per
    restart; ``tol``, the centroid movement (:meth:`movement`) below which a
    restart stops (0 runs every round), in the data's units or, with
    ``tol_scale="variance"``, relative to its spread (:attr:`stop_tolerance`);
    and the start: ``init``
    (``"local-kmeans"``, ``"kfed"``, ``"random"``, ``"spread"`` or a (k, d) array file, see
    :mod:`.initialisation`) with ``k_prime``, the clients' local clusters for
    ``init="kfed"`` (0: ``k``).

    With ``dp`` or ``secure-aggregation`` on (methods with a sum form only,
    see :mod:`fedcluster.privacy`), :attr:`private` runs each round: the
    clients answer :attr:`sums_type` (with :meth:`sums_settings`) with
    per-cluster sums and counts, the server gets their totals
    (noisy under DP) and the method combines them in
    :meth:`aggregate_totals`; the start is random or spread in the declared
    ``data-bounds`` (or a file), and a DP run stops when its budget is spent.
    """

    #: The kind of each round's request to the clients (the method's own step).
    train_type: str = ""
    #: The kind of a private round's request: the method's step in sum form (one Lloyd step).
    sums_type: str = SUMS

    def __init__(self, k: int | None = None, /, **settings) -> None:
        super().__init__(k, **settings)
        #: Starting centroids that replace ``init`` (Flower's ``initial_arrays``).
        self.explicit_start: np.ndarray | None = None
        #: DP and secure aggregation of each round (None when both are off).
        self.private = PrivateRounds(self) if privacy_on(self.options) else None
        #: The pooled rows' mean per-feature variance under ``tol-scale = variance``, once
        #: :meth:`before_restarts` has asked the clients (None: ``tol`` is absolute).
        self.mean_variance: float | None = None

    @property
    def stop_tolerance(self) -> float:
        """The movement below which a restart stops: ``tol``, or ``sqrt(tol x mean variance)``
        (scikit-learn's rule, :func:`~fedcluster.numerics.movement_tolerance`)."""
        return movement_tolerance(self.tol, self.mean_variance)

    def before_restarts(self, federation: Federation) -> None:
        """Under ``tol-scale = variance``, one moments request for :attr:`mean_variance`.

        The moments are those of the rows the run clusters (a standardised
        run's requests carry its transform, so the clients answer about the
        standardised rows). The options refuse the rule under DP and secure
        aggregation, which would let no unnoised moments out; a resumed run
        asks again, and the same rows give the same variance.
        """
        if self.tol_scale != "variance" or self.tol == 0:
            return
        moments, clients = pooled_moments(self, federation, TOL_SCALE)
        self.mean_variance = float(np.mean(np.square(moments.std)))
        log(INFO, "%s: mean feature variance %.6g over %d rows of %d client(s): the centroids "
            "stop when they move less than %.6g", TOL_SCALE, self.mean_variance, moments.n,
            clients, self.stop_tolerance)

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

    def sums_settings(self) -> dict:
        """The config of a private round's request (:attr:`sums_type`) beyond the privacy's own."""
        return {}

    def aggregate_totals(self, current: np.ndarray, totals: Totals) -> np.ndarray:
        """New global centroids from a private round's totals (methods with a sum form)."""
        raise NotImplementedError(f"{self.algorithm} has no sum form for DP or secure aggregation")

    def movement(self, new: np.ndarray, current: np.ndarray) -> float:
        """How far the centroids moved (Frobenius norm unless a paper says otherwise)."""
        return frobenius_movement(new, current)

    def initialise(self, federation: Federation) -> tuple[np.ndarray, Exchange | None]:
        """The starting centroids of a restart and the exchange that made them (``init``).

        Methods with their own initial round (FKM) override this. Under DP or
        secure aggregation a random or spread start is drawn in the declared bounds.
        """
        if self.private is not None and self.init in BOX_STARTS:
            return self.private.initial_centroids(self, federation, self.init), None
        return initial_centroids(self, federation, self.init, k_prime=self.options.local_k)

    def begin(self, centroids: np.ndarray) -> None:
        """Called with the starting centroids of each restart (reset method state here)."""

    def checked(self, exchange: Exchange[ClientSummary], what: str) -> None:
        """Called with each round's (and the initialisation's) checked replies; DWF warns here."""

    # -- checkpoints ---------------------------------------------------------------
    def state(self) -> dict:
        """The base state and, under DP, the privacy's own (:meth:`PrivateRounds.state`)."""
        return {**super().state(), **(self.private.state() if self.private is not None else {})}

    def restore(self, state) -> None:
        """Set :meth:`state`'s entries, the privacy's included."""
        super().restore(state)
        if self.private is not None:
            self.private.restore(state, self.k)

    # -- the run -----------------------------------------------------------------
    def train_round(self, federation: Federation, t: int, current: np.ndarray
                    ) -> tuple[np.ndarray, float, float, Exchange[ClientSummary]]:
        """One round: sample, send the global centroids, aggregate the replies.

        Returns the new centroids, their movement, the round's score (NaN
        unless every reply carries its squared distances) and the exchange.
        """
        k, dim = current.shape
        nodes = self.sample_nodes(federation, self.rng)  # before train_settings: both draw from rng
        if self.private is not None:
            totals, exchange, self.epsilon = self.private.totals(self, federation, nodes, current, t)
            new = self.aggregate_totals(current, totals)
            score = totals.sse / totals.n if totals.n > 0 else math.nan
            return new, self.movement(new, current), score, exchange
        settings = {"chunk-size": self.chunk_size, "device": self.device, **self.train_settings()}
        exchange = self.exchange(
            federation, self.train_type, nodes, settings,
            lambda s: self.validate_train_reply(s, k, dim), centroids=np.ascontiguousarray(current),
            what=f"round {t}")
        self.checked(exchange, f"round {t}")
        reject_far_replies(self, exchange, f"round {t}", start=False)
        new = self.aggregate(current, self.weighed(exchange))
        summaries, factors = self.believed(exchange)  # the history's score: capped as the final one
        score = (exact_score(summaries, factors) if all(not math.isnan(s.sse) for s in summaries)
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
        self.epsilon = math.nan
        for t in range(done + 1, self.num_server_rounds + 1):
            if converged:
                break
            if self.private is not None and (reason := self.private.stop_before(t)):
                self.private.stop_reason = reason
                log(WARNING, "stopped: %s; the centroids of round %d are kept", reason, rounds)
                break
            rounds = t
            centroids, movement, score, exchange = self.train_round(federation, t, centroids)
            history.append(round_record(restart, t, "train", movement, score, exchange,
                                        epsilon=self.epsilon))
            log(INFO, "round %d/%d: movement %.6g, score %.6g, clients %d/%d", t, self.num_server_rounds,
                movement, score, len(exchange.accepted), len(exchange.sent))
            converged = movement < self.stop_tolerance
            self.report_progress(restart, t, centroids, converged, history)
        return centroids, rounds, converged

    def start_restart(self, federation: Federation, restart: int, history: list[RoundRecord]
                      ) -> np.ndarray:
        """The restart's starting centroids (``init``, or the explicit start), recorded and reported.

        A DP run without declared bounds first estimates them
        (:meth:`PrivateRounds.estimate_bounds`), recorded as an ``init`` row
        with the epsilon it spent; so is the private start (``init =
        private``: :meth:`PrivateRounds.private_start`).
        """
        if self.private is not None and self.private.needs_bounds:
            exchange, epsilon = self.private.estimate_bounds(self, federation)
            history.append(round_record(restart, 0, "init", math.nan, math.nan, exchange,
                                        epsilon=epsilon))
        if self.explicit_start is not None:
            centroids, init_exchange = np.array(self.explicit_start, dtype=np.float64), None
        elif self.private is not None and self.init == "private":
            centroids, exchange, epsilon = self.private.private_start(self, federation)
            history.append(round_record(restart, 0, "init", math.nan, math.nan, exchange,
                                        epsilon=epsilon))
            init_exchange = None
        else:
            centroids, init_exchange = self.initialise(federation)
        if init_exchange is not None:
            self.checked(init_exchange, "init")
            history.append(round_record(restart, 0, "init", math.nan, math.nan, init_exchange))
        self.begin(centroids)
        self.report_progress(restart, 0, centroids, False, history)
        return centroids
