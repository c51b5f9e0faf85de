"""Weighted Federated k-means: DWF and EWF k-means (Holzer, Jacob & Kavane, paper ``000``).

Each round the server samples clients, each runs up to ``local_steps`` Lloyd
steps from the global centroids (empty clusters are never relocated) and sends
its local centroids and the number of its points assigned to each global
centroid. The server forms the weighted mean of eq. 3-5, with DWF weights (the
counts, eq. 7) or EWF weights (equal, eq. 8) and the equal-weight fallback of
eq. 4 for a cluster whose weights are all zero, then applies the learning rate
and momentum of eq. 6 with C(-1) = C(0). A run stops when the Frobenius norm of
the centroid movement is below ``tol`` or after ``num_server_rounds`` rounds;
``n_init`` restarts keep the run with the best federated score.

Privacy floor: a client withholds a cluster of fewer than ``min-cluster-size``
rows by sending the global centroid back with count 0, as it does for an empty
cluster; the DWF mean gives it no weight (and where no client holds the
cluster, eq. 4 keeps it where it was), while EWF's equal weights average the
unchanged centroid in, as the paper does for an empty cluster.

Bounded influence (opt-in, not in the paper). With the paper's weighted mean a
client that inflates its row count and its counts, or whose data are in other
units, moves a centroid wherever it likes. Two options bound one client's
influence on a cluster that other clients hold too:

* ``max_client_share`` (``max-client-share``, default 1 = off) clips each
  client's weight to at most that share of the cluster's total weight
  (:func:`~fedcluster.numerics.aggregate.cap_client_shares`, water-filling:
  the cap holds after renormalisation when at least ``1 / share`` clients hold
  the cluster; with fewer holders they get equal weights). The aggregate then
  moves at most ``share`` of the way towards any one client's centroid. EWF's
  weights are equal already, so the cap changes nothing for ``ewf``.
* ``aggregation`` (``"mean"``, the default, eq. 3-5; ``"trimmed-mean"`` with
  ``trim_fraction``; ``"median"``) replaces the weighted mean by a
  coordinate-wise trimmed mean or median over the clients that hold the
  cluster (count > 0), every holder counting once
  (:func:`~fedcluster.numerics.aggregate.robust_centroid_aggregate`): the
  counts decide only who holds a cluster, so ``dwf`` and ``ewf`` coincide
  there, and ``max_client_share`` changes nothing (every holder already has
  an equal share). A cluster that no client holds gets the same statistic
  over all participants (eq. 4's fallback, made robust); with the mean, eq. 4
  is unchanged.

Either way the aggregate is the ``D`` of eq. 6: the learning rate and the
momentum apply after it, unchanged (momentum carries a past aggregate's
displacement into later rounds, decaying by ``momentum`` per round).

What the options do not cover (measured in ``BENCHMARKS.md``, "Poisoned
clients"): the start. The local-k-means start clusters every client's local
centroids weighted by counts, so a far mass of points that does not raise its
client's spread 100-fold takes centroids of its own there; their only holder
is that client, and no per-cluster aggregate takes them back. (A client whose
spread is 100 x the others' is kept out of the start by default:
:func:`~fedcluster.strategies.initialisation.keep_out_spread_outliers`; the
federated score counts a client declaring over 1000 x the median client's rows
as the median client: :meth:`~fedcluster.strategies.ClusteringStrategy.believed`.)
And the cap alone does not stop a client that sends far centroids: the first
round moves each centroid ``share`` of the way, the honest points leave it,
and the liar, now its only holder, takes it; the trimmed mean and the median
ignore it.

Whatever the options, the server warns once per node and run (Flower's log,
WARNING) when one client's per-feature spread is 100 times the median of the
other clients' or more (:func:`~fedcluster.numerics.outliers.spread_outliers`,
from the local centroids and counts of the initialisation's local k-means and
of every round; no row leaves a client): "node N: feature F spread R x the
median of the other clients': is its data in other units?". The warning
changes nothing in the rounds' aggregation; a client the start left out is
named there as a rejected node, and again here at its first round.
"""

from __future__ import annotations

from logging import WARNING
import numpy as np

from ...numerics import momentum_update, weighted_centroid_mean
from ...numerics.outliers import SPREAD_RATIO, spread_outliers
from .kernels import cap_client_shares, robust_centroid_aggregate
from ...federation.base import Exchange
from ...logs import log
from ...messages import ClientSummary
from ...strategies.private import Totals
from ...strategies.progress import state_array, state_entry
from ...strategies.rounds import RoundBasedStrategy
from .client import LLOYD
from .options import DWFOptions


