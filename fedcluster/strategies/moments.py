"""The moments of the pooled rows, asked of every connected client (Flower-free).

One moments request (:data:`~fedcluster.messages.MOMENTS`): each client
answers its row count and the per-feature mean and population standard
deviation of its rows (:func:`fedcluster.local.summaries.moments_request`),
and the server combines the replies with Chan et al.'s pairwise formula
(:func:`fedcluster.numerics.moments.combine_moments`). Federated
standardisation (:mod:`fedcluster.preprocessing`) and the relative stopping
rule (``tol-scale = variance``, :class:`~.rounds.RoundBasedStrategy`) both
ask it. Neither DP nor secure aggregation lets it go out: a client under DP
refuses it, and the options refuse both uses with either.
"""

from __future__ import annotations

from logging import WARNING
from typing import TYPE_CHECKING

from ..federation.base import Federation
from ..logs import log
from ..messages import MOMENTS, ProtocolError, validate_reply
from ..numerics.moments import Moments, combine_moments

if TYPE_CHECKING:
    from .base import ClusteringStrategy


def pooled_moments(strategy: ClusteringStrategy, federation: Federation, what: str
                   ) -> tuple[Moments, int]:
    """The moments of every connected client's rows pooled, and how many clients gave them.

    The request goes through ``strategy``'s exchange, so its replies are
    matched, checked (:func:`~fedcluster.messages.validate_reply`: a
    positive whole count, finite means and non-negative standard deviations
    within the protocol's magnitude bound), logged (as ``what``) when
    rejected and held to the quorum as every other request of the run; the
    count each client declares here is the one its later replies must
    declare. The dimension is the one most replies have (the smallest on a
    tie); a reply of another dimension is rejected by name. Replies are
    combined in content order, so the moments do not depend on node ids or
    arrival order.

    Raises
    ------
    RunFailed
        Fewer clients than the quorum answered usably.
    """
    nodes = strategy.wait_for_nodes(federation)
    exchange = strategy.exchange(
        federation, MOMENTS, nodes, {"device": strategy.device},
        lambda s: validate_reply(s, expect=("mean", "std")), what=what)
    dims = [len(s.mean) for s in exchange.accepted.values()]
    dim = max(sorted(set(dims)), key=dims.count)
    for node, summary in list(exchange.accepted.items()):
        try:
            validate_reply(summary, dim=dim, expect=("mean", "std"))
        except ProtocolError as exc:
            del exchange.accepted[node]
            exchange.rejected[node] = f"malformed reply: {exc}"
            log(WARNING, "%s: rejected node %d: %s", what, node, exchange.rejected[node])
    strategy.check_quorum(exchange, what)
    parts = [Moments(s.n, s.mean, s.std) for s in exchange.in_content_order()]
    return combine_moments(parts), len(exchange.accepted)
