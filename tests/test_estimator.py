"""FederatedKMeans: scikit-learn's conventions, the CLI's defaults, and Flower's result."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

from fedcluster import FederatedKMeans
from fedcluster.config import ConfigError, RunConfig
from fedcluster.data import DataError, load_dataset, partition_indices
from fedcluster.estimator import CHOICES, CONFIG_NAMES
from fedcluster.server.artifacts import read_model


@pytest.fixture(scope="module")
def s1_parts():
    X = load_dataset("s1").X
    return X, [X[i] for i in partition_indices(len(X), 10, "iid", seed=0)]


@pytest.fixture(scope="module")
def blob_parts():
    """Three owners' rows of three well-separated 2-D blobs (60 rows in all)."""
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(c, 0.1, (20, 2)) for c in ((0, 0), (5, 0), (0, 5))])
    return [X[i::3] for i in range(3)]


def test_every_parameter_defaults_to_the_command_lines_value():
    fields = RunConfig.model_fields
    for name, parameter in inspect.signature(FederatedKMeans.__init__).parameters.items():
        if name == "self":
            continue
        if name in CHOICES:
            assert parameter.default == CHOICES[name][0], name
            continue
        assert parameter.default == fields[CONFIG_NAMES.get(name, name)].default, name
    # Every method setting of the config is a parameter.
    params = {CONFIG_NAMES.get(name, name) for name in FederatedKMeans().get_params()} - set(CHOICES)
    assert set(fields) - params == {"out_dir", "dataset", "split", "partitions_dir", "resume_from",
                                    "min_nodes", "node_wait_timeout", "round_timeout"}
    with pytest.raises(TypeError, match="unexpected keyword argument 'kk'"):
        FederatedKMeans(kk=3)


def test_get_and_set_params_follow_scikit_learn():
    from sklearn.base import clone

    model = FederatedKMeans(4, backend="flower")
    assert model.get_params()["n_clusters"] == 4
    assert model.set_params(lr=0.5) is model and model.lr == 0.5
    with pytest.raises(ValueError, match="no parameter 'kk'"):
        model.set_params(kk=3)
    assert repr(model) == "FederatedKMeans(n_clusters=4, lr=0.5, backend='flower')"
    # The backend is a parameter, so clone (and a grid search) carries it.
    assert clone(model).get_params() == model.get_params()


def test_the_run_configs_names_are_scikit_learns_here():
    assert FederatedKMeans(3, random_state=7, max_iter=9).config().model_dump(
        include={"k", "seed", "num_server_rounds"}) == {"k": 3, "seed": 7, "num_server_rounds": 9}
    with pytest.raises(TypeError, match="'k'"):
        FederatedKMeans(k=3)
    with pytest.raises(ValueError, match="'seed' is 'random_state' here"):
        FederatedKMeans().set_params(seed=1)
    # A bad value is named by the parameter's name, not the run config's.
    with pytest.raises(ConfigError, match="'n_clusters'") as bad:
        FederatedKMeans(0).config()
    assert "'k'" not in str(bad.value)
    for name in CHOICES:
        with pytest.raises(ConfigError, match=f"'{name}': 'other'"):
            FederatedKMeans(**{name: "other"}).config()


def test_invalid_parameters_and_data_are_named_at_fit(s1_parts):
    _, parts = s1_parts
    with pytest.raises(ConfigError, match="'lr'"):
        FederatedKMeans(lr=2.0).fit(parts)
    bad = [parts[0].copy(), parts[1]]
    bad[0][3, 1] = np.nan
    with pytest.raises(DataError, match="client 0"):
        FederatedKMeans(3).fit(bad)
    with pytest.raises(AttributeError, match="not fitted"):
        FederatedKMeans().predict(parts[0])


def test_fit_predict_score_on_s1(s1_parts):
    X, parts = s1_parts
    model = FederatedKMeans(15, algorithm="dwf").fit(parts)
    assert model.cluster_centers_.shape == (15, 2) and model.n_iter_ == model.result_.rounds
    assert len(model.history_) == model.n_iter_ + 1  # the initialisation and the rounds
    labels = model.predict(X)
    assert labels.shape == (len(X),) and set(labels) == set(range(15))
    assert model.score(X) == pytest.approx(-model.inertia_, rel=1e-12)
    assert model.inertia_ == pytest.approx(model.result_.score * len(X), rel=1e-12)


@pytest.mark.parametrize("algorithm", ["fkm", "kfed", "ffcm-avg1", "feca", "mavg", "fedkmeans"])
def test_every_method_fits_in_memory(s1_parts, algorithm):
    _, parts = s1_parts
    model = FederatedKMeans(15, algorithm=algorithm, max_iter=3).fit(parts)
    assert model.result_.algorithm == algorithm and np.isfinite(model.cluster_centers_).all()


