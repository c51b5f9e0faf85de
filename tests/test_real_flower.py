"""Every method, every start and partial participation run through real Flower.

Real Flower is a Ray simulation (``fedcluster.simulation.simulate``) or a
loopback deployment (``tests/test_deployment.py``), where node ids are the
random uint64 values Flower draws, never a partition index. The fast tests
here check that the deployment tests cover every method and every start the
configuration accepts; the slow test runs partial participation in a Ray
simulation and checks that a seed fixes what is sampled although Flower gives
every simulated client a new node id in each run; another starts a run from the
centroids given to ``FlowerStrategy.start`` in a ServerApp of its own.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from helpers import naive_stats

from fedcluster.config import INIT_METHODS, RunConfig
from fedcluster.data import load_dataset, partition_indices, write_partitions
from fedcluster.config import build_strategy
from fedcluster.methods import METHODS
from fedcluster.simulation import set_offline_env, simulate

TESTS = Path(__file__).resolve().parent
SMALLEST_FLOWER_ID = 2**20


#: Each start (``--init``) and the real-Flower test that runs it.
STARTS = {
    "local-kmeans": "test_deployment.py::test_deployment_equals_simulation",
    "kfed": "test_real_flower.py::test_partial_participation_in_a_ray_simulation",
    "random": "test_readme.py::test_simulate_command",  # the README's fedkmeans --init random
    "file": "test_deployment.py::test_partial_participation_from_a_start_file",
    "spread": "test_privacy_bounds.py::test_dp_without_declared_bounds_in_a_ray_simulation",
    "private": "test_privacy_bounds.py::test_dp_without_declared_bounds_in_a_ray_simulation",
}


def _functions(file: str) -> set[str]:
    tree = ast.parse((TESTS / file).read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_every_start_runs_through_real_flower():
    assert set(STARTS) == {*INIT_METHODS, "file"}, f"STARTS lacks {({*INIT_METHODS, 'file'} - set(STARTS))}"
    for start, test in STARTS.items():
        file, _, name = test.partition("::")
        assert name in _functions(file), f"start {start}: tests/{file} has no {name}"
        text = (TESTS / file).read_text(encoding="utf-8")
        if file == "test_readme.py":  # runs the README's simulate commands: one must use it
            import test_readme

            assert any(f"--init {start}" in c.text for c in test_readme.COMMANDS
                       if c.text.startswith("fedcluster simulate")), \
                f"no README simulate command uses --init {start}; give start {start} another test"
        elif start != "file":
            assert f'"init": "{start}"' in text, f"{test} does not set init {start}"


def test_every_method_runs_in_the_deployment():
    """test_deployment.py runs dwf against a simulation and every other METHODS entry."""
    text = (TESTS / "test_deployment.py").read_text(encoding="utf-8")
    assert '[name for name in METHODS if name != "dwf"]' in text
    assert '"algorithm": "dwf"' in text and "dwf" in METHODS


@pytest.mark.slow
def test_partial_participation_in_a_ray_simulation(tmp_path):
    """Two of five simulated clients per round after a k-FED start (which asks all five);
    one seed gives one model in two simulations."""
    data = load_dataset("s1")
    parts = partition_indices(len(data.X), 5, "dirichlet:0.5", labels=data.labels, seed=5)
    write_partitions(data.X, parts, tmp_path / "parts")
    settings = {"algorithm": "dwf", "k": 15, "num-server-rounds": 4, "tol": 0.0, "seed": 7,
                "participation": 0.4, "local-steps": 2, "min-nodes": 5, "init": "kfed"}
    runs = [simulate(RunConfig.from_mapping({**settings, "out-dir": str(tmp_path / name)}),
                     tmp_path / "parts", 5) for name in ("first", "second")]

    for model in runs:
        assert [r.phase for r in model.history] == ["init"] + ["train"] * 4, model.history
        init, *train = model.history
        assert init.clients_sampled == init.clients_answered == 5  # the start asks everyone
        for record in train:
            assert record.clients_sampled == record.clients_answered == 2, record
            assert record.clients_rejected == 0 and len(record.participants) == 2, record
            assert set(record.participants) <= set(init.participants), record
        assert min(init.participants) >= SMALLEST_FLOWER_ID, init.participants
        assert math.isfinite(train[0].movement) and train[0].movement > 0, train[0]
        assert model.n_points == 5000

    first, second = runs
    # Flower gave the clients new ids, yet the seed sampled the same partitions:
    # the same per-round scores (reported by the sampled clients) and the same model.
    assert set(first.history[0].participants).isdisjoint(second.history[0].participants)
    assert [r.score for r in first.history[1:]] == [r.score for r in second.history[1:]]
    np.testing.assert_array_equal(first.centroids, second.centroids)
    assert first.score == second.score
    # Over four rounds the draw is not one fixed pair of clients.
    pairs = {tuple(sorted(first.history[0].participants.index(p) for p in r.participants))
             for r in first.history[1:]}
    assert len(pairs) > 1, pairs


@pytest.mark.slow
def test_a_simulation_starts_its_own_ray_and_has_stopped_it_when_waited_for(tmp_path, monkeypatch):
    """A Ray address left by `ray start` (here one nothing listens on) is not joined: the run
    starts a cluster of its own (before, Ray retried the address for minutes); `simulate`
    returns once the model is in, and its Flower runtime and Ray stop behind it."""
    import socket

    import ray

    from fedcluster.simulation import wait_for_the_last_teardown

    with socket.socket() as closed:  # a port nobody listens on once the socket is closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    data = load_dataset("s1")
    write_partitions(data.X, partition_indices(len(data.X), 2, "iid", seed=0), tmp_path / "parts")
    model = simulate(RunConfig.from_mapping({"k": 15, "num-server-rounds": 2, "min-nodes": 2,
                                             "out-dir": str(tmp_path / "out")}),
                     tmp_path / "parts", 2)
    assert model.n_points == 5000 and (tmp_path / "out" / "model.pb").is_file()
    wait_for_the_last_teardown()
    assert not ray.is_initialized()


@pytest.mark.slow
def test_start_runs_from_the_initial_arrays_through_a_ray_simulation(tmp_path, s1_and_start):
    """``FlowerStrategy.start(grid, initial_arrays=...)`` in a ServerApp of our own, on Flower's grid.

    DWF configured with a random start and 5 rounds is started from given
    centroids for 1 round (lr 1, no momentum, one local step, every client
    answering): the model must be one centralized Lloyd step from exactly those
    centroids, row for row, so a start that was ignored or reordered fails. Two
    starts (one the other reversed) run in the same simulation.
    """
    set_offline_env()
    from flwr.app import Array, ArrayRecord
    from flwr.serverapp import ServerApp
    from flwr.simulation import run_simulation

    from fedcluster.client.app import build_client_app
    from fedcluster.server.flower import FlowerStrategy

    X, start = s1_and_start
    write_partitions(X, partition_indices(len(X), 3, "iid", seed=0), tmp_path / "parts")
    settings = {"algorithm": "dwf", "k": 15, "num-server-rounds": 5, "init": "random", "seed": 0,
                "tol": 0.0, "lr": 1.0, "momentum": 0.0, "local-steps": 1, "min-nodes": 3}
    starts = [start, start[::-1].copy()]
    results = []

    server = ServerApp()

    @server.main()
    def main(grid, context):
        for centroids in starts:
            strategy = FlowerStrategy(build_strategy(RunConfig.from_mapping(settings)))
            results.append(strategy.start(grid=grid, initial_arrays=ArrayRecord(
                {"centroids": Array(centroids)}), num_rounds=1))

    run_simulation(server_app=server,
                   client_app=build_client_app({"partitions-dir": str(tmp_path / "parts")}),
                   num_supernodes=3,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                   "init_args": {"log_to_driver": False}})

    assert len(results) == len(starts)  # the ServerApp ran both to the end
    for centroids, result in zip(starts, results, strict=True):
        _, stats = naive_stats(X, centroids)
        assert (stats.counts > 0).all()
        lloyd_step = stats.sums / stats.counts[:, None]
        np.testing.assert_allclose(result.arrays["centroids"].numpy(), lloyd_step, rtol=1e-12)
        # One train round (num_rounds replaced the configured 5), every client answering.
        assert sorted(result.train_metrics_clientapp) == [1]
        assert result.train_metrics_clientapp[1]["clients-answered"] == 3
        assert result.evaluate_metrics_clientapp[1]["num-examples"] == len(X)


@pytest.mark.slow
def test_default_secagg_plus_graph_in_a_ray_simulation(tmp_path):
    """20 simulated clients under secure aggregation: the default graph is sparse there
    (SecAgg+, Bell et al.'s rule) and the secure totals give the plain run's step (one local
    step from a start file: both withhold a client's cluster of fewer than p rows alike), with
    Flower's own node ids."""
    from fedcluster.client.memory import InMemoryFederation
    from fedcluster.privacy import secagg

    data = load_dataset("s1")
    parts = partition_indices(len(data.X), 20, "iid", seed=2)
    write_partitions(data.X, parts, tmp_path / "parts")
    start = data.X[np.random.default_rng(2).choice(len(data.X), 15, replace=False)] + 0.5
    np.save(tmp_path / "start.npy", start)
    settings = {"algorithm": "dwf", "k": 15, "num-server-rounds": 1, "tol": 0.0,
                "local-steps": 1, "init": str(tmp_path / "start.npy"), "data-bounds": "0:1e6",
                "min-nodes": 20}
    secure = simulate(RunConfig.from_mapping({
        **settings, "secure-aggregation": True, "out-dir": str(tmp_path / "out")}),
        tmp_path / "parts", 20)

    assert secure.settings["secagg-neighbours"] == secagg.AUTO
    assert secure.settings["secagg-threshold"] == 0.0  # automatic: a majority without DP
    assert secagg.auto_graph(20, 0.5)[0] < 19  # sparse here
    [train] = [r for r in secure.history if r.phase == "train"]
    assert train.clients_answered == 20 and min(train.participants) >= SMALLEST_FLOWER_ID
    plain = build_strategy(RunConfig.from_mapping(settings)).fit(
        InMemoryFederation([data.X[i] for i in parts]))
    np.testing.assert_allclose(secure.centroids, plain.centroids, rtol=1e-9, atol=1e-5)
    np.testing.assert_array_equal(secure.counts, plain.counts)
