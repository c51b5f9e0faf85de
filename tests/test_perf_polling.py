"""The ServerApp's grid pulls replies promptly, boundedly, and within the round timeout.

The grid runs on a virtual clock (its ``time.monotonic`` and ``time.sleep``
replaced), so the tests check when it pulls and when it returns in the
grid's own time, exactly, whatever the load of the machine. The seconds a
deployed round takes with this grid and with Flower's are figures of
``python benchmarks/perf.py polling``.
"""

from types import SimpleNamespace

import pytest

from fedcluster.server import flower
from fedcluster.server.flower import PromptGrid


class VirtualClock:
    """Time that passes only when the grid sleeps."""

    def __init__(self):
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    clock = VirtualClock()
    monkeypatch.setattr(flower, "time", SimpleNamespace(monotonic=clock.monotonic, sleep=clock.sleep))
    return clock


class ScriptedGrid:
    """A grid whose reply to message ``i`` appears ``delays[i]`` seconds (of ``clock``) after the push."""

    def __init__(self, clock, delays, refused=(), pull_seconds=0.0):
        self.clock = clock
        self.pull_seconds = pull_seconds
        self.delays = delays
        self.refused = set(refused)
        self.pulls = 0
        self.pushed_at = None
        self.run = "the run"

    def push_messages(self, messages):
        self.pushed_at = self.clock.monotonic()
        return [None if i in self.refused else str(i) for i, _ in enumerate(messages)]

    def pull_messages(self, message_ids):
        self.pulls += 1
        self.clock.now += self.pull_seconds
        now = self.clock.monotonic() - self.pushed_at
        ready = [i for i in message_ids if self.delays[int(i)] <= now]
        self.delays = {**self.delays, **{int(i): float("inf") for i in ready}}  # pulled once
        return [SimpleNamespace(metadata=SimpleNamespace(reply_to_message_id=i)) for i in ready]

    def get_node_ids(self):
        return [100, 101]


def ids(replies):
    return sorted(r.metadata.reply_to_message_id for r in replies)


def test_returns_as_soon_as_the_last_reply_is_there(clock):
    scripted = ScriptedGrid(clock, {0: 0.0, 1: 0.05, 2: 0.3})
    replies = PromptGrid(scripted, first_pause=0.01, longest_pause=0.25).send_and_receive(
        [None] * 3, timeout=30)
    assert ids(replies) == ["0", "1", "2"]
    # It returns at the first pull after 0.3 s, at most one longest pause (0.25 s) late:
    # Flower's deployment grid would notice the last reply only after its 3 s sleep.
    assert 0.3 <= clock.now <= 0.3 + 0.25
    assert max(clock.sleeps) <= 0.25


def test_stops_at_the_timeout_with_what_came(clock):
    scripted = ScriptedGrid(clock, {0: 0.0, 1: 10.0})
    replies = PromptGrid(scripted).send_and_receive([None] * 2, timeout=0.5)
    assert ids(replies) == ["0"]
    # The last pause is cut to the time left: it returns at the timeout, not a pause later.
    assert clock.now == pytest.approx(0.5, abs=1e-12)


def test_pull_rate_is_bounded(clock):
    """While nothing comes, pauses double up to the longest: a few pulls a second."""
    scripted = ScriptedGrid(clock, {0: 2.0})
    PromptGrid(scripted, first_pause=0.01, longest_pause=0.25).send_and_receive([None], timeout=5)
    # 0.01 + 0.02 + ... + 0.16 = 0.31 s in 5 pulls, then one pull every 0.25 s.
    assert scripted.pulls <= 5 + (2.0 - 0.31) / 0.25 + 2
    # Each empty pull doubles the pause, up to the longest, and no pause is longer.
    sleeps = clock.sleeps
    assert sleeps[0] <= 2 * 0.01 and all(b == min(2 * a, 0.25) for a, b in zip(sleeps, sleeps[1:]))


def test_a_long_pull_is_followed_by_a_longer_pause(clock):
    """A pull of 10,000 awaited replies holds a simulation's link state (and its clients) for a
    while: the grid pulls at most a fifth of its time, even while replies keep coming."""
    scripted = ScriptedGrid(clock, {i: 0.1 * i for i in range(40)}, pull_seconds=0.5)
    replies = PromptGrid(scripted, first_pause=0.01, longest_pause=0.25).send_and_receive(
        [None] * 40, timeout=60)
    assert len(replies) == 40
    assert clock.sleeps and min(clock.sleeps) >= 4 * 0.5
    assert scripted.pulls * 0.5 <= clock.now / 5 + 0.5


def test_refused_messages_are_not_waited_for(clock):
    scripted = ScriptedGrid(clock, {0: 0.0, 1: 0.0}, refused={1})
    assert ids(PromptGrid(scripted).send_and_receive([None] * 2, timeout=30)) == ["0"]
    # The one pull brought every reply it waits for: no sleep at all.
    assert scripted.pulls == 1 and clock.sleeps == []


def test_everything_else_is_the_wrapped_grid(clock):
    scripted = ScriptedGrid(clock, {})
    grid = PromptGrid(scripted)
    assert grid.run == "the run"
    assert list(grid.get_node_ids()) == [100, 101]
    assert grid.send_and_receive([], timeout=1) == []


@pytest.mark.parametrize("timeout", [0.0, -1.0])
def test_a_spent_timeout_pulls_once(clock, timeout):
    scripted = ScriptedGrid(clock, {0: 0.0, 1: 5.0})
    assert ids(PromptGrid(scripted).send_and_receive([None] * 2, timeout=timeout)) == ["0"]
    assert scripted.pulls == 1
