"""Strategies that finish in one request round (k-FED, FeCA, M-Avg).

Every connected client gets one request and answers once; the server combines
the answers into the global centroids. Subclasses say what they ask
(:meth:`OneShotStrategy.request`) and how they combine the answers
(:meth:`OneShotStrategy.combine`); :meth:`OneShotStrategy.run_restart` does
both once and logs that the method is one-shot. Their one step is their start:
a client whose spread is 100 x the others' is left out of it as the starts of
the round-based methods leave it out
(:func:`~.initialisation.keep_out_spread_outliers`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from logging import INFO

import numpy as np

from ..federation.base import Exchange, Federation, RunFailed
from ..logs import counted, log
from ..messages import ClientSummary
from ..results import RoundRecord
from .base import ClusteringStrategy, round_record
from .progress import Progress
from .initialisation import keep_common_dimension, keep_out_spread_outliers, reject_far_replies


class OneShotStrategy(ClusteringStrategy):
    """Base class of the one-shot methods (see the module docstring)."""

    def request(self) -> tuple[str, dict, Callable[[ClientSummary], ClientSummary], str]:
        """The request's kind, settings, reply check, and its name in the log."""
        raise NotImplementedError

    def combine(self, exchange: Exchange[ClientSummary], what: str) -> np.ndarray | None:
        """The global centroids from the accepted replies (None if they hold no centroid)."""
        raise NotImplementedError

    def run_restart(self, federation: Federation, restart: int, history: list[RoundRecord],
                    resume: Progress | None = None) -> tuple[np.ndarray, int, bool]:
        """One request to every connected client, one combination (reported as round 1).

        Resumed after that round (the only point a one-shot restart reports),
        it returns the combined centroids, to be scored.
        """
        if resume is not None:
            return resume.centroids, 1, True
        kind, settings, validate, what = self.request()
        exchange = self.exchange(federation, kind, self.connected_nodes(federation), settings,
                                 validate, what=what)
        keep_common_dimension(exchange, lambda s: s.centroids.shape[1], what)
        keep_out_spread_outliers(self, exchange, what)  # its one step is its start
        reject_far_replies(self, exchange, what)
        centroids = self.combine(exchange, what)
        history.append(round_record(restart, 1, "train", math.nan, math.nan, exchange))
        if centroids is None:
            raise RunFailed(f"{self.algorithm}: the accepted replies held no centroid")
        log(INFO, "%s is one-shot: finished in one round with %d of %d clients, %s",
            self.algorithm, len(exchange.accepted), len(exchange.sent),
            counted(len(centroids), "centroid"))
        self.report_progress(restart, 1, centroids, True, history)
        return centroids, 1, True
