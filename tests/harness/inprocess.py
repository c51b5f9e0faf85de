"""An in-memory Flower ``Grid`` that calls ClientApps directly (tests only).

Real Flower messages reach a real ClientApp, but a message is a function call:
a run takes milliseconds instead of the seconds a Ray start costs. Tests use it
where Flower's side matters (the ClientApp's error replies, client mods, replies
malformed on the wire), as ``FlowerFederation(InProcessGrid(app, node_configs))``;
everywhere else :class:`fedcluster.client.memory.InMemoryFederation` needs no
message at all. A client that raises, or one marked ``unreachable``, behaves as
it would in a deployment (an error reply, or no reply at all).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.server.superlink.linkstate.utils import create_message_error_unavailable_res_message
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity
from flwr.serverapp import Grid

from fedcluster.client.app import build_client_app
from fedcluster.config import RunConfig, build_strategy
from fedcluster.results import RunResult
from fedcluster.server.flower import FlowerFederation

#: Error code Flower gives the reply of a ClientApp that raised.
CLIENT_APP_RAISED = 2
#: Node id of the server side, as Flower numbers the SuperLink.
SERVER_NODE_ID = 1


def flower_like_node_ids(count: int, seed: int) -> list[int]:
    """``count`` distinct node ids drawn like a SuperLink's: uniform over the non-zero uint64."""
    rng = np.random.default_rng(seed)
    ids: list[int] = []
    while len(ids) < count:
        node = int(rng.integers(1, 2**64, dtype=np.uint64, endpoint=False))
        if node not in ids:
            ids.append(node)
    return ids


class InProcessGrid(Grid):
    """Deliver messages to ClientApps in this process.

    Parameters
    ----------
    client_app : ClientApp
        The app every node runs.
    node_configs : sequence of mapping
        One ``node_config`` per node (for example ``{"data-path": ...}`` or
        ``{"partition-id": i, "num-partitions": n}``).
    run_config : mapping, optional
        The run config every client sees.
    seed : int
        Seed of the node ids, which are drawn as Flower draws them (random
        uint64 values), so that code which mishandles real ids fails here too;
        :attr:`node_ids` lists them in the order of ``node_configs``.
    node_ids : sequence of int, optional
        The nodes' ids instead, in the order of ``node_configs``: those a
        deployment's SuperNodes were given, so that a run here orders its
        clients (by id) as the deployment did.
    """

    def __init__(
        self,
        client_app: ClientApp,
        node_configs: Sequence[Mapping[str, Any]],
        run_config: Mapping[str, Any] | None = None,
        *,
        seed: int = 0,
        node_ids: Sequence[int] | None = None,
    ) -> None:
        self.client_app = client_app
        self._run = Run.create_empty(run_id=1)
        # Messages take their run and source ids from the process's task identity,
        # which Flower's runtimes set before a ServerApp runs; this grid is that runtime.
        TaskIdentity.task_id = 1
        TaskIdentity.run_id = self._run.run_id
        TaskIdentity.node_id = SERVER_NODE_ID
        if node_ids is not None and len(set(node_ids)) != len(node_configs):
            raise ValueError(f"{len(node_configs)} nodes need as many distinct ids: {node_ids}")
        self.node_ids = list(node_ids) if node_ids is not None \
            else flower_like_node_ids(len(node_configs), seed)
        self._contexts = {
            node: Context(run_id=1, node_id=node, node_config=dict(cfg), state=RecordDict(),
                          run_config=dict(run_config or {}))
            for node, cfg in zip(self.node_ids, node_configs)
        }
        self.unreachable: set[int] = set()
        #: Node -> how many more of its messages the SuperLink answers in its place with
        #: Flower's Node Unavailable error (its heartbeat lapsed; it is still listed).
        self.heartbeat_lost: dict[int, int] = {}
        self._replies: dict[str, Message] = {}

    def set_run(self, run: Run) -> None:
        """Set the run (its id is only carried along)."""
        self._run = run

    @property
    def run(self) -> Run:
        """The run this grid serves."""
        return self._run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int,
                       group_id: str, ttl: float | None = None) -> Message:
        """Create a message (Flower's deprecated helper, kept for the interface)."""
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        """Ids of all nodes, reachable or not (as a SuperLink would still list them)."""
        return list(self._contexts)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        """Run each message's ClientApp call now and keep the reply for pulling."""
        ids = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = uuid.uuid4().hex
            ids.append(msg.metadata.message_id)
            node = msg.metadata.dst_node_id
            if node not in self._contexts:
                raise ValueError(f"no node with id {node}")
            if node in self.unreachable:
                continue
            if self.heartbeat_lost.get(node, 0) > 0:
                self.heartbeat_lost[node] -= 1
                self._replies[msg.metadata.message_id] = \
                    create_message_error_unavailable_res_message(msg.metadata, "node_unavail")
                continue
            try:
                reply = self.client_app(msg, self._contexts[node])
            except Exception as exc:  # noqa: BLE001 - a deployment turns this into an error reply
                reply = Message(Error(code=CLIENT_APP_RAISED, reason=f"{type(exc).__name__}: {exc}"),
                                reply_to=msg)
            self._replies[msg.metadata.message_id] = reply
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        """Return (and forget) the replies to ``message_ids`` that exist."""
        return [self._replies.pop(i) for i in message_ids if i in self._replies]

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None
                         ) -> Iterable[Message]:
        """Push and pull at once: every reachable client answers immediately."""
        return self.pull_messages(self.push_messages(messages))


def run_on_files(settings: Mapping[str, Any], data_paths: Iterable,
                 node_ids: Sequence[int] | None = None) -> RunResult:
    """The run of ``settings`` through the real ClientApp in this process, one node per data file.

    It gives the model of Flower's simulation of the same files
    (tests/test_inprocess_equals_simulation.py), and so of a deployment of them
    (tests/test_deployment.py::test_deployment_equals_simulation), in a second
    instead of a Ray start or a deployment's rounds: the reference that tests of
    deployments compare with. Other node ids order the clients' sums otherwise
    (equal to about 1e-9 on S1); with ``node_ids``, a deployment's SuperNodes'
    ids in the order of ``data_paths``, it is the deployment's run bit for bit.
    """
    grid = InProcessGrid(build_client_app(), [{"data-path": str(path)} for path in data_paths],
                         node_ids=node_ids)
    return build_strategy(RunConfig.from_mapping(settings)).fit(FlowerFederation(grid))
