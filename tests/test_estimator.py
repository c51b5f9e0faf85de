"""FederatedKMeans: scikit-learn's conventions, the CLI's defaults, and Flower's result."""

from __future__ import annotations

import inspect
import subprocess
import sys

import numpy as np
import pytest

from fedcluster import FederatedKMeans
from fedcluster.config import ConfigError, RunConfig
from fedcluster.data import DataError, load_dataset, partition_indices
from fedcluster.server.artifacts import read_model


@pytest.fixture(scope="module")
def s1_parts():
    X = load_dataset("s1").X
    return X, [X[i] for i in partition_indices(len(X), 10, "iid", seed=0)]


def test_every_parameter_defaults_to_the_command_lines_value():
    fields = RunConfig.model_fields
    for name, parameter in inspect.signature(FederatedKMeans.__init__).parameters.items():
        if name == "self":
            continue
        field = "score" if name == "restart_score" else name
        assert parameter.default == fields[field].default, name
    # Every method setting of the config is a parameter.
    params = set(FederatedKMeans().get_params()) | {"score"}
    assert set(fields) - params == {"out_dir", "dataset", "split", "partitions_dir", "resume_from",
                                    "min_nodes", "node_wait_timeout", "round_timeout"}


def test_get_and_set_params_follow_scikit_learn():
    model = FederatedKMeans(k=4)
    assert model.get_params()["k"] == 4 and model.set_params(lr=0.5) is model and model.lr == 0.5
    with pytest.raises(ValueError, match="no parameter 'kk'"):
        model.set_params(kk=3)
    assert repr(model) == "FederatedKMeans(k=4, lr=0.5)"


def test_invalid_parameters_and_data_are_named_at_fit(s1_parts):
    _, parts = s1_parts
    with pytest.raises(ConfigError, match="'lr'"):
        FederatedKMeans(lr=2.0).fit(parts)
    bad = [parts[0].copy(), parts[1]]
    bad[0][3, 1] = np.nan
    with pytest.raises(DataError, match="client 0"):
        FederatedKMeans(k=3).fit(bad)
    with pytest.raises(AttributeError, match="not fitted"):
        FederatedKMeans().predict(parts[0])


def test_fit_predict_score_on_s1(s1_parts):
    X, parts = s1_parts
    model = FederatedKMeans(algorithm="dwf", k=15).fit(parts)
    assert model.cluster_centers_.shape == (15, 2) and model.n_iter_ == model.result_.rounds
    assert len(model.history_) == model.n_iter_ + 1  # the initialisation and the rounds
    labels = model.predict(X)
    assert labels.shape == (len(X),) and set(labels) == set(range(15))
    assert model.score(X) == pytest.approx(-model.inertia_, rel=1e-12)
    assert model.inertia_ == pytest.approx(model.result_.score * len(X), rel=1e-12)


@pytest.mark.parametrize("algorithm", ["fkm", "kfed", "ffcm-avg1", "feca", "mavg", "fedkmeans"])
def test_every_method_fits_in_memory(s1_parts, algorithm):
    _, parts = s1_parts
    model = FederatedKMeans(algorithm=algorithm, k=15, num_server_rounds=3).fit(parts)
    assert model.result_.algorithm == algorithm and np.isfinite(model.cluster_centers_).all()


@pytest.mark.slow
def test_equals_fedcluster_simulate_bit_for_bit(s1_parts, tmp_path):
    """The issue's acceptance: the library in memory == the CLI's Flower simulation."""
    _, parts = s1_parts
    model = FederatedKMeans(algorithm="dwf", k=15).fit(parts)
    done = subprocess.run(
        [sys.executable, "-m", "fedcluster.cli", "simulate", "--dataset", "s1", "--clients", "10",
         "--split", "iid", "--k", "15", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    cli = read_model(tmp_path / "out" / "model.pb")
    np.testing.assert_array_equal(model.cluster_centers_, cli.centroids)
    assert model.result_.score == cli.score and model.n_iter_ == cli.rounds
    np.testing.assert_array_equal([r.score for r in model.history_], [r.score for r in cli.history])


@pytest.mark.slow
def test_flower_backend_equals_memory_with_partial_participation(s1_parts):
    _, parts = s1_parts
    params = dict(algorithm="fedkmeans", k=15, num_server_rounds=4, participation=0.5, seed=2)
    memory = FederatedKMeans(**params).fit(parts)
    flower = FederatedKMeans(**params).fit(parts, backend="flower")
    np.testing.assert_array_equal(memory.cluster_centers_, flower.cluster_centers_)
    assert [r.clients_answered for r in memory.history_] == [r.clients_answered for r in flower.history_]
