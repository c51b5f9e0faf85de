"""The fedcluster ClientApp (Flower Message API).

:data:`HANDLERS` routes each message type to the function that computes the
reply: the core steps (``train``: local Lloyd steps; ``evaluate``: counts and
squared distances for the final score; ``query.bounds`` and
``query.local_kmeans``: initialisation without sending any raw point) and the
steps of the other methods. A bad request or bad local data is answered with
an error reply whose reason names the problem; the server logs it and goes on
with the other clients. Every reply is checked against the privacy floor
(:mod:`.privacy`) before it leaves: one that would reveal a cluster of fewer
than ``min-cluster-size`` rows, or a row itself, becomes an error reply.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from importlib import import_module
from logging import ERROR
from typing import Any

from flwr.app import Context, Error, Message
from flwr.clientapp import ClientApp
from flwr.common.logger import log

from .. import protocol
from ..data import DataError
from ..protocol import ClientSummary, ProtocolError, make_reply, read_request
from .data import PARTITION_ID_KEY, local_data
from .privacy import MIN_CLUSTER_SIZE_KEY, check_reply, floor_of

#: Error code of a reply that reports bad input (request or local data).
BAD_INPUT = 400
#: Error code of a reply that reports an unexpected failure on the client.
CLIENT_FAILURE = 500

#: Message type -> "module:function" computing the reply (imported on first use).
HANDLERS: dict[str, str] = {
    protocol.LLOYD: "fedcluster.client.steps:lloyd_request",
    protocol.EVALUATE: "fedcluster.client.steps:evaluate_request",
    protocol.BOUNDS: "fedcluster.client.steps:bounds_request",
    protocol.LOCAL_KMEANS: "fedcluster.client.steps:local_kmeans_request",
    protocol.GARST_INIT: "fedcluster.client.garst:init_request",
    protocol.GARST: "fedcluster.client.garst:round_request",
    protocol.FUZZY: "fedcluster.client.fuzzy:round_request",
    protocol.FECA: "fedcluster.client.feca:feca_request",
    protocol.MINIBATCH: "fedcluster.client.minibatch:round_request",
}

Step = Callable[[Any, Any, dict], ClientSummary]


@cache
def _resolve(target: str) -> Step:
    module, _, name = target.partition(":")
    return getattr(import_module(module), name)


def _sampling_key(node_config: Mapping[str, Any]) -> int | None:
    """The node's partition id, where it has one (every simulated client does)."""
    key = node_config.get(PARTITION_ID_KEY)
    return int(key) if isinstance(key, int) and not isinstance(key, bool) else None


def build_client_app(defaults: Mapping[str, Any] | None = None,
                     mods: Sequence[Callable] = ()) -> ClientApp:
    """Create the ClientApp.

    Parameters
    ----------
    defaults : mapping, optional
        Data settings (``partitions-dir``, ``dataset``, ``split``, ``seed``) used
        where the run config lacks them; ``flwr.simulation.run_simulation`` passes
        no run config, so the command line binds its settings here.
    mods : sequence of callables
        Flower client mods wrapped around every handler (for example one that
        records every outgoing message, as the privacy tests do).
    """
    bound = dict(defaults or {})
    app = ClientApp(mods=list(mods))

    def serve(target: str) -> Callable[[Message, Context], Message]:
        def handler(msg: Message, context: Context) -> Message:
            try:
                config, centroids = read_request(msg)
                p = floor_of(config, context.node_config)
                device = str(config.get("device", "auto"))
                X = local_data(context.node_config, {**bound, **context.run_config}, device)
                if centroids is not None and X.shape[1] != centroids.shape[1]:
                    raise DataError(
                        f"client data has dimension {X.shape[1]}, the global model {centroids.shape[1]}"
                    )
                summary = _resolve(target)(X, centroids, {**config, MIN_CLUSTER_SIZE_KEY: p})
                check_reply(X, summary, p, centroids)
                return make_reply(msg, summary, sampling_key=_sampling_key(context.node_config))
            except (ProtocolError, DataError) as exc:
                log(ERROR, "Rejected %s request: %s", msg.metadata.message_type, exc)
                return Message(Error(code=BAD_INPUT, reason=str(exc)), reply_to=msg)
            except Exception as exc:  # noqa: BLE001 - the server must hear of every failure
                log(ERROR, "Failed %s request:\n%s", msg.metadata.message_type, traceback.format_exc())
                reason = f"{type(exc).__name__}: {exc}"
                return Message(Error(code=CLIENT_FAILURE, reason=reason), reply_to=msg)

        return handler

    registrars = {"train": app.train, "evaluate": app.evaluate, "query": app.query}
    for message_type, target in HANDLERS.items():
        category, _, action = message_type.partition(".")
        register = registrars[category]
        (register(action) if action else register())(serve(target))
    return app


app = build_client_app()
