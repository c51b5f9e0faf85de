"""The in-memory federation (and the in-process grid) give exactly the centroids of Flower's own simulation.

With full participation: a seeded sample of clients is drawn over node ids,
which Flower's simulation assigns at random, so with partial participation the
same seed picks different data owners in different executors (as it would in
two deployments).
"""

from __future__ import annotations

import numpy as np
import pytest

from fedcluster.client.app import build_client_app
from fedcluster.config import RunConfig
from fedcluster.data import load_dataset, partition_indices, write_partitions
from fedcluster.server.flower import FlowerFederation
from fedcluster.client.memory import InMemoryFederation
from fedcluster.config import build_strategy
from fedcluster.simulation import simulate
from harness.inprocess import InProcessGrid


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["dwf", "fedkmeans"])
def test_same_seed_and_configuration_give_identical_centroids(tmp_path, algorithm):
    data = load_dataset("s1")
    parts = partition_indices(len(data.X), 5, "dirichlet:0.5", labels=data.labels, seed=2)
    files = write_partitions(data.X, parts, tmp_path / "parts")
    settings = {"algorithm": algorithm, "k": 15, "num-server-rounds": 8, "local-steps": 2,
                "seed": 2, "init": "local-kmeans", "min-nodes": 5}
    flower = simulate(RunConfig.from_mapping({**settings, "out-dir": str(tmp_path / "ray")}),
                      tmp_path / "parts", 5)
    memory = build_strategy(RunConfig.from_mapping(settings)).fit(
        InMemoryFederation([data.X[p] for p in parts]))
    grid = InProcessGrid(build_client_app(), [{"data-path": str(f)} for f in files])
    inprocess = build_strategy(RunConfig.from_mapping(settings)).fit(FlowerFederation(grid))

    for run in (memory, inprocess):
        np.testing.assert_array_equal(run.centroids, flower.centroids)
        assert run.score == flower.score and run.rounds == flower.rounds
