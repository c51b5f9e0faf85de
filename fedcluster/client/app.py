"""The fedcluster ClientApp (Flower Message API).

Every request kind of :data:`fedcluster.client.respond.STEPS` is registered;
one handler decodes the request, loads the node's rows (:mod:`.data`) and
answers with :func:`~fedcluster.client.respond.respond`, which runs the step
and checks the reply against the privacy floor. A bad request or bad local
data is answered with an error reply whose reason names the problem; the
server logs it and goes on with the other clients.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flwr.app import ConfigRecord, Context, Error, Message
from flwr.clientapp import ClientApp

from ..protocol import make_reply, read_request
from .data import PARTITION_ID_KEY, local_data
from ..privacy.kinds import DIMENSION
from .respond import SECAGG_STAGES, STEPS, failure, respond

#: The node state's record that keeps a client's secure-aggregation state between stages.
SESSION_KEY = "fedcluster-session"


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

    def handler(msg: Message, context: Context) -> Message:
        try:
            request = read_request(msg)
            device = str(request.config.get("device", "auto"))
            X = local_data(context.node_config, {**bound, **context.run_config}, device)
            session = dict(context.state.config_records.get(SESSION_KEY, {}))
            summary = respond(X, request, context.node_config, session, msg.metadata.dst_node_id)
            if session:
                context.state.config_records[SESSION_KEY] = ConfigRecord(session)
            return make_reply(msg, summary, sampling_key=_sampling_key(context.node_config))
        except Exception as exc:  # noqa: BLE001 - the server must hear of every failure
            code, reason = failure(msg.metadata.message_type, exc)
            return Message(Error(code=code, reason=reason), reply_to=msg)

    registrars = {"train": app.train, "evaluate": app.evaluate, "query": app.query}
    for kind in (*STEPS, *SECAGG_STAGES, DIMENSION):
        category, _, action = kind.partition(".")
        register = registrars[category]
        (register(action) if action else register())(handler)
    return app


app = build_client_app()
