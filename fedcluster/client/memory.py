"""The in-memory federation: each client is an array in this process.

What the library (:class:`fedcluster.FederatedKMeans`), the benchmark runner
and most tests use. A request is a function call: each client answers with
:func:`fedcluster.client.respond.respond`, as a Flower client does, but no
message is built and no file is written. With full participation a run over
this federation gives bit for bit the result of the same run over Flower:
both deliver the same summaries, the strategy checks them with the same
:func:`~fedcluster.messages.validate_reply`, and it combines them in an order
that does not depend on node ids.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..data import validate_points
from ..federation.base import Answer
from ..messages import ClientSummary, Request
from ..numerics import get_namespace
from .respond import failure, respond

Responder = Callable[[Any, Request, Mapping[str, Any]], ClientSummary]


class InMemoryFederation:
    """Clients that are arrays (see :class:`~fedcluster.federation.Federation`).

    Parameters
    ----------
    parts : sequence of array_like
        One ``(n_i, d)`` array per client; each is checked once, here
        (:func:`~fedcluster.data.validate_points`), and an invalid one raises
        :class:`~fedcluster.data.DataError` naming the client.
    node_configs : sequence of mapping, optional
        One per client, what a SuperNode's ``node_config`` would hold (its own
        ``min-cluster-size``, say).
    responders : mapping, optional
        Client index -> the function that answers in its place (a test's
        careless or hostile client); the others :func:`respond`.

    Node ids are the clients' positions in ``parts`` (and so are their
    sampling keys); :attr:`unreachable` holds the clients that do not answer.
    """

    def __init__(self, parts: Sequence[Any], *, node_configs: Sequence[Mapping[str, Any]] | None = None,
                 responders: Mapping[int, Responder] | None = None) -> None:
        self.parts = [validate_points(X, source=f"client {i}") for i, X in enumerate(parts)]
        if not self.parts:
            raise ValueError("a federation needs at least one client")
        self.node_configs = [dict(c) for c in node_configs] if node_configs is not None \
            else [{} for _ in self.parts]
        if len(self.node_configs) != len(self.parts):
            raise ValueError(f"{len(self.node_configs)} node configs for {len(self.parts)} clients")
        self.responders = dict(responders or {})
        self.unreachable: set[int] = set()
        #: Each client's state between the stages of secure aggregation (a ClientApp's
        #: ``context.state``).
        self.sessions: dict[int, dict[str, Any]] = {i: {} for i in range(len(self.parts))}
        self._on_device: dict[tuple[int, str], Any] = {}

    def node_ids(self) -> list[int]:
        """Every client's id, reachable or not (as a SuperLink would still list it)."""
        return list(range(len(self.parts)))

    def ask(self, request: Request | Mapping[int, Request], node_ids: Sequence[int],
            timeout: float) -> list[Answer]:
        """Each reachable client's answer, computed now (``timeout`` does not apply)."""
        answers = []
        for node in node_ids:
            if node in self.unreachable:
                continue
            own = request[node] if isinstance(request, Mapping) else request
            device = str(own.config.get("device", "auto"))
            try:
                if node in self.responders:
                    summary = self.responders[node](self._rows(node, device), own,
                                                    self.node_configs[node])
                else:
                    summary = respond(self._rows(node, device), own, self.node_configs[node],
                                      self.sessions[node], node)
            except Exception as exc:  # noqa: BLE001 - the server must hear of every failure
                code, reason = failure(own.kind, exc)
                answers.append(Answer(node, error=f"error reply (code {code}): {reason}"))
                continue
            answers.append(Answer(node, summary=summary, sampling_key=node))
        return answers

    def _rows(self, node: int, device: str):
        xp = get_namespace(device)
        key = (node, xp.__name__)
        if key not in self._on_device:
            self._on_device[key] = xp.asarray(self.parts[node])
        return self._on_device[key]
