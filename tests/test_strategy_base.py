"""Shared strategy plumbing: bounded waiting for clients and seeded sampling."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import messages

from fedcluster.client.memory import InMemoryFederation
from fedcluster.methods.dwf.strategy import WeightedFederatedKMeans
from fedcluster.strategies import ClusteringStrategy, RunFailed
from harness.inprocess import flower_like_node_ids


class ChangingFederation(InMemoryFederation):
    """Clients that connect one by one (as SuperNodes to a SuperLink), and may leave.

    With ``one_by_one``, the n-th call of :meth:`node_ids` lists the first n
    clients; a client in :attr:`gone` has disconnected and is not listed.
    """

    def __init__(self, parts, *, one_by_one: bool = False) -> None:
        super().__init__(parts)
        self.one_by_one = one_by_one
        self.calls = 0
        self.gone: set[int] = set()

    def node_ids(self) -> list[int]:
        self.calls += 1
        nodes = [n for n in super().node_ids() if n not in self.gone]
        return nodes[: self.calls] if self.one_by_one else nodes


class ListedNodes:
    """A federation that only lists node ids (sampling and waiting ask nothing)."""

    def __init__(self, node_ids) -> None:
        self.ids = list(node_ids)

    def node_ids(self) -> list[int]:
        return list(self.ids)

    def ask(self, request, node_ids, timeout):
        raise AssertionError("no request expected")


def federation_of(n, **kwargs) -> ChangingFederation:
    rng = np.random.default_rng(0)
    return ChangingFederation([rng.normal(size=(20, 2)) for _ in range(n)], **kwargs)


def plumbing(**kwargs) -> ClusteringStrategy:
    return WeightedFederatedKMeans(2, **kwargs)


def test_waits_for_min_nodes_then_never_again(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    federation = federation_of(3, one_by_one=True)
    strategy = plumbing(min_nodes=3)
    assert strategy.wait_for_nodes(federation) == [0, 1, 2]
    assert federation.calls == 3


def test_goes_on_with_fewer_nodes_after_the_timeout(flwr_log):
    federation = federation_of(2)
    assert plumbing(min_nodes=5, node_wait_timeout=0.01).wait_for_nodes(federation) == [0, 1]
    assert "Only 2 of 5 clients connected; going on" in messages(flwr_log)


def test_no_client_at_all_is_an_error():
    with pytest.raises(RunFailed, match="no client connected within 0.01 s"):
        plumbing(node_wait_timeout=0.01).connected_nodes(ListedNodes([]))


def test_a_lost_client_does_not_make_later_rounds_wait():
    federation = federation_of(3)
    strategy = plumbing(min_nodes=3, node_wait_timeout=60)
    strategy.wait_for_nodes(federation)
    first, lost, third = federation.node_ids()
    federation.gone.add(lost)
    assert strategy.connected_nodes(federation) == sorted([first, third])


@pytest.mark.parametrize(("participation", "expected"), [(1.0, 10), (0.3, 3), (0.05, 1), (0.25, 3)])
def test_fraction_of_clients_rounds_up_and_keeps_one(participation, expected):
    federation = federation_of(10)
    sample = plumbing(participation=participation).sample_nodes(federation, np.random.default_rng(0))
    assert len(sample) == expected == len(set(sample))


def test_sampling_is_seeded_and_sorted():
    federation = federation_of(10)
    strategy = plumbing(clients_per_round=4)
    a = [strategy.sample_nodes(federation, np.random.default_rng(7)) for _ in range(2)]
    assert a[0] == a[1] == sorted(a[0]) and len(a[0]) == 4
    assert strategy.sample_nodes(federation, np.random.default_rng(8)) != a[0]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"participation": 0.0}, "'participation': 0.0 .*allowed: number > 0.0 and <= 1.0"),
    ({"clients_per_round": -1}, "'clients-per-round': -1 .*allowed: integer >= 0"),
])
def test_bad_sampling_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plumbing(**kwargs)


def test_sampling_keeps_flower_node_ids_exact():
    # Flower's node ids are uint64 values above 2**53: a draw through float64
    # would give ids that no node has (the bug that made partial participation train nothing).
    node_ids = flower_like_node_ids(10, seed=0)
    assert max(node_ids) > 2**53
    federation = ListedNodes(node_ids)
    draws = [plumbing(participation=0.5).sample_nodes(federation, np.random.default_rng(seed))
             for seed in (7, 7, 8)]
    assert all(set(draw) <= set(node_ids) and len(draw) == 5 for draw in draws)
    assert draws[0] == draws[1] != draws[2]


def test_the_log_lists_only_the_settings_that_differ_from_the_defaults(flwr_log):
    """A deployment's log (what `fedcluster submit` streams) names the settings once, briefly."""
    WeightedFederatedKMeans(k=4, lr=0.5, n_init=1).summary()
    lines = messages(flwr_log).splitlines()
    assert lines[0].startswith("WeightedFederatedKMeans (dwf), k=4")
    assert lines[1:] == ["\tk = 4", "\tlr = 0.5"]