@pytest.mark.slow
def test_equals_fedcluster_simulate_bit_for_bit(s1_parts, s1_cli_simulation):
    """The issue's acceptance: the library in memory == the CLI's Flower simulation
    (``fedcluster simulate --dataset s1 --clients 10 --split iid --k 15``)."""
    _, parts = s1_parts
    model = FederatedKMeans(15, algorithm="dwf").fit(parts)
    done, out = s1_cli_simulation
    assert done.returncode == 0, done.stderr
    cli = read_model(out / "model.pb")
    np.testing.assert_array_equal(model.cluster_centers_, cli.centroids)
    assert model.result_.score == cli.score and model.n_iter_ == cli.rounds
    np.testing.assert_array_equal([r.score for r in model.history_], [r.score for r in cli.history])


@pytest.mark.slow
def test_flower_backend_equals_memory_with_partial_participation(s1_parts):
    _, parts = s1_parts
    params = dict(algorithm="fedkmeans", n_clusters=15, max_iter=4, participation=0.5,
                  random_state=2)
    memory = FederatedKMeans(**params).fit(parts)
    flower = FederatedKMeans(**params, backend="flower").fit(parts)
    np.testing.assert_array_equal(memory.cluster_centers_, flower.cluster_centers_)
    assert [r.clients_answered for r in memory.history_] == [r.clients_answered for r in flower.history_]


def test_labels_fit_predict_transform_and_fit_transform(blob_parts):
    model = FederatedKMeans(3, random_state=0)
    labels = model.fit_predict(blob_parts)
    assert labels is model.labels_ and len(labels) == 3
    for X, part_labels in zip(blob_parts, labels):
        np.testing.assert_array_equal(part_labels, model.predict(X))
    # Each blob is one cluster: three (blob, label) pairs over all parts.
    blobs = [np.arange(i, 60, 3) // 20 for i in range(3)]
    assert len(set(zip(np.concatenate(blobs), np.concatenate(labels)))) == 3
    distances = model.transform(blob_parts[0])
    assert distances.shape == (20, 3)
    np.testing.assert_allclose(distances, np.linalg.norm(
        blob_parts[0][:, None, :] - model.cluster_centers_[None], axis=2), rtol=1e-12)
    np.testing.assert_array_equal(distances.argmin(axis=1), labels[0])
    assert model.inertia_ == pytest.approx(sum((model.transform(X).min(axis=1) ** 2).sum()
                                               for X in blob_parts), rel=1e-9)
    transforms = FederatedKMeans(3, random_state=0).fit_transform(blob_parts)
    assert [t.shape for t in transforms] == [(20, 3)] * 3
    np.testing.assert_allclose(transforms[0], distances, rtol=1e-12)


def test_float32_parts_give_float32_centres_and_float64_stays_float64(blob_parts):
    single = [X.astype(np.float32) for X in blob_parts]
    model = FederatedKMeans(3, random_state=0).fit(single)
    assert model.cluster_centers_.dtype == np.float32
    assert model.transform(single[0]).dtype == np.float32
    assert model.transform(blob_parts[0]).dtype == np.float64
    double = FederatedKMeans(3, random_state=0).fit(blob_parts)
    assert double.cluster_centers_.dtype == np.float64
    assert double.transform(single[0]).dtype == np.float64
    np.testing.assert_allclose(model.cluster_centers_, double.cluster_centers_, rtol=1e-5)


@pytest.mark.parametrize("one_array", [np.zeros((8, 2)), [[0.0, 1.0], [2.0, 3.0]]])
def test_one_array_is_refused_with_how_to_split_it(one_array):
    expected = re.escape("fit takes one array per data owner (a list); ")
    with pytest.raises(ValueError, match=f"^{expected}.*numpy.array_split"):
        FederatedKMeans(2).fit(one_array)


def test_a_part_with_other_features_raises_or_with_skip_is_left_out_with_a_warning(blob_parts):
    odd = np.zeros((10, 5))
    parts = [blob_parts[0], odd, *blob_parts[1:]]
    with pytest.raises(DataError, match=re.escape("client 1 (parts[1]) has 5 features where "
                                                  "client 0 has 2")):
        FederatedKMeans(3, random_state=0).fit(parts)
    with pytest.warns(UserWarning, match=re.escape("client 1 (parts[1]) has 5 features")):
        model = FederatedKMeans(3, random_state=0, on_bad_client="skip").fit(parts)
    assert model.labels_[1] is None and model.result_.n_points == 60
    np.testing.assert_array_equal(
        model.cluster_centers_, FederatedKMeans(3, random_state=0).fit(blob_parts).cluster_centers_)
    with pytest.warns(UserWarning):
        transforms = FederatedKMeans(3, random_state=0, on_bad_client="skip").fit_transform(parts)
    assert transforms[1] is None and [t.shape for t in transforms[::2]] == [(20, 3)] * 2
