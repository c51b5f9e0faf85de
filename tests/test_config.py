"""Run configuration: defaults, Flower keys, and errors that name field and range."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from fedcluster.config import ConfigError, RunConfig, build_strategy

REPO = Path(__file__).resolve().parents[1]


def test_pyproject_run_config_matches_the_model_defaults():
    from fedcluster.config import flower_defaults

    flwr_config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["flwr"]["app"]["config"]
    assert flwr_config == RunConfig().to_flower(), "flower_defaults() prints the block"
    assert tomllib.loads(flower_defaults())["tool"]["flwr"]["app"]["config"] == flwr_config
    assert RunConfig.from_mapping(flwr_config) == RunConfig()


def test_kebab_and_snake_keys_are_both_accepted():
    a = RunConfig.from_mapping({"local-steps": 3, "n-init": 2})
    b = RunConfig.from_mapping({"local_steps": 3, "n_init": 2})
    assert a == b and a.local_steps == 3


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("lr", 1.5, "invalid value for 'lr': 1.5 (Input should be less than or equal to 1; "
                    "allowed: number > 0.0 and <= 1.0)"),
        ("lr", 0.0, "'lr': 0.0"),
        ("momentum", 1.0, "allowed: number >= 0.0 and < 1.0"),
        ("k", 0, "invalid value for 'k': 0 (Input should be greater than or equal to 1; allowed: integer >= 1)"),
        ("participation", 0.0, "allowed: number > 0.0 and <= 1.0"),
        ("algorithm", "fedavg", "invalid value for 'algorithm': 'fedavg'"),
        ("algorithm", "fedavg", "allowed: one of 'dwf', 'ewf', 'fkm', 'kfed', 'ffcm-avg1'"),
        ("fuzzifier", 1.0, "allowed: number > 1.0"),
        ("radius", "guess", "allowed: one of 'algorithm4', 'theoretical'"),
        ("init", "nowhere.npy", "allowed: one of local-kmeans, kfed, random, spread, private or the path of an array file"),
        ("split", "dirichlet:-1", "invalid value for 'split'"),
        ("tol", float("nan"), "invalid value for 'tol': nan (Input should be a finite number"),
        ("round-timeout", float("inf"), "invalid value for 'round-timeout': inf (Input should be a finite"),
        ("num-server-rounds", 2.5, "'num-server-rounds'"),
    ],
)
def test_invalid_values_name_the_field_and_the_allowed_range(key, value, expected):
    with pytest.raises(ConfigError) as info:
        RunConfig.from_mapping({key: value})
    assert expected in str(info.value)


def test_unknown_keys_are_refused_with_the_known_ones_listed():
    with pytest.raises(ConfigError, match=r"unknown setting 'rounds' \(known settings: .*num-server-rounds"):
        RunConfig.from_mapping({"rounds": 5})


def test_every_bad_field_is_reported_at_once():
    with pytest.raises(ConfigError) as info:
        RunConfig.from_mapping({"lr": 2.0, "k": -1})
    assert "'lr'" in str(info.value) and "'k'" in str(info.value)


def test_init_file_must_exist(tmp_path):
    path = tmp_path / "c.npy"
    path.write_bytes(b"")
    assert RunConfig.from_mapping({"init": str(path)}).init == str(path)


def test_settings_are_the_methods_own_and_leave_out_where_the_data_is():
    settings = RunConfig.from_mapping({"out-dir": "/x", "partitions-dir": "/p"}).settings()
    assert "out-dir" not in settings and "partitions-dir" not in settings
    assert settings["algorithm"] == "dwf" and settings["k"] == 15 and settings["momentum"] == 0.0
    assert "fuzzifier" not in settings
    fuzzy = RunConfig.from_mapping({"algorithm": "ffcm-avg1"}).settings()
    assert fuzzy["fuzzifier"] == 2.0 and "momentum" not in fuzzy


def test_every_method_option_is_a_config_field_declared_once():
    from typing import Literal

    from fedcluster.config import DATA_OPTIONS, RUN_OPTIONS
    from fedcluster.methods import COMMON_OPTIONS, FEATURE_CLUSTERINGS, METHODS

    fields = set(RunConfig().to_flower())
    used = set(COMMON_OPTIONS) | set(DATA_OPTIONS) | set(RUN_OPTIONS)
    # The run config narrows these to the choices the registry derives (the command line's).
    narrowed = {"feature_clustering": Literal[FEATURE_CLUSTERINGS]}
    for method in METHODS.values():
        for name, field in method.options.model_fields.items():
            if name == "algorithm":  # each model narrows it to its own names
                continue
            same = RunConfig.model_fields[name]
            assert (narrowed.get(name, field.annotation), field.default, field.metadata,
                    field.description) == \
                (same.annotation, same.default, same.metadata, same.description), (method.name, name)
        used |= set(method.own_keys)
    assert used == fields, fields - used


@pytest.mark.parametrize("algorithm", sorted(__import__("fedcluster.methods").methods.METHODS))
def test_a_strategy_built_in_python_has_the_command_lines_defaults(algorithm):
    from fedcluster.methods import METHODS

    method = METHODS[algorithm]
    assert algorithm in method.options.model_fields["algorithm"].annotation.__args__
    by_hand = method.strategy(algorithm=algorithm)
    config = RunConfig.from_mapping({"algorithm": algorithm})
    assert by_hand.settings == config.settings() == build_strategy(config).settings
    assert by_hand.algorithm == algorithm


def test_deepfecas_feature_clustering_is_a_method_that_declares_it():
    from fedcluster.methods import FEATURE_CLUSTERINGS, METHODS
    from fedcluster.methods.deepfeca.options import DeepFeCAOptions

    assert FEATURE_CLUSTERINGS == tuple(sorted(name for name, method in METHODS.items()
                                               if method.feature_clustering))
    assert FEATURE_CLUSTERINGS == ("feca", "ffcm-avg1", "ffcm-avg2", "kfed", "mavg")
    named = "one of 'feca', 'ffcm-avg1', 'ffcm-avg2', 'kfed', 'mavg'"
    with pytest.raises(ConfigError, match=f"'feature-clustering': 'dwf' .*allowed: {named}"):
        RunConfig.from_mapping({"algorithm": "deepfeca", "feature-clustering": "dwf"})
    # DeepFeCA's own model (a strategy built in Python) checks the same list.
    with pytest.raises(ConfigError, match="'feature-clustering': 'dwf' .*must be one of feca, "
                                          "ffcm-avg1, ffcm-avg2, kfed, mavg"):
        DeepFeCAOptions.from_mapping({"feature-clustering": "dwf"})
    assert DeepFeCAOptions.from_mapping({"feature-clustering": "mavg"}).feature_clustering == "mavg"


def test_a_strategy_refuses_a_bad_setting_naming_it():
    from fedcluster.methods.fedkmeans.strategy import FederatedMiniBatchKMeans
    from fedcluster.methods.fkm.strategy import GarstFederatedKMeans

    with pytest.raises(ConfigError, match=r"'client-lr': 0 .*allowed: number > 0.0 and <= 1.0"):
        FederatedMiniBatchKMeans(3, client_lr=0)
    with pytest.raises(ConfigError, match=r"unknown setting 'init'"):
        GarstFederatedKMeans(3, init="random")
    with pytest.raises(ConfigError, match=r"'algorithm': 'dwf'"):
        GarstFederatedKMeans(3, algorithm="dwf")


def test_a_client_checks_a_request_setting_with_the_servers_declaration():
    from fedcluster.messages import ProtocolError, request_option
    from fedcluster.methods.fedkmeans.options import FedKMeansOptions

    assert request_option({"client-lr": 1}, FedKMeansOptions, "client-lr") == 1.0
    for bad in (1.5, 0, float("nan")):  # out of range: the server refuses it too
        with pytest.raises(ProtocolError, match="request config 'client-lr' has an invalid value"):
            request_option({"client-lr": bad}, FedKMeansOptions, "client-lr")
        with pytest.raises(ConfigError, match="'client-lr'"):
            RunConfig.from_mapping({"client-lr": bad, "algorithm": "fedkmeans"})
    # A request's values are typed (the server's checked settings), so the client is strict.
    for bad in (True, "0.5"):
        with pytest.raises(ProtocolError, match="request config 'client-lr' has an invalid value"):
            request_option({"client-lr": bad}, FedKMeansOptions, "client-lr")
    with pytest.raises(ProtocolError, match="request config 'batch-size' has an invalid value 2.0"):
        request_option({"batch-size": 2.0}, FedKMeansOptions, "batch-size")


def test_standardize_is_refused_with_dp_or_secure_aggregation():
    for other in ({"dp": "central", "secure-aggregation": True, "data-bounds": "0:1",
                   "init": "random"},
                  {"secure-aggregation": True, "data-bounds": "0:1", "init": "random"}):
        with pytest.raises(ConfigError, match="standardize does not combine with dp or secure"):
            RunConfig.from_mapping({"standardize": True, **other})


def test_a_dp_run_may_resume(tmp_path):
    """The checkpoint holds the spent budget (tests/test_checkpoint.py resumes DP runs)."""
    config = RunConfig.from_mapping({"dp": "central", "secure-aggregation": True,
                                     "data-bounds": "0:1", "init": "random",
                                     "resume-from": str(tmp_path)})
    assert config.resume_from == str(tmp_path)


def test_standardize_is_refused_with_deepfeca():
    with pytest.raises(ConfigError, match="standardize does not combine with deepfeca"):
        RunConfig.from_mapping({"standardize": True, "algorithm": "deepfeca"})