class WeightedFederatedKMeans(RoundBasedStrategy):
    """DWF / EWF federated k-means (Algorithm 1 of the DWF paper).

    Its settings are :class:`~.options.DWFOptions` (each field's description
    says what it does): ``algorithm`` ``"dwf"`` weighs each client and
    cluster by the number of the client's points assigned to the current
    global centroid, ``"ewf"`` equally; ``lr`` and ``momentum`` are eta and
    mu of eq. 6; ``local_steps`` is ``max_local`` (the clients stop earlier
    when their centroids move less than :attr:`stop_tolerance`, ``tol`` on its
    ``tol_scale``); ``num_server_rounds`` is
    ``max_global``; ``init`` (``"kfed"`` as the paper recommends);
    ``max_client_share``, ``aggregation`` and ``trim_fraction`` bound one
    client's influence (see the module docstring).
    """

    Options = DWFOptions
    train_type = LLOYD

    def __init__(self, k: int | None = None, /, **settings) -> None:
        super().__init__(k, **settings)
        self._previous: np.ndarray | None = None
        #: Nodes already warned about their spread (once per node and run).
        self.spread_warned: set[int] = set()

    def train_settings(self) -> dict:
        """Local Lloyd steps and tolerance (Algorithm 2, LocalUpdate)."""
        return {"local-steps": self.local_steps, "tol": self.stop_tolerance}

    def begin(self, centroids: np.ndarray) -> None:
        """C(-1) = C(0): no momentum in the first round."""
        self._previous = centroids

    def state(self) -> dict:
        """The base state, the momentum's previous centroids C(t-1) and the nodes warned about."""
        return {**super().state(), "previous": self._previous,
                "spread-warned": sorted(self.spread_warned)}

    def restore(self, state) -> None:
        """Set :meth:`state`'s entries (C(t-1) must be a (k, d) array, or None before a restart)."""
        super().restore(state)
        self._previous = state_array(state, "previous", (self.k, None), optional=True)
        self.spread_warned = {int(node) for node in state_entry(state, "spread-warned")}

    def checked(self, exchange: Exchange[ClientSummary], what: str) -> None:
        """Warn (once per node and run) about a client whose spread is 100 x the others' or more.

        Uses the local centroids and counts of the accepted replies (see
        :func:`~fedcluster.numerics.outliers.spread_outliers`); replies
        without them (a random start's bounds) are skipped.
        """
        nodes = [n for n, s in exchange.accepted.items()
                 if s.centroids is not None and s.counts is not None]
        if len(nodes) < 3:
            return
        summaries = [exchange.accepted[n] for n in nodes]
        flagged = spread_outliers([s.centroids for s in summaries], [s.counts for s in summaries],
                                  ratio=SPREAD_RATIO)
        for index, feature, ratio in flagged:
            node = nodes[index]
            if node in self.spread_warned:
                continue
            self.spread_warned.add(node)
            log(WARNING, "%s: node %d: feature %d spread %.3g x the median of the other "
                "clients': is its data in other units?", what, node, feature, ratio)

    def aggregate(self, current: np.ndarray, summaries: list[ClientSummary]) -> np.ndarray:
        """Eq. 3-5 (weighted mean with the eq. 4 fallback), or a robust aggregate; then eq. 6."""
        local = np.stack([s.centroids for s in summaries])
        if self.aggregation == "mean":
            weights = (np.stack([s.counts for s in summaries]) if self.algorithm == "dwf"
                       else np.ones(local.shape[:2]))
            if self.max_client_share < 1.0:
                weights = cap_client_shares(weights, self.max_client_share)
            aggregate = weighted_centroid_mean(local, weights)
        else:
            aggregate = robust_centroid_aggregate(
                local, np.stack([s.counts for s in summaries]), method=self.aggregation,
                trim_fraction=self.trim_fraction)
        return self._step(current, aggregate)

    def aggregate_totals(self, current: np.ndarray, totals: Totals) -> np.ndarray:
        """DP or secure aggregation: the Lloyd step of the totals, then eq. 6.

        With one local step the DWF mean of eq. 3-5 is the totals' sums over
        their counts. EWF's equal weights would need each client's own
        centroids, which the sum form hides: under DP or secure aggregation
        ``ewf`` takes the same count-weighted step as ``dwf``.
        """
        return self._step(current, totals.target)

    def _step(self, current: np.ndarray, aggregate: np.ndarray) -> np.ndarray:
        """Eq. 6: learning rate and momentum towards the aggregate."""
        new = momentum_update(current, self._previous, aggregate, lr=self.lr, momentum=self.momentum)
        self._previous = current
        return new
