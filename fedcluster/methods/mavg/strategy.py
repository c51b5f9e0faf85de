"""Match averaging (M-Avg), the baseline of Xu, Chen, Chao & Zhang, "Jigsaw Game" (paper ``004``).

One shot: every connected client runs k-means++ and Lloyd with ``k'`` clusters
on its rows (the ``query.local_kmeans`` request) and sends its centroids and
counts; the server matches the clients' centroid sets to each other by the
least total squared distance (Hungarian assignment) and returns the means of
the matched centroids (:mod:`fedcluster.numerics.matching`). A mean that no
point is nearest to is replaced by a client's local centroid before the run
ends (see :class:`MatchAveraging`, "Empty clusters").
"""

from __future__ import annotations

from logging import INFO, WARNING

import numpy as np

from ...federation.base import Federation
from ...logs import counted, log
from ...messages import LOCAL_KMEANS
from ...results import RunResult
from ...strategies.initialisation import local_kmeans_settings, validate_local_centroids
from ...strategies.oneshot import OneShotStrategy
from ...strategies.progress import state_array
from .kernels import best_match_average, fill_empty_slots
from .options import MAvgOptions



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
      centroids (few distinct rows) matches a subset of the reference;
    * **empty clusters.** On non-IID clients the matching pairs centroids of
      different true clusters (a client that holds no point of a cluster
      still gives its slot one of its own centroids), and their mean can
      fall where no point is: the means of matched centroids then hold an
      empty cluster (s1 with the ``kmeans-noniid`` split: up to 3 of 15;
      100 blobs, ``dirichlet:0.3``: up to 6 of 100). The paper says nothing
      of the case. Its measures (l2-distance of the recovered centroids to
      the true centres, purity, NMI) count an empty centroid as a centre
      recovered nowhere and a cluster that labels nothing, and FeCA's own
      aggregation discards such "almost-empty" centroids (its appendix).
      Here the final score round, which every run has and in which each
      client sends only its points per centroid and its sum of squared
      distances, also checks the counts: a slot in which no client counted
      a point takes the local centroid from the M-Avg round that the other
      global centroids represent worst, the one with the largest count
      times squared distance to the nearest non-empty global centroid
      (:func:`~fedcluster.numerics.matching.fill_empty_slots`), and the
      score round is repeated until no slot is empty. A replacement is one
      client's centroid, a mean its client computed and sent (a one-element
      match), so no raw row leaves a client; slots that hold points keep
      the means of their matched centroids, and where none is empty the
      result is the paper's M-Avg, with no extra round. A slot stays empty
      only when every local centroid has been placed (a warning says so).

    The result has as many centroids as the largest client set: ``k'``, which
    is ``k`` unless ``k_prime`` says otherwise (the paper uses ``k``). Where
    every client sent fewer than ``k'`` (each withheld clusters below the
    privacy floor ``min-cluster-size``, or has few distinct rows), the missing
    slots are filled as empty ones are, from the local centroids the matched
    means represent worst, up to ``k'`` where there are enough.

    Its settings are :class:`~.options.MAvgOptions`: besides those of every
    method, ``k_prime``, the clusters of each client's local k-means (0: ``k``).
    """

    Options = MAvgOptions

    def __init__(self, k: int | None = None, /, **settings) -> None:
        super().__init__(k, **settings)
        #: This restart's local centroids and counts, pooled (the candidates of empty slots).
        self._local: tuple[np.ndarray, np.ndarray] | None = None

    def state(self) -> dict:
        """The base state and the restart's pooled local centroids and counts (the score fills
        empty slots from them)."""
        points, counts = self._local if self._local is not None else (None, None)
        return {**super().state(), "local-centroids": points, "local-counts": counts}

    def restore(self, state) -> None:
        """Set :meth:`state`'s entries (as many counts as local centroids)."""
        super().restore(state)
        points = state_array(state, "local-centroids", (None, None), optional=True)
        counts = state_array(state, "local-counts", (None if points is None else len(points),),
                             optional=True)
        self._local = None if points is None or counts is None else (points, counts)

    def request(self):
        """Every connected client's local k'-means centroids and counts."""
        return (LOCAL_KMEANS, local_kmeans_settings(self, self.options.local_k),
                lambda s: validate_local_centroids(s, self.options.local_k), f"M-Avg (local k' = {self.options.local_k})")

    def combine(self, exchange, what):
        """Match the clients' centroid sets and average the matched centroids."""
        summaries = self.weighed(exchange)
        sets = [c for c in (s.centroids[s.counts > 0] for s in summaries) if len(c)]
        if not sets:  # every client withheld every cluster (below the privacy floor)
            return None
        result = best_match_average(sets)
        self._local = (np.concatenate(sets),
                       np.concatenate([s.counts[s.counts > 0] for s in summaries]))
        log(INFO, "%s: matched %d centroid sets in %s, mean squared distance to the "
            "matched means %.6g", what, len(sets), counted(result.n_iter, "round"),
            result.cost / sum(len(s) for s in sets))
        centroids = result.centroids
        if len(centroids) < self.options.local_k:
            # Every client withheld or lost some of its k' clusters (below the privacy floor,
            # or fewer distinct rows): the missing slots take the local centroids represented worst.
            extra = self.options.local_k - len(centroids)
            padded, used = fill_empty_slots(
                np.concatenate([centroids, np.zeros((extra, centroids.shape[1]))]),
                np.arange(self.options.local_k) >= len(centroids), *self._local)
            log(INFO, "%s: the largest client set has %d centroids; %d more are local centroids "
                "the matched means represent worst", what, len(centroids), int(used.sum()))
            centroids = padded[:len(centroids) + int(used.sum())]
        if len(centroids) != self.k:
            log(WARNING, "%s: the largest client set has %d centroids, so the result has %d, "
                "not k = %d", what, len(result.centroids), len(centroids), self.k)
        return centroids

    def score_restart(self, federation: Federation, centroids: np.ndarray, restart: int, rounds: int,
                      converged: bool) -> RunResult | None:
        """Score the centroids; while a cluster is empty, fill it with a local centroid and score again."""
        used = None
        while True:
            run = super().score_restart(federation, centroids, restart, rounds, converged)
            empty = None if run is None or self._local is None else run.counts == 0
            if empty is None or not empty.any():
                return run
            before = 0 if used is None else int(used.sum())
            centroids, used = fill_empty_slots(run.centroids, empty, *self._local, used)
            filled = np.flatnonzero(empty)[:int(used.sum()) - before]
            if not filled.size:
                log(WARNING, "M-Avg: cluster(s) %s hold no point and every local centroid has "
                    "been placed; they stay empty", np.flatnonzero(empty).tolist())
                return run
            log(INFO, "M-Avg: cluster(s) %s held no point; replaced by the local centroids the "
                "other centroids represent worst, scoring again", filled.tolist())
