"""Starting centroids that need no raw data point from any client.

* ``local-kmeans``: each client runs k-means++ and Lloyd on its rows and sends
  centroids and counts; the server runs weighted k-means++ and Lloyd over all of
  them (counts as weights), leaving out a client whose spread is 100 x the
  others' (:func:`keep_out_spread_outliers`; so does ``kfed``).
* ``kfed``: k-FED (Dennis, Li & Smith 2021), one shot: each client sends the
  centres of its local k'-means; the server seeds k of them by farthest-point
  selection and runs one Lloyd round over them (:mod:`fedcluster.numerics.kfed`).
* ``random``: uniform in the federated bounding box, assembled from the
  clients' per-feature minima and maxima.
* ``spread``: packed apart in that box (:func:`~fedcluster.numerics.spread_in_box`).
* a file: an explicit (k, d) array.

The local k-means exchange is shared with the one-shot methods (k-FED, M-Avg).
"""

from __future__ import annotations

from collections import Counter
from logging import INFO, WARNING

import numpy as np

from ..data import read_points
from ..numerics import kfed_centres, kmeans, random_in_box, spread_in_box
from ..numerics.outliers import (REACH_RATIO, SPREAD_RATIO, reach_outliers, reach_reference,
                                 spread_outliers)
from ..numerics.pooling import pool_centroids
from ..messages import BOUNDS, LOCAL_KMEANS, ClientSummary, ProtocolError, validate_reply
from ..federation.base import Exchange, Federation, RunFailed
from ..logs import log
from .base import ClusteringStrategy

#: Restarts of the server's weighted k-means over the clients' centroids; it
#: runs on a few hundred points, so more restarts cost the clients nothing.
SERVER_N_INIT = 10
#: Lloyd iterations (and tolerance) of the local and server k-means of an
#: initialisation: run to convergence, as the clients do it only once.
INIT_MAX_ITER = 300
INIT_TOL = 1e-9


def initial_centroids(
    strategy: ClusteringStrategy, federation: Federation, init: str, *, k_prime: int
) -> tuple[np.ndarray, Exchange[ClientSummary] | None]:
    """Starting centroids by the method ``init`` names (or from the file it names)."""
    if init == "local-kmeans":
        return local_kmeans_init(strategy, federation)
    if init == "kfed":
        return kfed_init(strategy, federation, k_prime)
    if init in BOX_STARTS:
        return box_init(strategy, federation, BOX_STARTS[init])
    return centroids_from_file(init, strategy.k), None


def centroids_from_file(path: str, k: int) -> np.ndarray:
    """Read explicit starting centroids and check that there are ``k`` of them."""
    centroids = read_points(path)
    if centroids.shape[0] != k:
        raise ValueError(f"init file {path} holds {centroids.shape[0]} centroids, but k = {k}")
    return centroids


#: The starts that need only a box: ``init`` -> ``(low, high, k, rng=)`` -> (k, d) centroids.
BOX_STARTS = {"random": random_in_box, "spread": spread_in_box}


def box_init(strategy: ClusteringStrategy, federation: Federation, draw
             ) -> tuple[np.ndarray, Exchange[ClientSummary]]:
    """Centroids drawn by ``draw`` (a :data:`BOX_STARTS` value) in the bounding box of all
    clients' data."""
    exchange = strategy.exchange(
        federation, BOUNDS, strategy.connected_nodes(federation), {},
        lambda s: validate_reply(s, expect=("bounds",)), what="init (bounds)",
    )
    keep_common_dimension(exchange, lambda s: s.low.shape[0], "init (bounds)")
    reject_far_replies(strategy, exchange, "init (bounds)")
    summaries = list(exchange.accepted.values())
    low = np.min([s.low for s in summaries], axis=0)
    high = np.max([s.high for s in summaries], axis=0)
    return draw(low, high, strategy.k, rng=strategy.rng), exchange


def local_kmeans_settings(strategy: ClusteringStrategy, k_local: int) -> dict:
    """The config of a ``query.local_kmeans`` request: ``k_local`` clusters, run to convergence.

    One seed, drawn from the restart's generator, serves every client.
    """
    return {
        "k": k_local,
        "seed": int(strategy.rng.integers(2**31)),
        "max-iter": INIT_MAX_ITER,
        "tol": INIT_TOL,
        "chunk-size": strategy.chunk_size,
        "device": strategy.device,
    }


def validate_local_centroids(summary: ClientSummary, k_local: int,
                             expect: tuple[str, ...] = ("centroids", "counts")) -> ClientSummary:
    """Check a reply that carries at most ``k_local`` local centroids."""
    summary = validate_reply(summary, expect=expect)
    if summary.centroids.shape[0] > k_local:
        raise ProtocolError(
            f"sent {summary.centroids.shape[0]} local centroids, at most {k_local} asked")
    return summary


