"""The ServerApp's grid pulls replies promptly, boundedly, and within the round timeout."""

import time
from types import SimpleNamespace

import pytest

from fedcluster.federation.flower import PromptGrid


class ScriptedGrid:
    """A grid whose reply to message ``i`` appears ``delays[i]`` seconds after the push."""

    def __init__(self, delays, refused=()):
        self.delays = delays
        self.refused = set(refused)
        self.pulls = 0
        self.pushed_at = None
        self.run = "the run"

    def push_messages(self, messages):
        self.pushed_at = time.monotonic()
        return [None if i in self.refused else str(i) for i, _ in enumerate(messages)]

    def pull_messages(self, message_ids):
        self.pulls += 1
        now = time.monotonic() - self.pushed_at
        ready = [i for i in message_ids if self.delays[int(i)] <= now]
        self.delays = {**self.delays, **{int(i): float("inf") for i in ready}}  # pulled once
        return [SimpleNamespace(metadata=SimpleNamespace(reply_to_message_id=i)) for i in ready]

    def get_node_ids(self):
        return [100, 101]


def ids(replies):
    return sorted(r.metadata.reply_to_message_id for r in replies)


def test_returns_as_soon_as_the_last_reply_is_there():
    scripted = ScriptedGrid({0: 0.0, 1: 0.05, 2: 0.3})
    started = time.monotonic()
    replies = PromptGrid(scripted).send_and_receive([None] * 3, timeout=30)
    elapsed = time.monotonic() - started
    assert ids(replies) == ["0", "1", "2"]
    # Flower's deployment grid would notice the last reply only after its 3 s sleep.
    assert 0.3 <= elapsed < 1.5  # generous: the machine may be busy


def test_stops_at_the_timeout_with_what_came():
    scripted = ScriptedGrid({0: 0.0, 1: 10.0})
    started = time.monotonic()
    replies = PromptGrid(scripted).send_and_receive([None] * 2, timeout=0.5)
    assert ids(replies) == ["0"]
    assert 0.5 <= time.monotonic() - started < 1.5


def test_pull_rate_is_bounded():
    """While nothing comes, pauses double up to the longest: a few pulls a second."""
    scripted = ScriptedGrid({0: 2.0})
    PromptGrid(scripted, first_pause=0.01, longest_pause=0.25).send_and_receive([None], timeout=5)
    # 0.01 + 0.02 + ... + 0.16 = 0.31 s in 5 pulls, then one pull every 0.25 s.
    assert scripted.pulls <= 5 + (2.0 - 0.31) / 0.25 + 2


def test_refused_messages_are_not_waited_for():
    scripted = ScriptedGrid({0: 0.0, 1: 0.0}, refused={1})
    started = time.monotonic()
    assert ids(PromptGrid(scripted).send_and_receive([None] * 2, timeout=30)) == ["0"]
    assert time.monotonic() - started < 1.0


def test_everything_else_is_the_wrapped_grid():
    scripted = ScriptedGrid({})
    grid = PromptGrid(scripted)
    assert grid.run == "the run"
    assert list(grid.get_node_ids()) == [100, 101]
    assert grid.send_and_receive([], timeout=1) == []


@pytest.mark.parametrize("timeout", [0.0, -1.0])
def test_a_spent_timeout_pulls_once(timeout):
    scripted = ScriptedGrid({0: 0.0, 1: 5.0})
    assert ids(PromptGrid(scripted).send_and_receive([None] * 2, timeout=timeout)) == ["0"]
    assert scripted.pulls == 1
