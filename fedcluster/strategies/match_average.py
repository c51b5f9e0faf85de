"""Match averaging (M-Avg), the baseline of Xu, Chen, Chao & Zhang, "Jigsaw Game" (paper ``004``).

One shot: every connected client runs k-means++ and Lloyd with ``k'`` clusters
on its rows (the ``query.local_kmeans`` request) and sends its centroids and
counts; the server matches the clients' centroid sets to each other by the
least total squared distance (Hungarian assignment) and returns the means of
the matched centroids (:mod:`fedcluster.numerics.matching`).
"""

from __future__ import annotations

from collections.abc import Iterable
from logging import INFO, WARNING

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.common.logger import log
from flwr.serverapp import Grid

from ..config import RunConfig
from ..numerics.matching import best_match_average
from ..protocol import LOCAL_KMEANS, ClientSummary
from .base import Exchange
from .base import exchange_metrics
from .initialisation import local_kmeans_settings, read_local_centroids
from .oneshot import OneShotStrategy, keep_common_centroid_dimension


class MatchAveraging(OneShotStrategy):
    """M-Avg: Hungarian matching of the clients' local centroids, then their means.

    The paper gives M-Avg one sentence ("matches different sets of centroids
    from clients by minimizing their l2-distances and returns the means of
    matched centroids"); the choices it leaves open are these:

    * the matching minimises the summed squared distances, the square of the
      paper's l2-distance between centroid sets (its Table 1 measure);
    * every client's set is matched to a reference, each reference centroid is
      replaced by the unweighted mean of the centroids matched to it, and this
      repeats until no matching changes (each step lowers the total squared
      distance, so it ends);
    * the starting reference is each client set with the most centroids in
      turn, and the run with the lowest total is kept: no client is
      privileged, and the replies are sorted by their content first, so that
      neither node ids nor reply order matter;
    * a client's empty clusters (count 0) are dropped, and a client with fewer
      centroids (few distinct rows) matches a subset of the reference.

    The result has as many centroids as the largest client set: ``k'``, which
    is ``k`` unless ``k_prime`` says otherwise (the paper uses ``k``).

    Parameters
    ----------
    k : int
        Number of clusters.
    k_prime : int, optional
        Clusters of each client's local k-means (default ``k``).
    **options
        The common options of :class:`~.base.ClusteringStrategy`.
    """

    algorithm = "mavg"

    def __init__(self, k: int, *, k_prime: int | None = None, **options) -> None:
        super().__init__(k, **options)
        if k_prime is not None and k_prime < 1:
            raise ValueError(f"k_prime must be >= 1, got {k_prime}")
        self.k_local = k_prime or k

    @classmethod
    def from_config(cls, config: RunConfig) -> MatchAveraging:
        """Build the strategy from a validated :class:`RunConfig`."""
        return cls(config.k, k_prime=config.k_prime or None, **cls.common_options(config))

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """Ask every connected client for its local k'-means centroids and counts."""
        return self.build_requests(LOCAL_KMEANS, self.connected_nodes(grid),
                                   {**local_kmeans_settings(self, self.k_local), **dict(config)})

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord]:
        """Match the clients' centroid sets and average the matched centroids."""
        what = f"M-Avg (local k' = {self.k_local})"
        exchange = self.sort_replies(replies, lambda c: read_local_centroids(c, self.k_local), what)
        metrics = exchange_metrics(exchange)
        keep_common_centroid_dimension(exchange, what)
        summaries = exchange.in_content_order()
        sets = [c for c in (s.centroids[s.counts > 0] for s in summaries) if len(c)]
        result = best_match_average(sets)
        log(INFO, "%s: matched %d centroid sets in %d rounds, mean squared distance to the "
            "matched means %.6g", what, len(sets), result.n_iter,
            result.cost / sum(len(s) for s in sets))
        if len(result.centroids) != self.k:
            log(WARNING, "%s: the largest client set has %d centroids, so the result has %d, "
                "not k = %d", what, len(result.centroids), len(result.centroids), self.k)
        metrics["matching-rounds"] = result.n_iter
        return ArrayRecord({"centroids": Array(np.ascontiguousarray(result.centroids))}), metrics
