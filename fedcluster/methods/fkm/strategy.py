"""Federated k-means of Garst & Reinders (FKM, paper ``002``, Algorithm 1).

In an initial round every connected client runs k-means++ on its rows and
sends the means and sizes of the resulting clusters. Each round the server
runs weighted k-means to convergence over all local centroids it received,
weighted by their cluster sizes (eq. 1), and sends the ``k`` global centroids
to the round's clients; each client drops the global centroids that get none
of its rows (its local k shrinks), runs one Lloyd step from the others and
sends the new centroids and cluster sizes. Clusters of fewer than ``p`` rows
are never sent.
"""

from __future__ import annotations

from logging import INFO, WARNING

import numpy as np

from ...numerics.pooling import pool_centroids, server_kmeans
from ...federation.base import Exchange, Federation, RunFailed
from ...logs import log
from ...messages import ClientSummary, ProtocolError, validate_reply
from ...strategies.initialisation import (INIT_MAX_ITER, INIT_TOL, SERVER_N_INIT,
                                          keep_common_dimension, keep_out_spread_outliers,
                                          reject_far_replies)
from ...strategies.rounds import RoundBasedStrategy
from .client import GARST, GARST_INIT
from .options import FKMOptions


class GarstFederatedKMeans(RoundBasedStrategy):
    """FKM: iterated server k-means over the clients' local centroids (Garst & Reinders).

    Its settings are :class:`~.options.FKMOptions`, those of every method:
    ``k`` is ``K_g``; ``num_server_rounds`` counts the rounds after the
    initial one; the run stops when the Frobenius norm of the movement of
    the global centroids (matched to the previous ones, see below) is below
    ``tol`` (0 runs every round); ``min_cluster_size`` is the paper's privacy
    threshold ``p``: a client never sends a cluster of fewer rows (the paper
    uses 2). It takes no ``init`` and no ``k_prime`` (its own first round
    starts it).

    Notes
    -----
    Where the paper leaves a choice open:

    * Initial round (line 4): the clients seed with k-means++ and run no
      Lloyd iteration, as the paper says; since the seeds are raw rows (the
      authors' code sends them), a client sends the means of the rows
      nearest each seed instead (the "cluster means" of the pseudocode),
      with their sizes. It is the
      strategy's own first round (phase ``"init"`` in the history), so the
      ``init`` option of the other methods does not apply; an explicit start
      (``start(initial_arrays=...)``) replaces it.
    * Server k-means (line 10): ``SERVER_N_INIT`` (10) weighted k-means++ starts
      drawn from the restart's generator ``self.rng`` plus, after the first
      round, one start from the current global centroids; each runs Lloyd to
      convergence and the lowest weighted inertia (eq. 1) wins, the current
      centroids on ties. The pooled centroids are sorted first, so a seed
      gives the same result whatever the node ids. The new centroids are
      reordered to match the current ones (Hungarian matching), so that
      centroid ``j`` stays centroid ``j`` and the movement measures motion.
      With fewer than ``k`` distinct received centroids (few clients
      answered) k-means++ cannot start and the start from the current
      centroids is the result.
    * Counts: the sizes of the clusters whose means are sent (the assignment
      to the global centroids, which one Lloyd step from the kept centroids
      repeats).
    * A round in which no client sends any cluster keeps the global centroids
      (movement 0: with every client answering, the next round would be the
      same).
    """

    Options = FKMOptions
    train_type = GARST

    # -- the clients' replies ----------------------------------------------------
    def validate_clusters(self, summary: ClientSummary, dim: int | None, *, with_sse: bool
                          ) -> ClientSummary:
        """Check a reply of at most ``k`` clusters, none below the privacy threshold."""
        expect = ("centroids", "counts", "sse") if with_sse else ("centroids", "counts")
        summary = validate_reply(summary, dim=dim, expect=expect)
        if summary.centroids.shape[0] > self.k:
            raise ProtocolError(f"sent {summary.centroids.shape[0]} centroids, more than k = {self.k}")
        if np.any(summary.counts < self.min_cluster_size):
            raise ProtocolError(f"sent a cluster of fewer than the privacy threshold of "
                                f"{self.min_cluster_size} points")
        return summary

    def validate_train_reply(self, summary: ClientSummary, k: int, dim: int) -> ClientSummary:
        """A round's reply: ``k_i <= k`` centroids of dimension ``dim``, counts and sse."""
        return self.validate_clusters(summary, dim, with_sse=True)

    # -- the server ----------------------------------------------------------------
    def train_settings(self) -> dict:
        """None: the round's step needs only the privacy threshold every request carries."""
        return {}

    def server_step(self, summaries: list[ClientSummary], start: np.ndarray | None) -> np.ndarray:
        """Weighted k-means over the received centroids (line 10, eq. 1)."""
        points, weights = pool_centroids([s.centroids for s in summaries],
                                         [s.counts for s in summaries])
        return server_kmeans(points, weights, self.k, rng=self.rng, start=start,
                             n_init=SERVER_N_INIT, max_iter=INIT_MAX_ITER, tol=INIT_TOL,
                             chunk_size=self.chunk_size)

    def aggregate(self, current: np.ndarray, summaries: list[ClientSummary]) -> np.ndarray:
        """New global centroids from this round's local centroids."""
        if not any(len(s.counts) for s in summaries):
            log(WARNING, "no client sent a cluster of %d or more points; the global centroids stay",
                self.min_cluster_size)
            return current
        return self.server_step(summaries, current)

    # -- the initial round ---------------------------------------------------------
    def initialise(self, federation: Federation) -> tuple[np.ndarray, Exchange[ClientSummary]]:
        """The clients' k-means++ clusters and the server's k-means over them (lines 1-10).

        Raises
        ------
        RunFailed
            No client answered, or the clients sent fewer than ``k`` distinct
            centroids.
        """
        config = {
            "k": self.k,
            "seed": int(self.rng.integers(2**31)),
            "chunk-size": self.chunk_size,
            "device": self.device,
        }
        what = "init (local k-means++)"
        exchange = self.exchange(federation, GARST_INIT, self.connected_nodes(federation), config,
                                 lambda s: self.validate_clusters(s, None, with_sse=False),
                                 what=what)
        keep_common_dimension(exchange, lambda s: s.centroids.shape[1], what)
        keep_out_spread_outliers(self, exchange, what)  # as the other local-k-means starts
        reject_far_replies(self, exchange, what)
        summaries = self.weighed(exchange)
        try:
            centroids = self.server_step(summaries, None)
        except ValueError as exc:
            raise RunFailed(f"fkm init: {exc}") from None
        log(INFO, "%s: weighted k-means over %d local centroids", what,
            sum(len(s.counts) for s in summaries))
        return centroids, exchange
