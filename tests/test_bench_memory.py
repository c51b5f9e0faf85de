"""A grid's memory stays flat: runs serve their rows from memory and leave nothing cached."""

from __future__ import annotations

import numpy as np
import pytest

from fedcluster.bench import load_grid, run_grid
from fedcluster.bench.datasets import data_seed
from fedcluster.bench.runner import cached_dataset, cached_partition, client_rows
from fedcluster.client.data import cached_sources, forget, local_data
from fedcluster.data import write_partitions

GRID = """
name = "memory"
seeds = 3
clients = 4
k = 15
datasets = ["s1"]
splits = ["iid", "dirichlet:0.3"]

[[methods]]
label = "DWF"
algorithm = "dwf"
settings = { num-server-rounds = 3, participation = 0.5 }

[[methods]]
label = "central"
algorithm = "dwf"
clients = 1
settings = { num-server-rounds = 3 }
"""


@pytest.fixture
def grid(tmp_path):
    path = tmp_path / "memory.toml"
    path.write_text(GRID)
    return load_grid(path)


def test_no_run_leaves_client_data_cached(grid, tmp_path):
    # Runs answer from arrays: nothing goes through the ClientApp's cache, and nothing stays.
    before = set(cached_sources())
    after: list[int] = []
    rows = run_grid(grid, tmp_path / "out", workers=1,
                    progress=lambda line: after.append(len(cached_sources())))
    assert len(rows) == len(grid.runs) == 12 and not any(r["error"] for r in rows)
    assert after[1:] == [len(before)] * len(grid.runs)
    assert set(cached_sources()) == before


def test_in_memory_clients_give_the_result_of_flower_clients_reading_files(tmp_path):
    from harness.inprocess import InProcessGrid

    from fedcluster.client.app import build_client_app
    from fedcluster.config import RunConfig
    from fedcluster.server.flower import FlowerFederation
    from fedcluster.client.memory import InMemoryFederation
    from fedcluster.config import build_strategy

    data = cached_dataset("s1", 0)
    parts = cached_partition("s1", "dirichlet:0.3", 5, 0)
    config = RunConfig.from_mapping({"algorithm": "dwf", "k": 15, "num-server-rounds": 4,
                                     "participation": 0.6, "local-steps": 2, "seed": 3})
    files = write_partitions(data.X, parts, tmp_path / "parts")
    on_disk = build_strategy(config).fit(FlowerFederation(InProcessGrid(
        build_client_app(), [{"data-path": str(f), "partition-id": i} for i, f in enumerate(files)])))
    rows, _ = client_rows(data, parts)
    in_memory = build_strategy(config).fit(InMemoryFederation(rows))
    np.testing.assert_array_equal(in_memory.centroids, on_disk.centroids)
    assert in_memory.rounds == on_disk.rounds
    assert [r.score for r in in_memory.history] == [r.score for r in on_disk.history]
    assert [len(r.participants) for r in in_memory.history] == [len(r.participants) for r in on_disk.history]


def test_forget_drops_the_cached_arrays_of_named_sources(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.ones((4, 2)))
    local_data({"data-path": str(path)}, {}, "cpu")
    source = ("file", str(path.resolve()))
    assert source in cached_sources()
    assert forget([source]) == 1 and source not in cached_sources()
    assert forget([source]) == 0


def test_fixed_data_is_loaded_once_whatever_the_run_seed():
    assert data_seed("s1", 7) == 0 and data_seed("mnist", 3) == 0
    assert data_seed("blobs", 7) == 7 and data_seed("blobs?data-seed=2", 7) == 2
    assert cached_dataset("s1", 0) is cached_dataset("s1", 5)
    assert cached_dataset("blobs?n-samples=100&data-seed=1", 0) is cached_dataset(
        "blobs?n-samples=100&data-seed=1", 4)
    assert not np.array_equal(cached_dataset("blobs?n-samples=100", 0).X,
                              cached_dataset("blobs?n-samples=100", 1).X)


def test_client_rows_are_views_of_one_copy_in_partition_order():
    data = cached_dataset("s1", 0)
    parts = cached_partition("s1", "dirichlet:0.3", 5, 0)
    rows, labels = client_rows(data, parts)
    base = rows[0].base
    assert base is not None and base is not data.X
    for X, y, p in zip(rows, labels, parts):
        assert X.base is base and X.flags.c_contiguous
        np.testing.assert_array_equal(X, data.X[p])
        np.testing.assert_array_equal(y, data.labels[p])
    # One client holding every row (the centralized baseline): the dataset itself, no copy.
    (everything,), (their_labels,) = client_rows(data, cached_partition("s1", "iid", 1, 0))
    assert everything is data.X and their_labels is data.labels


def _token(config):
    token, _, index = config["data-memory"].partition(":")
    return token, int(index)