def local_kmeans_exchange(strategy: ClusteringStrategy, federation: Federation, k_local: int, what: str
                          ) -> Exchange[ClientSummary]:
    """Ask every connected client for the centroids and counts of its local k-means.

    A client with fewer distinct rows than ``k_local`` sends fewer centroids.
    """
    exchange = strategy.exchange(federation, LOCAL_KMEANS, strategy.connected_nodes(federation),
                                 local_kmeans_settings(strategy, k_local),
                                 lambda s: validate_local_centroids(s, k_local), what=what)
    keep_common_dimension(exchange, lambda s: s.centroids.shape[1], what)
    keep_out_spread_outliers(strategy, exchange, what)
    reject_far_replies(strategy, exchange, what)
    return exchange


def keep_out_spread_outliers(strategy: ClusteringStrategy, exchange: Exchange[ClientSummary],
                             what: str) -> None:
    """Reject from the start a client whose spread is 100 x the median of the others' or more.

    :func:`~fedcluster.numerics.outliers.spread_outliers` over the replies'
    local centroids and counts (no row leaves a client). A client in other
    units (x 1e6) or sending far centroids would otherwise take centroids of
    its own in the start's server k-means (or k-FED's farthest-point
    seeding, or a one-shot method's one step: :mod:`.oneshot`), clusters
    that no honest row joins and no round takes back. So the start leaves it
    out, naming it in the log (WARNING, as a rejected node); the rounds
    still ask it, where DWF's per-round warning names it again and the
    method's own aggregation applies (a decision there is issue 24's item
    1). With ``trust_clients`` the client stays in the start and is only
    named.

    The ratio 100 (:data:`~fedcluster.numerics.outliers.SPREAD_RATIO`): on
    honest federations the largest ratio measured is 40 (digits, MNIST,
    k-means non-IID; see :func:`~fedcluster.numerics.outliers.spread_outliers`),
    so no honest client of the committed grids is left out, and a federation
    in which no client is flagged starts exactly as before. Fewer than three
    usable clients: nobody is flagged (with two, neither can be blamed).
    Centroids at 1e7 from a client of S1 (data in [0, 1e6]) raise its spread
    about 45-fold only: kept.
    """
    nodes = [node for node, s in exchange.accepted.items()
             if s.centroids is not None and s.counts is not None]
    summaries = [exchange.accepted[node] for node in nodes]
    for index, feature, ratio in spread_outliers([s.centroids for s in summaries],
                                                 [s.counts for s in summaries],
                                                 ratio=SPREAD_RATIO):
        node = nodes[index]
        reason = (f"feature {feature} spread {ratio:.3g} x the median of the other clients' "
                  "(data in other units?)")
        if strategy.trust_clients:
            log(WARNING, "%s: node %d: %s; kept in the start (--trust-clients)", what, node, reason)
            continue
        log(WARNING, "%s: rejected node %d: %s; kept out of the start (--trust-clients keeps it)",
            what, node, reason)
        exchange.rejected[node] = reason
        del exchange.accepted[node]


def reply_points(summary: ClientSummary) -> np.ndarray:
    """Where a reply places the client in feature space: the centroids that weigh, or its bounds.

    A centroid with no count and no fuzzy weight is one the client withheld
    or left empty (it sends the global centroid back); no aggregation uses
    it, so it is not the client's. A bounds reply is its two corners.
    """
    if summary.centroids is not None:
        used = np.zeros(len(summary.centroids), dtype=bool)
        for weights in (summary.counts, summary.weights):
            if weights is not None:
                used |= np.asarray(weights) > 0
        if summary.counts is None and summary.weights is None:
            used[:] = True
        return np.asarray(summary.centroids)[used]
    if summary.low is not None and summary.high is not None:
        return np.stack([summary.low, summary.high])
    return np.empty((0, 0))


