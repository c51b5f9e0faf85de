"""The federation an algorithm talks to: who is there, and what they answer.

A method's server side never touches a transport. It asks a
:class:`Federation` for the ids of the connected clients and sends it a
:class:`~fedcluster.messages.Request` for some of them; the federation returns
one :class:`Answer` per client that answered (a summary or the reason it could
not give one). Two federations exist: :class:`~.flower.FlowerFederation`
(Flower messages over a ``Grid``: simulations and deployments) and
:class:`~.memory.InMemoryFederation` (a list of arrays in this process: no
message, no file). The bookkeeping every method shares (matching answers to
the clients asked, checking them, the quorum) is the strategy's
(:meth:`fedcluster.strategies.ClusteringStrategy.exchange`), so it is the same
over both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from ..messages import SUMMARY_ARRAYS, ClientSummary, Request

T = TypeVar("T")


class RunFailed(RuntimeError):
    """The run cannot produce a model; the message says why in one line."""


@dataclass(frozen=True)
class Answer:
    """One client's answer to one request: a summary, or why there is none.

    Attributes
    ----------
    node : int
        The client's node id.
    summary : ClientSummary or None
        What it sent, unchecked (the strategy validates it).
    error : str or None
        Why it sent no summary (its error reply, or a reply that could not be
        decoded).
    sampling_key : int or None
        The stable position the client declared (a simulated client's
        partition id), by which the server orders its clients for sampling.
    unreachable : bool
        The error is the transport's, not the client's: the request did not
        reach it (Flower's SuperLink answers for a node that stopped sending
        heartbeats).
    """

    node: int
    summary: ClientSummary | None = None
    error: str | None = None
    sampling_key: int | None = None
    unreachable: bool = False


class Federation(Protocol):
    """What the server side of every method needs of the clients."""

    def node_ids(self) -> list[int]:
        """The ids of the clients connected now."""

    def ask(self, request: Request | Mapping[int, Request], node_ids: Sequence[int],
            timeout: float) -> list[Answer]:
        """Send ``request`` (or each node its own, from a mapping) to ``node_ids``; return the
        answers that came within ``timeout`` s."""


@dataclass
class Exchange(Generic[T]):
    """The outcome of one request sent to a set of clients.

    Attributes
    ----------
    sent : list of int
        Node ids the request went to.
    accepted : dict
        Checked replies, by node id (sorted by id).
    rejected : dict
        Reason for each rejected reply, by node id.
    """

    sent: list[int]
    accepted: dict[int, T] = field(default_factory=dict)
    rejected: dict[int, str] = field(default_factory=dict)

    @property
    def missing(self) -> list[int]:
        """Nodes that sent nothing before the timeout."""
        return [n for n in self.sent if n not in self.accepted and n not in self.rejected]

    def in_content_order(self) -> list[T]:
        """The accepted replies sorted by what they hold, not by who sent them.

        Node ids differ between a simulation, a deployment and an in-memory
        federation, and replies arrive in any order; a server computation over
        replies in this order gives the same floating-point result wherever it
        runs.
        """
        return [summary for _, summary in self.by_content()]

    def by_content(self) -> list[tuple[int, T]]:
        """(node, reply) pairs of the accepted replies, in :meth:`in_content_order`'s order."""
        return sorted(self.accepted.items(), key=lambda pair: _content_key(pair[1]))


def _content_key(summary: ClientSummary) -> tuple:
    arrays = (getattr(summary, name) for name in SUMMARY_ARRAYS)
    # A method's own arrays (ClientSummary.own) break the ties the shared ones leave.
    own = sorted((name, a.tobytes()) for name, a in (summary.own or {}).items())
    return (summary.n, *(b"" if a is None else a.tobytes() for a in arrays), *own)
