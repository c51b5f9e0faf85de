"""Real gRPC deployments on loopback: SuperLink and SuperNodes as separate processes.

One federation (a SuperLink and three SuperNodes, each with its own partition
file) serves every run of this module: DWF must give the model a simulation of
the same partitions gives (the in-process run, harness.inprocess.run_on_files),
every other method must run to the end (all of them at once), and DWF with secure aggregation must
give the plain run's model.
"""

from __future__ import annotations

import tomllib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from fedcluster.data import load_dataset, partition_indices, write_partitions
from fedcluster.methods import METHODS
from fedcluster.server.artifacts import read_model
from harness.inprocess import run_on_files
from harness.localdeploy import LocalDeployment, run_config_text

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("deployment")
    data = load_dataset("s1")
    parts = partition_indices(len(data.X), 3, "dirichlet:0.5", labels=data.labels, seed=4)
    files = write_partitions(data.X, parts, tmp / "parts")
    with LocalDeployment(tmp / "processes", [f'data-path="{f}"' for f in files]) as deployment:
        yield deployment, tmp


def data_paths(deployment) -> list[str]:
    """Each SuperNode's partition file, in the order of the SuperNodes."""
    return [tomllib.loads(config)["data-path"] for config in deployment.node_configs]


def deploy(federation, name: str, settings: dict, timeout: float = 400):
    """``flwr run`` the app with ``settings``; return the model it wrote."""
    deployment, tmp = federation
    out = tmp / name
    done = deployment.flwr_run(run_config_text({**settings, "min-nodes": 3, "out-dir": str(out)}),
                               timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr + deployment.logs()
    assert (out / "model.pb").is_file(), done.stdout + deployment.logs()
    return read_model(out / "model.pb"), done.stdout


def test_deployment_equals_simulation(federation):
    """The deployed run is, bit for bit, the in-process run of the same files under the
    SuperNodes' ids (harness.inprocess.run_on_files), which is Flower's simulation's
    (tests/test_inprocess_equals_simulation.py, bit for bit; a Ray start here would add
    its seconds and, with other node ids, compare only to about 1e-9)."""
    settings = {"algorithm": "dwf", "k": 15, "num-server-rounds": 6, "local-steps": 2,
                "lr": 0.9, "momentum": 0.1, "init": "local-kmeans", "seed": 4, "tol": 1e-4}
    deployed, _ = deploy(federation, "dwf", settings)
    deployment, _ = federation
    simulated = run_on_files({**settings, "min-nodes": 3}, data_paths(deployment),
                             deployment.node_ids())

    assert deployed.algorithm == simulated.algorithm == "dwf"
    assert deployed.rounds == simulated.rounds
    np.testing.assert_array_equal(deployed.centroids, simulated.centroids)
    np.testing.assert_array_equal(deployed.counts, simulated.counts)
    assert deployed.score == simulated.score
    assert [(r.phase, r.round, r.participants) for r in deployed.history] == \
        [(r.phase, r.round, r.participants) for r in simulated.history]
    assert all(r.clients_answered == 3 for r in deployed.history)


#: What a method needs besides ``k`` and the rounds to run on S1's rows: DeepFeCA trains a
#: network, here the one for rows that are not images, one round; its batch-norm variances of
#: S1's raw coordinates (up to 1e6) reach about 5e10, above the default weight bound.
ON_S1 = {"deepfeca": {"network": "mlp", "image-shape": "2", "num-server-rounds": 1,
                      "max-weight": 1e12}}


#: Every method but dwf, which test_deployment_equals_simulation runs.
OTHER_METHODS = [name for name in METHODS if name != "dwf"]


@pytest.fixture(scope="module")
def every_method_run(request, federation):
    """The deployed run (the future of :func:`deploy`'s result) of each method that
    test_every_method_runs_in_the_deployment is selected for, all submitted at once to the
    one SuperLink, which runs them side by side: a run mostly waits (a SuperNode polls every
    few seconds and starts a ClientApp process per message), so together they take about the
    slowest run's time rather than the sum of all. Each has its own out dir and ``flwr run``
    process; the timeout allows for all of them sharing the CPUs."""
    selected = [item.callspec.params["algorithm"] for item in request.session.items
                if item.module is request.module
                and item.originalname == "test_every_method_runs_in_the_deployment"]

    def run(algorithm):
        settings = {"algorithm": algorithm, "k": 15, "seed": 1, "num-server-rounds": 2,
                    **ON_S1.get(algorithm, {})}
        return deploy(federation, algorithm, settings, timeout=1200)

    with ThreadPoolExecutor(len(selected)) as pool:
        return {name: pool.submit(run, name) for name in selected}


@pytest.mark.parametrize("algorithm", OTHER_METHODS)
def test_every_method_runs_in_the_deployment(every_method_run, algorithm):
    model, log = every_method_run[algorithm].result()
    assert model.algorithm == algorithm
    assert 1 <= len(model.centroids) <= 15 and model.n_points == 5000
    assert all(r.clients_answered == 3 for r in model.history)
    assert model.score > 0


# -- privacy through the real deployment ---------------------------------------------------------

def test_secure_aggregation_and_distributed_dp_in_the_deployment(federation, s1):
    """Issue 14's acceptance: DWF with secure aggregation over the SuperNodes gives the plain sum
    form's result within the fixed-point precision, and distributed DP (each SuperNode adds its
    noise share, under secure aggregation) runs to the end within its budget.

    The reference is the plain dwf run of one local step from the same start file: both
    withhold a client's cluster of fewer than p rows alike (the masked sums keep the floor per
    cluster), so they differ from centralized Lloyd where a SuperNode holds such a cluster,
    and from each other only by the fixed point: dwf's counts are whole, so only its sums are
    rounded, by at most 3 x 2^-25 a total. The plain run is the in-process one over the
    SuperNodes' partition files (harness.inprocess.run_on_files: a plain deployment gives its
    model, and would add a minute here).
    """
    import time

    deployment, tmp = federation
    start = s1[np.random.default_rng(2).choice(len(s1), 15, replace=False)] + 0.5
    np.save(tmp / "sum-form-start.npy", start)
    sum_form = {"algorithm": "dwf", "k": 15, "num-server-rounds": 2, "tol": 0.0,
                "local-steps": 1, "init": str(tmp / "sum-form-start.npy"), "data-bounds": "0:1e6"}
    plain = run_on_files({**sum_form, "min-nodes": 3}, data_paths(deployment))
    began = time.monotonic()
    secure, log = deploy(federation, "dwf-secure", {**sum_form, "secure-aggregation": True})
    # What it cost over loopback (README, "Secure aggregation", reads these lines).
    costs = [line for line in log.splitlines() if "secure aggregation so far" in line]
    assert costs, log
    print(f"secure run {time.monotonic() - began:.1f} s", *costs, sep="\n")
    np.testing.assert_allclose(secure.centroids, plain.centroids, rtol=1e-9, atol=1e-5)
    np.testing.assert_array_equal(secure.counts, plain.counts)
    assert secure.score == pytest.approx(plain.score, rel=1e-9)
    assert secure.settings["secure-aggregation"] is True
    assert all(r.clients_answered == 3 for r in secure.history)

    # One round: tests/test_privacy.py checks the epsilon recorded after each of several.
    noisy, _ = deploy(federation, "dwf-distributed-dp", {
        **sum_form, "num-server-rounds": 1, "secure-aggregation": True, "dp": "distributed",
        "dp-epsilon": 5.0})
    train = [r for r in noisy.history if r.phase == "train"]
    assert noisy.rounds == len(train) == 1 and train[0].clients_answered == 3, noisy.history
    assert train[0].epsilon == pytest.approx(5.0, rel=1e-3)
    assert not np.allclose(noisy.centroids, secure.centroids)  # the noise is there


# -- starts and partial participation through the real deployment -------------------------------
# (tests/test_real_flower.py checks that every start runs through real Flower somewhere.)

#: Flower draws node ids as random uint64 values; ids such as 0, 1, ... or 100, 101, ...
#: are not Flower's.
SMALLEST_FLOWER_ID = 2**20


def supernode_ids(federation) -> set[int]:
    """The ids Flower gave the federation's SuperNodes, checked to be Flower's."""
    deployment, _ = federation
    ids = set(deployment.node_ids())
    assert len(ids) == len(deployment.node_configs), deployment.logs()
    assert min(ids) >= SMALLEST_FLOWER_ID, ids
    return ids


def test_partial_participation_from_a_start_file(federation, s1):
    """An array-file start and two of the three SuperNodes per round (``clients-per-round=2``)."""
    _, tmp = federation
    start = tmp / "start.npy"
    np.save(start, s1[np.random.default_rng(3).choice(len(s1), 15, replace=False)])
    model, log = deploy(federation, "dwf-file-partial", {
        "algorithm": "dwf", "k": 15, "seed": 3, "init": str(start), "clients-per-round": 2,
        "num-server-rounds": 2, "tol": 0.0})
    ids = supernode_ids(federation)
    # An explicit start asks no client: every record is a training round of two SuperNodes.
    assert [r.phase for r in model.history] == ["train"] * 2, model.history
    for record in model.history:
        assert record.clients_sampled == record.clients_answered == 2, record
        assert record.clients_rejected == 0 and len(record.participants) == 2, record
        assert set(record.participants) <= ids, (record, ids)
    first = model.history[0]
    assert np.isfinite(first.movement) and first.movement > 0, first
    assert model.settings["clients-per-round"] == 2
    assert model.n_points == 5000  # the final score asks every SuperNode


def test_the_polling_benchmarks_bare_app_runs_with_prompt_grid(federation):
    """``benchmarks/perf.py polling`` times this empty app against DWF: it must run (it once
    imported PromptGrid from a module that had moved), here one round with fedcluster's grid."""
    from harness.localdeploy import REPO

    deployment, _ = federation
    done = deployment.flwr_run("rounds=1 nodes=3 prompt=true", timeout=300,
                               app=REPO / "benchmarks" / "perf_bare_app")
    assert done.returncode == 0 and "ERROR" not in done.stdout, done.stdout + done.stderr
    assert "bare round 1:" in done.stdout and "3 replies" in done.stdout, done.stdout
