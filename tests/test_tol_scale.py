"""``tol-scale``: the stopping rule in the data's units or relative to its variance (scikit-learn's)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import save_parts
from fedcluster import FederatedKMeans
from fedcluster.cli import main
from fedcluster.client.app import build_client_app
from fedcluster.client.memory import InMemoryFederation
from fedcluster.config import ConfigError, RunConfig, build_strategy
from fedcluster.data import load_dataset
from fedcluster.numerics import movement_tolerance
from fedcluster.preprocessing import fit_method
from fedcluster.server.artifacts import read_model
from fedcluster.server.checkpoint import CheckpointWriter, resume_point
from fedcluster.server.flower import FlowerFederation
from harness.inprocess import InProcessGrid

#: DWF from a random start with 5 local steps on S1: with the absolute tol 1e-4 the
#: centroids of the 10 IID clients keep moving by ~340 (S1's values are ~1e5-1e6) to the
#: round limit; relative to S1's variance the run stops once a round gains nothing.
S1_RUN = dict(algorithm="dwf", init="random", local_steps=5, max_iter=30, tol=1e-4)


def s1_parts(scale: float = 1.0, clients: int = 10) -> list[np.ndarray]:
    X = load_dataset("s1").X * scale
    return np.array_split(np.random.default_rng(0).permutation(X), clients)


def test_the_relative_rule_compares_the_squared_movement_with_tol_times_the_mean_variance():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3)) * np.array([1.0, 1e3, 1e5])
    variance = float(np.mean(np.var(X, axis=0)))  # scikit-learn's KMeans._tolerance / tol
    for tol in (1e-4, 1e-3, 0.0):
        tolerance = movement_tolerance(tol, variance)
        for movement in rng.uniform(0, 2 * tolerance + 1, size=200):
            assert (movement < tolerance) == (movement ** 2 < tol * variance)
    assert movement_tolerance(1e-4) == 1e-4  # absolute: tol itself
    assert movement_tolerance(0.0, variance) == 0.0  # tol 0 runs every round either way
    with pytest.raises(ValueError, match="mean_variance"):
        movement_tolerance(1e-4, -1.0)


def test_on_s1_the_variance_rule_stops_where_the_absolute_one_runs_on():
    absolute = FederatedKMeans(15, tol_scale="absolute", **S1_RUN).fit(s1_parts())
    relative = FederatedKMeans(15, tol_scale="variance", **S1_RUN).fit(s1_parts())
    assert (absolute.n_iter_, absolute.result_.converged) == (30, False)
    assert relative.result_.converged and relative.n_iter_ < 20, relative.n_iter_
    assert relative.inertia_ <= absolute.inertia_ * 1.001
    # The rule is relative: the same data in other units takes the same rounds to the same
    # centroids, in those units (to 0.3 %: the clients' steps are not exactly homogeneous).
    scaled = FederatedKMeans(15, tol_scale="variance", **S1_RUN).fit(s1_parts(2.0 ** -10))
    assert scaled.n_iter_ == relative.n_iter_
    np.testing.assert_allclose(scaled.cluster_centers_, relative.cluster_centers_ * 2.0 ** -10,
                               rtol=1e-2)
    assert FederatedKMeans(tol_scale="variance").get_params()["tol_scale"] == "variance"


def test_the_variance_comes_from_one_moments_request_through_flower_messages(tmp_path, flwr_log):
    parts = s1_parts(clients=4)
    config = RunConfig(k=15, tol_scale="variance", init="random", local_steps=5,
                       num_server_rounds=30)
    memory = fit_method(config, InMemoryFederation(parts))
    grid = InProcessGrid(build_client_app(), save_parts(tmp_path / "parts", parts))
    flower = fit_method(config, FlowerFederation(grid))
    assert flower.converged and flower.rounds == memory.rounds < 30
    np.testing.assert_array_equal(flower.centroids, memory.centroids)
    variance = float(np.mean(np.var(np.concatenate(parts), axis=0)))
    said = [r.getMessage() for r in flwr_log if "tol-scale variance (moments)" in r.getMessage()]
    assert len(said) == 2 and all(f"{variance:.6g}" in line for line in said), said  # one a run


def test_a_resumed_run_asks_the_variance_again_and_stops_where_the_whole_run_does(tmp_path):
    config = RunConfig(k=15, tol_scale="variance", init="random", local_steps=5,
                       num_server_rounds=30, momentum=0.3)
    parts = s1_parts(clients=4)
    whole = build_strategy(config).fit(InMemoryFederation(parts))
    assert whole.converged and whole.rounds > 3

    def stop_after_round_3(progress):
        writer(progress)
        if progress.round == 3:
            raise KeyboardInterrupt

    strategy = build_strategy(config)
    writer = CheckpointWriter(tmp_path, strategy.settings, config.to_flower())
    with pytest.raises(KeyboardInterrupt):
        strategy.fit(InMemoryFederation(parts), checkpoint=stop_after_round_3)
    strategy = build_strategy(config)
    resumed = strategy.fit(InMemoryFederation(parts),
                           resume=resume_point(tmp_path, strategy, config.to_flower()))
    assert (resumed.rounds, resumed.converged) == (whole.rounds, whole.converged)
    np.testing.assert_array_equal(resumed.centroids, whole.centroids)


def test_the_command_line_and_the_run_config_take_it_and_the_report_says_it(tmp_path, flwr_log):
    out = tmp_path / "out"
    code = main(["simulate", "--backend", "memory", "--clients", "4", "--init", "random",
                 "--local-steps", "5", "--tol-scale", "variance", "--rounds", "30",
                 "--out", str(out)])
    assert code == 0
    assert read_model(out / "model.pb").converged
    assert any("tol-scale variance (moments)" in r.getMessage() for r in flwr_log)
    assert "sqrt(tol x the mean feature variance)" in (out / "report.html").read_text()
    assert RunConfig.from_mapping({"tol-scale": "variance"}).tol_scale == "variance"
    with pytest.raises(ConfigError, match="tol-scale"):
        RunConfig.from_mapping({"tol-scale": "relative"})


@pytest.mark.parametrize("privacy", [
    {"dp": "central", "data-bounds": "0:1e6"},
    {"secure-aggregation": True, "init": "random", "data-bounds": "0:1e6"},
])
def test_under_dp_or_secure_aggregation_the_unnoised_moments_are_refused(privacy):
    with pytest.raises(ConfigError, match="needs tol-scale = absolute"):
        RunConfig.from_mapping({"tol-scale": "variance", **privacy})
    with pytest.raises(ConfigError, match="needs tol-scale = absolute"):
        FederatedKMeans(15, tol_scale="variance",
                        **{k.replace("-", "_"): v for k, v in privacy.items()}).fit(s1_parts())
