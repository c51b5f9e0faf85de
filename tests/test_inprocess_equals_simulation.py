"""The in-memory federation (and the in-process grid) give exactly the centroids of Flower's own simulation.

With full participation: a seeded sample of clients is drawn over node ids,
which Flower's simulation assigns at random, so with partial participation the
same seed picks different data owners in different executors (as it would in
two deployments).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from fedcluster.client.app import build_client_app
from fedcluster.config import RunConfig
from fedcluster.data import load_dataset, partition_indices, write_partitions
from fedcluster.server.flower import FlowerFederation
from fedcluster.client.memory import InMemoryFederation
from fedcluster.config import build_strategy
from fedcluster.server.artifacts import read_model
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


@pytest.mark.slow
def test_the_command_lines_memory_backend_gives_the_centroids_and_files_of_its_flower_simulation(
        tmp_path):
    """``simulate --backend memory`` is the same run without Flower: same centroids, same files."""
    argv = ["simulate", "--dataset", "s1", "--clients", "4", "--split", "dirichlet:0.5",
            "--seed", "2", "--k", "15", "--rounds", "5"]
    results = {}
    for backend in ("flower", "memory"):
        out = tmp_path / backend
        done = subprocess.run([sys.executable, "-m", "fedcluster.cli", *argv, "--backend", backend,
                               "--out", str(out)], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        assert sorted(p.name for p in out.iterdir()) == [
            "checkpoint.json", "history.csv", "model.pb", "report.html"]
        results[backend] = read_model(out / "model.pb")
    flower, memory = results["flower"], results["memory"]
    np.testing.assert_array_equal(memory.centroids, flower.centroids)
    assert memory.score == flower.score and memory.rounds == flower.rounds
    assert memory.settings == flower.settings
