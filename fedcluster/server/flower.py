"""The Flower federation: fedcluster's requests as Flower messages over a ``Grid``.

What simulations and deployments use. :class:`FlowerFederation` encodes each
request (:mod:`fedcluster.protocol`), pushes it to the nodes through the grid,
pulls the replies and decodes them into :class:`~fedcluster.federation.Answer`
values; :class:`FlowerStrategy` is the Flower ``Strategy`` face of any
fedcluster strategy. This module is the only one of fedcluster's server side
that talks to Flower.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from logging import WARNING

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy

from ..federation.base import Answer
from ..logs import log
from ..messages import ProtocolError, Request
from ..protocol import decode_reply, make_request, reply_sampling_key
from ..results import RunResult
from ..strategies import ClusteringStrategy, RoundBasedStrategy


class FlowerFederation:
    """The clients a Flower ``Grid`` reaches (see :class:`~fedcluster.federation.Federation`).

    Replies are pulled through a :class:`PromptGrid`. An error reply names
    the SuperLink as its source when a node died, so replies are matched to
    nodes through ``reply_to_message_id``, not ``src_node_id``.
    """

    def __init__(self, grid: Grid) -> None:
        self.grid = grid if isinstance(grid, PromptGrid) else PromptGrid(grid)

    def node_ids(self) -> list[int]:
        """The connected node ids, sorted."""
        return sorted(self.grid.get_node_ids())

    def ask(self, request: Request | Mapping[int, Request], node_ids: Sequence[int],
            timeout: float) -> list[Answer]:
        """Push one message per node (a mapping gives each node its own), pull the replies, decode each."""
        messages = [make_request(request[node] if isinstance(request, Mapping) else request, node)
                    for node in node_ids]
        replies = self.grid.send_and_receive(messages, timeout=timeout)
        # Pushing gave each message its id.
        by_message = {m.metadata.message_id: m.metadata.dst_node_id for m in messages}
        answers = []
        for reply in replies:
            node = by_message.get(reply.metadata.reply_to_message_id)
            if node is None:
                log(WARNING, "ignored a reply to no request of this round from node %s",
                    reply.metadata.src_node_id)
                continue
            answers.append(_answer(node, reply))
        return answers


def _answer(node: int, reply: Message) -> Answer:
    if reply.has_error():
        # An error the SuperLink made in the node's place (Node Unavailable) comes from its own id.
        return Answer(node, error=f"error reply (code {reply.error.code}): {reply.error.reason}",
                      unreachable=reply.metadata.src_node_id != node)
    key = reply_sampling_key(reply.content)
    try:
        return Answer(node, summary=decode_reply(reply.content), sampling_key=key)
    except ProtocolError as exc:
        return Answer(node, error=f"malformed reply: {exc}", sampling_key=key)


class PromptGrid(Grid):
    """Flower's grid, with a shorter wait between two pulls of replies.

    Flower 1.39's deployment grid sleeps 3 s between pulls in
    ``send_and_receive`` (its simulation grid 0.1 s), so the server learns of
    the last reply up to 3 s late in every round. This grid pushes the same
    messages and pulls at once, then after pauses that start at
    `first_pause` and double up to `longest_pause` while nothing new comes
    (back to `first_pause` when a reply comes): at most ``1 / longest_pause``
    pull requests a second to the SuperLink, about what one more SuperNode
    costs it. A pull that itself takes long (10,000 replies awaited in a
    simulation) is followed by a pause of at least four times its length. It
    stops when every pushed message has its reply or `timeout` has passed,
    like Flower's. Everything else is the wrapped grid's.
    """

    def __init__(self, grid: Grid, *, first_pause: float = 0.01, longest_pause: float = 0.25
                 ) -> None:
        self.grid = grid
        self.first_pause = first_pause
        self.longest_pause = longest_pause

    def set_run(self, run) -> None:
        self.grid.set_run(run)

    @property
    def run(self):
        return self.grid.run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int,
                       group_id: str, ttl: float | None = None) -> Message:
        return self.grid.create_message(content, message_type, dst_node_id, group_id, ttl)

    def get_node_ids(self) -> Iterable[int]:
        return self.grid.get_node_ids()

    def get_nodes(self):
        return self.grid.get_nodes()

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        return self.grid.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return self.grid.pull_messages(message_ids)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None
                         ) -> Iterable[Message]:
        """Push `messages`, then pull their replies until all came or `timeout` passed."""
        # A message the SuperLink refused has no id (None) and gets no reply.
        waiting = {i for i in self.grid.push_messages(messages) if i}
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = self.first_pause
        replies: list[Message] = []
        while waiting:
            started = time.monotonic()
            pulled = list(self.grid.pull_messages(list(waiting)))
            replies.extend(pulled)
            waiting -= {m.metadata.reply_to_message_id for m in pulled}
            pause = self.first_pause if pulled else min(2 * pause, self.longest_pause)
            # A pull checks every waiting message under the link state's lock (a
            # simulation's clients wait on it too): at most a fifth of the time pulling.
            pause = max(pause, 4 * (time.monotonic() - started))
            left = math.inf if deadline is None else deadline - time.monotonic()
            if not waiting or left <= 0:
                break
            time.sleep(min(pause, left))
        return replies


class FlowerStrategy(Strategy):
    """The Flower ``Strategy`` face of a fedcluster strategy.

    :meth:`start` runs the strategy's restarts over a
    :class:`FlowerFederation` and returns Flower's :class:`Result`. A
    fedcluster method drives its own requests (initialisation, rounds, the
    final score; see :mod:`fedcluster.strategies`), so Flower's per-round hooks
    are not the way it runs: calling them raises ``NotImplementedError``
    naming :meth:`start`.

    Parameters
    ----------
    strategy : ClusteringStrategy
        The method's server side (``fedcluster.config.build_strategy(config)``).
    """

    def __init__(self, strategy: ClusteringStrategy) -> None:
        self.strategy = strategy

    def summary(self) -> None:
        """Log the method and its settings."""
        self.strategy.summary()

    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord | None = None,
        num_rounds: int | None = None,
        timeout: float | None = None,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn=None,
    ) -> Result:
        """Run the strategy over ``grid``; return the centroids, per-round and final metrics.

        ``initial_arrays["centroids"]`` replaces the method's initialisation
        and ``num_rounds`` its round limit (round-based methods); ``timeout``
        overrides the round timeout. Train metrics are keyed by round counted
        over all restarts.

        Raises
        ------
        ValueError
            ``train_config``, ``evaluate_config`` or ``evaluate_fn`` given: a
            method's requests carry its own settings and it scores on the
            clients, so none of them would be used.
        """
        unused = [name for name, value in (("train_config", train_config),
                                           ("evaluate_config", evaluate_config),
                                           ("evaluate_fn", evaluate_fn)) if value is not None]
        if unused:
            raise ValueError(f"fedcluster strategies take no {', '.join(unused)}: a method's "
                             "requests carry its own settings and it is scored on the clients")
        strategy = self.strategy
        if timeout is not None:
            strategy.override(round_timeout=timeout)
        if isinstance(strategy, RoundBasedStrategy):
            if initial_arrays is not None and "centroids" in initial_arrays:
                strategy.explicit_start = initial_arrays["centroids"].numpy()
            if num_rounds is not None:
                strategy.override(num_server_rounds=num_rounds)
        return to_result(strategy.fit(FlowerFederation(grid)))

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """Not used: see the class docstring."""
        raise NotImplementedError(_OWN_LOOP)

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        """Not used: see the class docstring."""
        raise NotImplementedError(_OWN_LOOP)

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        """Not used: see the class docstring."""
        raise NotImplementedError(_OWN_LOOP)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]):
        """Not used: see the class docstring."""
        raise NotImplementedError(_OWN_LOOP)


_OWN_LOOP = "a fedcluster strategy runs its own requests: call FlowerStrategy.start(grid)"


def to_result(run: RunResult) -> Result:
    """Flower's :class:`Result` of a run: centroids, per-round movement and score, final score."""
    result = Result()
    result.arrays = ArrayRecord({"centroids": Array(np.ascontiguousarray(run.centroids))})
    for i, record in enumerate((r for r in run.history if r.phase == "train"), start=1):
        result.train_metrics_clientapp[i] = MetricRecord(
            {"movement": record.movement, "score": record.score,
             "clients-answered": record.clients_answered})
    result.evaluate_metrics_clientapp[len(result.train_metrics_clientapp)] = MetricRecord(
        {"score": run.score, "num-examples": run.n_points})
    return result