def reject_far_replies(strategy: ClusteringStrategy, exchange: Exchange[ClientSummary],
                       what: str, *, start: bool = True) -> None:
    """Reject a reply whose centroids (or bounds) reach 10 x farther than the other clients'.

    :func:`~fedcluster.numerics.outliers.reach_outliers` over the replies'
    :func:`reply_points`: a client sending its centroids at 1e99, or at 1e7
    where the data lie in [0, 1e6], is rejected with its sender named, and
    the step goes on with the others (the quorum counts it again). So no
    reply of one client can place a pooled centroid (a weighted mean, a
    server k-means' input, a random start's box) farther than 10 times the
    other clients' reach from the federation's centre. Every method runs it
    on every reply that carries centroids or bounds: the starts, each round,
    the one-shot step. With ``trust_clients`` the client is kept and named.

    A start (``start``, every client asked) measures each reply against the
    other replies, and leaves the reference of the replies it accepts in
    ``strategy.far_reference``
    (:func:`~fedcluster.numerics.outliers.reach_reference`); a round
    measures its replies against that reference, so that a round sampling
    a few clients (five of fifty, each holding one cluster) does not judge
    them by each other. A round without a learned reference (an explicit
    start) measures its replies against each other.

    The ratio 10 (:data:`~fedcluster.numerics.outliers.REACH_RATIO`): an
    honest client's reach is at most the data's extent from the centre; over
    S1-S4, iris, wine, breast-cancer and digits split IID, half-IID,
    Dirichlet 0.1 and 0.3, k-means non-IID, distance 0.1 / 1 / 10 (10 and 50
    clients; every start and method but DeepFeCA; the rounds measured both
    against each other and against the start's reference) the largest
    honest ratio was 5.4, so 10 leaves a margin of 1.85 and still rejects a client of S1
    sending one centroid at 5 times the data's range (12.5). A liar just
    inside the ratio is kept: it can pull a pooled centroid at most that
    far, weighted by its (capped, :func:`~.base.capped`) share.
    """
    nodes = list(exchange.accepted)
    points = [reply_points(exchange.accepted[node]) for node in nodes]
    reference = None if start else strategy.far_reference
    for index, feature, ratio in reach_outliers(points, ratio=REACH_RATIO, reference=reference):
        node = nodes[index]
        reason = (f"its centroids reach {ratio:.3g} x as far from the federation's centre as "
                  f"the other clients' in feature {feature}")
        if strategy.trust_clients:
            log(WARNING, "%s: node %d: %s; kept (--trust-clients)", what, node, reason)
            continue
        log(WARNING, "%s: rejected node %d: %s (--trust-clients keeps it)", what, node, reason)
        exchange.rejected[node] = reason
        del exchange.accepted[node]
    strategy.check_quorum(exchange, what)
    if start:
        strategy.far_reference = reach_reference(
            [reply_points(summary) for summary in exchange.accepted.values()])


def pooled(summaries: list[ClientSummary]) -> tuple[np.ndarray, np.ndarray]:
    """All clients' centroids and counts, in an order that does not depend on the clients."""
    return pool_centroids([s.centroids for s in summaries], [s.counts for s in summaries])


def local_kmeans_init(strategy: ClusteringStrategy, federation: Federation
                      ) -> tuple[np.ndarray, Exchange[ClientSummary]]:
    """Weighted k-means over the centroids of the clients' local k-means."""
    exchange = local_kmeans_exchange(strategy, federation, strategy.k, "init (local k-means)")
    points, weights = pooled(strategy.weighed(exchange))
    if np.count_nonzero(weights) < strategy.k:
        raise RunFailed(
            f"the clients sent {np.count_nonzero(weights)} non-empty local centroids, "
            f"fewer than k = {strategy.k}"
        )
    result = kmeans(points, strategy.k, rng=strategy.rng, sample_weight=weights, n_init=SERVER_N_INIT,
                    max_iter=INIT_MAX_ITER, tol=INIT_TOL, chunk_size=strategy.chunk_size)
    log(INFO, "init (local k-means): weighted k-means over %d local centroids", points.shape[0])
    return np.asarray(result.centroids), exchange


def kfed_init(strategy: ClusteringStrategy, federation: Federation, k_prime: int
              ) -> tuple[np.ndarray, Exchange[ClientSummary]]:
    """k-FED: farthest-point seeding over the clients' local centres, then one Lloyd round."""
    exchange = local_kmeans_exchange(strategy, federation, k_prime, f"k-FED (local k' = {k_prime})")
    return kfed_from_replies(strategy, exchange), exchange


def kfed_from_replies(strategy: ClusteringStrategy, exchange: Exchange[ClientSummary]) -> np.ndarray:
    """k-FED's central step over the accepted replies, sorted by their content.

    A client that withheld every local cluster (below the privacy floor) sent
    no centre; it neither starts the traversal nor takes part in it.

    Raises
    ------
    RunFailed
        The clients sent fewer than ``k`` distinct centres (none at all when
        every client withheld every cluster).
    """
    try:
        return kfed_centres([s.centroids for s in exchange.in_content_order() if len(s.centroids)],
                            strategy.k, rng=strategy.rng)
    except ValueError as exc:
        raise RunFailed(str(exc)) from None


def keep_common_dimension(exchange: Exchange[ClientSummary], dim_of, what: str = "init") -> None:
    """Reject replies whose dimension differs from the most common one.

    The caller's :meth:`~.base.ClusteringStrategy.exchange` has made sure
    that some replies were accepted.
    """
    dims = Counter(dim_of(s) for s in exchange.accepted.values())
    common = dims.most_common(1)[0][0]
    for node, summary in list(exchange.accepted.items()):
        if dim_of(summary) != common:
            reason = f"dimension {dim_of(summary)} differs from the other clients' {common}"
            log(WARNING, "%s: rejected node %d: %s", what, node, reason)
            exchange.rejected[node] = reason
            del exchange.accepted[node]
