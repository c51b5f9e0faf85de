"""Strategies that finish in one request round (k-FED, FeCA, M-Avg).

Every connected client gets one request and answers once; the server combines
the answers into the global centroids. Subclasses write Flower's
``configure_train`` (the request) and ``aggregate_train`` (the combination);
:meth:`OneShotStrategy.run_restart` drives them once and logs that the method
is one-shot.
"""

from __future__ import annotations

import math
from logging import INFO

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord
from flwr.common.logger import log
from flwr.serverapp import Grid

from ..protocol import ClientSummary
from ..server.artifacts import RoundRecord
from .base import ClusteringStrategy, Exchange, RunFailed, round_record
from .initialisation import keep_common_dimension


def keep_common_centroid_dimension(exchange: Exchange[ClientSummary], what: str) -> None:
    """Reject the replies whose centroids' dimension differs from the most common one."""
    keep_common_dimension(exchange, lambda s: s.centroids.shape[1], what)


class OneShotStrategy(ClusteringStrategy):
    """Base class of the one-shot methods (see the module docstring)."""

    def run_restart(self, grid: Grid, restart: int, history: list[RoundRecord]
                    ) -> tuple[np.ndarray, int, bool]:
        """One request to every connected client, one aggregation."""
        messages = self.configure_train(1, ArrayRecord(), ConfigRecord(), grid)
        replies = grid.send_and_receive(messages, timeout=self.round_timeout)
        arrays, _ = self.aggregate_train(1, replies)
        exchange = self.last_exchange
        history.append(round_record(restart, 1, "train", math.nan, math.nan, exchange))
        if arrays is None:
            raise RunFailed(f"{self.algorithm}: the accepted replies held no centroid")
        centroids = arrays["centroids"].numpy()
        log(INFO, "%s is one-shot: finished in one round with %d of %d clients, %d centroids",
            self.algorithm, len(exchange.accepted), len(exchange.sent), len(centroids))
        return centroids, 1, True
