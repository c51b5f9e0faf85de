"""Shared strategy plumbing: bounded waiting for clients and seeded sampling."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import messages, save_parts
from fedcluster.client.app import build_client_app
from fedcluster.server.inprocess import InProcessGrid
from fedcluster.strategies import ClusteringStrategy, WeightedFederatedKMeans


class SlowStartGrid(InProcessGrid):
    """Nodes appear one by one, as SuperNodes connecting to a SuperLink."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0

    def get_node_ids(self):
        self.calls += 1
        return list(self._contexts)[: self.calls]


def grid_of(tmp_path, n, cls=InProcessGrid):
    rng = np.random.default_rng(0)
    parts = [rng.normal(size=(20, 2)) for _ in range(n)]
    return cls(build_client_app(), save_parts(tmp_path / "parts", parts))


def plumbing(**kwargs) -> ClusteringStrategy:
    return WeightedFederatedKMeans(2, **kwargs)


def test_waits_for_min_nodes_then_never_again(tmp_path, monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    grid = grid_of(tmp_path, 3, SlowStartGrid)
    strategy = plumbing(min_nodes=3)
    assert strategy.wait_for_nodes(grid) == sorted(grid.node_ids)
    assert grid.calls == 3


def test_goes_on_with_fewer_nodes_after_the_timeout(tmp_path, flwr_log):
    grid = grid_of(tmp_path, 2)
    assert plumbing(min_nodes=5, node_wait_timeout=0.01).wait_for_nodes(grid) == sorted(grid.node_ids)
    assert "Only 2 of 5 clients connected; going on" in messages(flwr_log)


def test_no_client_at_all_is_an_error(tmp_path):
    grid = InProcessGrid(build_client_app(), [])
    with pytest.raises(RuntimeError, match="no client connected within 0.01 s"):
        plumbing(node_wait_timeout=0.01).connected_nodes(grid)


def test_a_lost_client_does_not_make_later_rounds_wait(tmp_path):
    grid = grid_of(tmp_path, 3)
    strategy = plumbing(min_nodes=3, node_wait_timeout=60)
    strategy.wait_for_nodes(grid)
    first, lost, third = grid.node_ids
    del grid._contexts[lost]
    assert strategy.connected_nodes(grid) == sorted([first, third])


@pytest.mark.parametrize(("participation", "expected"), [(1.0, 10), (0.3, 3), (0.05, 1), (0.25, 3)])
def test_fraction_of_clients_rounds_up_and_keeps_one(tmp_path, participation, expected):
    grid = grid_of(tmp_path, 10)
    sample = plumbing(participation=participation).sample_nodes(grid, np.random.default_rng(0))
    assert len(sample) == expected == len(set(sample))


def test_sampling_is_seeded_and_sorted(tmp_path):
    grid = grid_of(tmp_path, 10)
    strategy = plumbing(clients_per_round=4)
    a = [strategy.sample_nodes(grid, np.random.default_rng(7)) for _ in range(2)]
    assert a[0] == a[1] == sorted(a[0]) and len(a[0]) == 4
    assert strategy.sample_nodes(grid, np.random.default_rng(8)) != a[0]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"participation": 0.0}, "participation must be in"),
    ({"clients_per_round": 0}, "clients_per_round must be >= 1"),
])
def test_bad_sampling_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plumbing(**kwargs)


def test_sampling_keeps_flower_node_ids_exact(tmp_path):
    # Flower's node ids are uint64 values above 2**53: a draw through float64
    # would give ids that no node has (the bug that made partial participation train nothing).
    grid = grid_of(tmp_path, 10)
    assert max(grid.node_ids) > 2**53
    draws = [plumbing(participation=0.5).sample_nodes(grid, np.random.default_rng(seed))
             for seed in (7, 7, 8)]
    assert all(set(draw) <= set(grid.node_ids) and len(draw) == 5 for draw in draws)
    assert draws[0] == draws[1] != draws[2]
