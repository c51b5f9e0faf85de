"""Federated fuzzy c-means, FFCM (Stallmann & Wilbik, paper ``001``): ``ffcm-avg1``, ``ffcm-avg2``.

Each round the server sends the global centres; every sampled client computes
its memberships (eq. 5), local centres (eq. 6) and supports (eq. 7) and sends
the centres and supports; the server averages them by the support-weighted
mean (avg1, eq. 8) or by k-means over all local centres (avg2, eq. 9). A run
stops when the summed movement of the centres, ``sum_k ||c_k,t - c_k,t+1||``,
is below ``tol`` (the paper's epsilon) or after ``num_server_rounds`` rounds.

Under DP or secure aggregation (avg1 only, :mod:`fedcluster.privacy`) each
client sends instead the numerators and denominators of its local centres,
``sum_i u_ij^m x_i`` and ``W_j`` (:func:`.client.fuzzy_sums_request`); eq. 8
is their totals' quotient. avg2 clusters each client's own centres, which
neither can release.
"""

from __future__ import annotations

import numpy as np

from ...numerics import weighted_centroid_mean
from .kernels import kmeans_average, summed_movement
from ...messages import ClientSummary, validate_reply
from ...strategies.private import Totals
from .client import FUZZY, FUZZY_SUMS
from .options import FFCMOptions
from ...strategies.initialisation import INIT_MAX_ITER, INIT_TOL, SERVER_N_INIT
from ...strategies.rounds import RoundBasedStrategy


class FederatedFuzzyCMeans(RoundBasedStrategy):
    """Federated fuzzy c-means with the paper's avg1 or avg2 aggregation.

    Where the paper leaves a choice open:

    * Memberships follow Bezdek's rule, the minimiser of the paper's eq. 4;
      the printed eq. 5 squares the distances once too often (see
      :mod:`fedcluster.methods.ffcm.kernels`). A point exactly on a global centre
      belongs to it alone; coincident centres share it equally.
    * A centre that no local point supports (support 0, possible only when
      every point sits on another centre) is sent back unchanged; avg1 gives
      it no weight, and where no client supports it, it keeps the mean of
      the clients' copies, i.e. its position (the fallback of
      :func:`~fedcluster.numerics.aggregate.weighted_centroid_mean`).
    * avg2 is unweighted k-means (the paper: "independent from weights
      assigned by clients") with k-means++ seeding and 10 starts, as the
      scikit-learn KMeans the paper used, drawn from the restart's generator.
      Its centres are then matched one-to-one to the current global centres
      (least total squared distance), so that the convergence criterion
      compares each centre with its predecessor. Centres a client sent back
      unchanged with support 0 (withheld by the privacy floor, see
      :mod:`fedcluster.methods.ffcm.client`, or supported by no point) stay out of
      the pool unless fewer than ``k`` centres would be left.
    * The clients report the crisp sum of squared distances to the nearest
      global centre as ``sse``, so the round scores in the history are the
      k-means score of every other method; the final score is the same.
    * The paper initialises the centres at random and names no distribution;
      ``init="random"`` draws them uniformly in the federated bounding box.
      The default start is every method's, ``local-kmeans``.
    * DP and secure aggregation (avg1): eq. 8 from the totals of the clients'
      fuzzy sums and supports (:meth:`aggregate_totals`). Without DP that is
      the plain avg1 up to the fixed-point rounding, except that no client
      withholds a centre of fewer than ``min-cluster-size`` crisp rows (the
      sum form's floor is per client, :mod:`fedcluster.local.private`).

    Its settings are :class:`~.options.FFCMOptions`: ``algorithm``
    ``"ffcm-avg1"`` (eq. 8) or ``"ffcm-avg2"`` (eq. 9); ``fuzzifier``, the
    weighting exponent ``m > 1`` (the paper: 2; 1.1 for its case 2);
    ``tol``, the paper's epsilon.
    """

    Options = FFCMOptions
    train_type = FUZZY
    sums_type = FUZZY_SUMS

    @property
    def averaging(self) -> str:
        """``"avg1"`` (eq. 8) or ``"avg2"`` (eq. 9)."""
        return self.algorithm.removeprefix("ffcm-")

    def train_settings(self) -> dict:
        """The fuzzifier m of eq. 5-7."""
        return {"fuzzifier": self.fuzzifier}

    def sums_settings(self) -> dict:
        """The fuzzifier m, which the sum form's memberships need as the plain step does."""
        return self.train_settings()

    def validate_train_reply(self, summary: ClientSummary, k: int, dim: int) -> ClientSummary:
        """Local centres, supports, crisp counts and squared distances."""
        return validate_reply(summary, k=k, dim=dim, expect=("centroids", "weights", "counts", "sse"))

    def aggregate(self, current: np.ndarray, summaries: list[ClientSummary]) -> np.ndarray:
        """avg1 (eq. 8) or avg2 (eq. 9) of the clients' local centres."""
        local = [s.centroids for s in summaries]
        if self.averaging == "avg1":
            return weighted_centroid_mean(np.stack(local), np.stack([s.weights for s in summaries]))
        supported = [s.centroids[s.weights > 0] for s in summaries]
        if sum(len(c) for c in supported) >= self.k:
            local = supported
        return kmeans_average(local, self.k, rng=self.rng, reference=current,
                              n_init=SERVER_N_INIT, max_iter=INIT_MAX_ITER, tol=INIT_TOL)

    def aggregate_totals(self, current: np.ndarray, totals: Totals) -> np.ndarray:
        """avg1 from a private round's totals: their sums over their supports (eq. 8 with eq. 6).

        ``sum_c W_cj c_cj / sum_c W_cj`` with ``c_cj = S_cj / W_cj`` is
        ``sum_c S_cj / sum_c W_cj``, the totals' target
        (:func:`~fedcluster.privacy.mechanism.centroids_from_totals`): a centre
        of total support 0 keeps its position, as the weighted mean's fallback
        does; under DP one of noisy support below 1 keeps it too and the
        centres are projected into the declared box. Only avg1 gets here
        (:func:`~fedcluster.privacy.options.check_privacy` refuses avg2).
        """
        return totals.target

    def movement(self, new: np.ndarray, current: np.ndarray) -> float:
        """The paper's criterion: the sum over centres of the distance each moved."""
        return summed_movement(new, current)
