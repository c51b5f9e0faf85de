"""Federated standardisation and the choice of k: summaries only, and the same numbers as pooled data."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest

from helpers import altered_replies, ask_client, messages, save_parts
from fedcluster import FederatedKMeans, select_k
from fedcluster.client.app import build_client_app
from fedcluster.config import ConfigError, RunConfig
from fedcluster.federation.base import RunFailed
from fedcluster.server.flower import FlowerFederation
from fedcluster.client.memory import InMemoryFederation
from fedcluster.messages import MOMENTS, SILHOUETTE, ClientSummary, Request, validate_reply
from fedcluster.config import build_strategy
from fedcluster.numerics.moments import combine_moments, farthest_from_chord, local_moments
from fedcluster.preprocessing import federated_standardization, fit_method
from fedcluster.selection import choose, KRow, parse_k_range, select_over
from fedcluster.server.artifacts import decode_model, encode_model, read_model, write_run
from harness.inprocess import InProcessGrid


def blobs(seed: int = 0, clients: int = 5, per_blob: int = 150):
    """Four separated blobs whose features differ in scale by 1e3 and in offset by 1e6."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0, 0], [12, 0], [0, 12], [12, 12]], dtype=np.float64)
    X = np.concatenate([c + rng.normal(size=(per_blob, 2)) for c in centres])
    X = X * np.array([1.0, 1e3]) + np.array([1e6, -5.0])
    X = X[rng.permutation(len(X))]
    return X, np.array_split(X, clients)


# -- the moments ---------------------------------------------------------------------------

def test_combined_moments_equal_numpys_mean_and_std_of_the_pooled_rows():
    X, parts = blobs()
    uneven = [X[:7], X[7:300], X[300:301 + 3], X[304:]]
    for split in (parts, uneven):
        combined = combine_moments([local_moments(p) for p in split])
        assert combined.n == len(X)
        np.testing.assert_allclose(combined.mean, X.mean(axis=0), rtol=1e-13)
        np.testing.assert_allclose(combined.std, X.std(axis=0), rtol=1e-11)


def test_chans_combination_keeps_the_digits_that_the_raw_second_moment_loses():
    rng = np.random.default_rng(1)
    X = 1e9 + rng.normal(size=(4000, 1))  # spread 1 around a mean of 1e9
    parts = np.array_split(X, 8)
    combined = combine_moments([local_moments(p) for p in parts])
    np.testing.assert_allclose(combined.std, X.std(axis=0), rtol=1e-6)
    naive = math.sqrt(max(0.0, float((X ** 2).mean() - X.mean() ** 2)))
    assert abs(naive - float(X.std())) > 1e-3  # what E[x^2] - E[x]^2 would have given


def test_federated_standardisation_over_the_clients_and_a_constant_feature(flwr_log):
    X, parts = blobs()
    parts = [np.column_stack([p, np.full(len(p), 3.5)]) for p in parts]
    strategy = build_strategy(RunConfig(k=4))
    s = federated_standardization(strategy, InMemoryFederation(parts))
    pooled = np.concatenate(parts)
    np.testing.assert_allclose(s.shift, pooled.mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(s.scale[:2], pooled.std(axis=0)[:2], rtol=1e-11)
    assert s.scale[2] == 1.0 and s.constant == (2,) and s.n == len(pooled)
    assert "feature(s) [2] are constant" in messages(flwr_log)


def test_a_client_below_the_floor_answers_the_moments_request_with_an_error():
    X, _ = blobs()
    answer = ask_client(X[:4], MOMENTS, {"min-cluster-size": 5})
    assert answer.error and "4 rows, fewer than min-cluster-size 5" in answer.error
    # Two rows' mean and std are the two rows: the moments need three whatever p.
    answer = ask_client(X[:2], MOMENTS, {"min-cluster-size": 2})
    assert answer.error and "fewer than min-cluster-size 3" in answer.error
    ok = ask_client(X[:3], MOMENTS, {"min-cluster-size": 2}).summary
    assert ok.n == 3 and ok.centroids is None and ok.counts is None


def test_the_privacy_check_refuses_moments_of_fewer_rows_than_the_client_holds():
    from fedcluster.local.floor import PrivacyFloorError, check_reply

    X, _ = blobs()
    moments = local_moments(X[:1])  # the first row itself, declared as 10 rows
    with pytest.raises(PrivacyFloorError, match="declares 10 rows, but the client holds 50"):
        check_reply(X[:50], ClientSummary(n=10, mean=moments.mean, std=moments.std), 2, None)
    with pytest.raises(PrivacyFloorError, match="declares 3 rows"):
        check_reply(X[:50], ClientSummary(n=3, sse=1.0, silhouette=0.5), 2, None)


def moments_damage(mode: str):
    def change(summary: ClientSummary, request, node_config) -> ClientSummary:
        if request.kind != MOMENTS:
            return summary
        return {
            "nan": lambda: dataclasses.replace(summary, mean=np.full_like(summary.mean, np.nan)),
            "negative-count": lambda: dataclasses.replace(summary, n=-summary.n),
            "fractional-count": lambda: dataclasses.replace(summary, n=summary.n + 0.5),
            "wrong-dim": lambda: dataclasses.replace(summary, mean=np.append(summary.mean, 1.0),
                                                     std=np.append(summary.std, 1.0)),
            "huge": lambda: dataclasses.replace(summary, std=np.full_like(summary.std, 1e300)),
            "negative-std": lambda: dataclasses.replace(summary, std=-summary.std),
        }[mode]()
    return change


@pytest.mark.parametrize(("mode", "reason"), [
    ("nan", "'mean' has non-finite values"),
    ("negative-count", "'num-examples' must be a positive integer"),
    ("fractional-count", "'num-examples' must be a positive integer"),
    ("wrong-dim", "'mean' has shape (3,), expected (2,)"),
    ("huge", "'std' has values beyond +-1e+100"),
    ("negative-std", "'std' has negative values"),
])
def test_a_hostile_moments_reply_is_rejected_by_name_and_honest_clients_decide(flwr_log, mode,
                                                                               reason):
    X, parts = blobs()
    federation = InMemoryFederation(parts, responders={2: altered_replies(moments_damage(mode))})
    s = federated_standardization(build_strategy(RunConfig(k=4)), federation)
    assert f"rejected node 2: malformed reply: {reason}" in messages(flwr_log)
    assert sum("rejected node" in r.getMessage() for r in flwr_log) == 1
    honest = np.concatenate([p for i, p in enumerate(parts) if i != 2])
    np.testing.assert_allclose(s.shift, honest.mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(s.scale, honest.std(axis=0), rtol=1e-11)


def test_a_run_fails_in_one_line_when_too_few_clients_send_their_moments():
    X, parts = blobs()
    broken = altered_replies(moments_damage("nan"))
    federation = InMemoryFederation(parts, responders={i: broken for i in range(3)})
    with pytest.raises(RunFailed, match=r"standardisation \(moments\): 2 of 5 clients answered"):
        fit_method(RunConfig(k=4, standardize=True), federation)


# -- the transform on every request ---------------------------------------------------------

def lloyd(X, start, rounds):
    centroids = start.copy()
    for _ in range(rounds):
        labels = np.argmin(((X[:, None, :] - centroids[None]) ** 2).sum(axis=2), axis=1)
        centroids = np.array([X[labels == j].mean(axis=0) if np.any(labels == j) else centroids[j]
                              for j in range(len(centroids))])
    return centroids


def test_a_standardised_run_equals_lloyd_on_the_pooled_standardised_rows(tmp_path):
    X, parts = blobs()
    Z = (X - X.mean(axis=0)) / X.std(axis=0)
    start = Z[np.random.default_rng(3).choice(len(Z), 4, replace=False)] + 0.05
    np.save(tmp_path / "start.npy", start)
    model = FederatedKMeans(4, algorithm="dwf", init=str(tmp_path / "start.npy"), local_steps=1,
                            lr=1.0, tol=0.0, max_iter=6, standardize=True).fit(parts)
    expected = lloyd(Z, start, 6)
    np.testing.assert_allclose(model.result_.centroids, expected, rtol=1e-9, atol=1e-9)
    # Reported back in the data's units, and used in them by predict and score.
    np.testing.assert_allclose(model.cluster_centers_, expected * X.std(axis=0) + X.mean(axis=0),
                               rtol=1e-9)
    labels = np.argmin(((Z[:, None, :] - expected[None]) ** 2).sum(axis=2), axis=1)
    np.testing.assert_array_equal(model.predict(X), labels)
    assert model.score(X) == pytest.approx(-model.inertia_, rel=1e-9)


def test_the_raw_run_of_the_same_data_is_ruled_by_the_large_feature():
    X, parts = blobs()
    raw = FederatedKMeans(4, algorithm="dwf", random_state=1).fit(parts)
    standardised = FederatedKMeans(4, algorithm="dwf", random_state=1, standardize=True).fit(parts)
    truth = np.repeat(np.arange(4), 150)  # not in X's order; compare partitions by purity
    del truth
    sizes = lambda m: sorted(np.bincount(m.predict(X), minlength=4).tolist())  # noqa: E731
    assert sizes(standardised) == [150, 150, 150, 150]
    assert raw.result_.shift is None and standardised.result_.shift is not None


def test_the_client_checks_the_transform_a_request_carries():
    X, _ = blobs()
    for shift, scale, reason in ((np.zeros(2), np.array([1.0, 0.0]), "scale has values <= 0"),
                                 (np.zeros(3), np.ones(3), "dimension 2, the run's transform 3"),
                                 (np.array([np.nan, 0]), np.ones(2), "shift has non-finite")):
        answer = InMemoryFederation([X]).ask(
            Request(MOMENTS, {}, None, shift=shift, scale=scale), [0], 1.0)[0]
        assert answer.error and reason in answer.error, answer


def test_flower_messages_and_the_in_memory_federation_give_the_same_standardised_run(tmp_path):
    X, parts = blobs()
    config = RunConfig(k=4, standardize=True, seed=2)
    memory = fit_method(config, InMemoryFederation(parts))
    grid = InProcessGrid(build_client_app(), save_parts(tmp_path / "parts", parts))
    flower = fit_method(config, FlowerFederation(grid))
    np.testing.assert_array_equal(flower.centroids, memory.centroids)
    np.testing.assert_array_equal(flower.shift, memory.shift)


# -- the model file ---------------------------------------------------------------------------

def test_a_standardised_model_file_keeps_its_transform_and_old_layouts_still_read(tmp_path):
    X, parts = blobs()
    result = FederatedKMeans(4, algorithm="dwf", standardize=True).fit(parts).result_
    data = encode_model(result)
    back = decode_model(data)
    np.testing.assert_array_equal(back.shift, result.shift)
    np.testing.assert_array_equal(back.original_centroids, result.original_centroids)
    plain = FederatedKMeans(4, algorithm="dwf").fit(parts).result_
    assert decode_model(encode_model(plain)).shift is None
    # Version 2 marks the transform; an older reader refuses it instead of misreading it.
    from fedcluster.proto import cluster_model_pb2 as pb

    envelope = pb.ModelFile()
    envelope.ParseFromString(data)
    assert envelope.format_version == 2
    assert pb.ModelFile.FromString(encode_model(plain)).format_version == 1
    envelope.format_version = 1
    with pytest.raises(Exception, match="f.pb: damaged model file: format version 1 with a "
                                        "standardisation"):
        decode_model(envelope.SerializeToString(deterministic=True), source="f.pb")
    paths = write_run(result, tmp_path)
    shown = subprocess.run([sys.executable, "-m", "fedcluster.cli", "inspect", str(paths["model"]),
                            "--json"], capture_output=True, text=True, check=True).stdout
    data = json.loads(shown)
    np.testing.assert_allclose(data["original_centroids"], result.original_centroids)
    assert set(data["standardization"]) == {"shift", "scale"}
    assert np.isfinite(read_model(paths["model"]).scale).all()


# -- choosing k -------------------------------------------------------------------------------

def brute_silhouette(X, centroids):
    d = np.sqrt(((X[:, None, :] - centroids[None]) ** 2).sum(axis=2))
    d.sort(axis=1)
    a, b = d[:, 0], d[:, 1]
    return np.where(np.maximum(a, b) > 0, (b - a) / np.where(np.maximum(a, b) > 0,
                                                              np.maximum(a, b), 1), 0.0)


def test_the_silhouette_sums_equal_a_brute_force_simplified_silhouette():
    X, parts = blobs()
    centroids = np.random.default_rng(4).normal(size=(5, 2)) * np.array([5, 5e3]) + X.mean(axis=0)
    centroids[4] = centroids[3]  # a duplicate centre: a = b for its rows, s = 0
    total, n = 0.0, 0
    for part in parts:
        summary = validate_reply(ask_client(part, SILHOUETTE, {"k": 5, "chunk-size": 64,
                                                                "min-cluster-size": 2},
                                            centroids).summary, expect=("sse", "silhouette"))
        np.testing.assert_allclose(summary.silhouette, brute_silhouette(part, centroids).sum(),
                                   rtol=1e-10, atol=1e-9)
        total, n = total + summary.silhouette, n + summary.n
    assert total / n == pytest.approx(brute_silhouette(X, centroids).mean(), rel=1e-10)
    answer = ask_client(X, SILHOUETTE, {"k": 4, "chunk-size": 64}, centroids)
    assert answer.error and "carries 5 centroids" in answer.error
    answer = ask_client(X, SILHOUETTE, {"k": 1, "chunk-size": 64}, centroids[:1])
    assert answer.error and "'k' has an invalid value 1" in answer.error


@pytest.mark.parametrize("criterion", ["silhouette", "elbow"])
def test_choosing_k_on_four_blobs_picks_four(criterion):
    X, parts = blobs()
    selection = select_k(parts, "2:8", criterion, standardize=True, random_state=0)
    assert selection.k == 4 and [r.k for r in selection.rows] == list(range(2, 9))
    assert selection.model.n_clusters == 4 and selection.model.cluster_centers_.shape == (4, 2)
    sse = [r.sse for r in selection.rows]
    assert sse[2] < 0.2 * sse[1]  # the curve drops at 4
    best = max(selection.rows, key=lambda r: r.silhouette)
    assert best.k == 4 and best.silhouette > 0.8
    assert "<- chosen" in selection.table()
    # The fitted model is the chosen run's: the same as fitting k = 4 alone.
    alone = FederatedKMeans(n_clusters=4, standardize=True, random_state=0).fit(parts)
    np.testing.assert_array_equal(selection.model.cluster_centers_, alone.cluster_centers_)


def test_the_moments_are_asked_once_for_all_ks(flwr_log):
    X, parts = blobs()
    kinds = []
    federation = InMemoryFederation(parts)
    ask = federation.ask
    federation.ask = lambda request, nodes, timeout: kinds.append(request.kind) or ask(
        request, nodes, timeout)
    select_over(federation, RunConfig(standardize=True, k=4), [2, 3, 4])
    assert kinds.count(MOMENTS) == 1 and kinds.count(SILHOUETTE) == 3


def test_k_ranges_and_criteria_are_checked_and_named():
    assert parse_k_range("2:5") == [2, 3, 4, 5]
    assert parse_k_range("2:10:4") == [2, 6, 10]
    assert parse_k_range("8,3,5") == [3, 5, 8]
    for bad in ("5:2", "a:b", "0:3", "2,2", "1:500", "2:3:0"):
        with pytest.raises(ConfigError, match=re.escape(repr(bad))):
            parse_k_range(bad)
    X, parts = blobs()
    with pytest.raises(ConfigError, match="needs every k >= 2"):
        select_k(parts, "1:4")
    with pytest.raises(ConfigError, match="at least 3 values of k"):
        select_k(parts, "2:3", "elbow")
    with pytest.raises(ConfigError, match="'knee'"):
        select_k(parts, "2:4", "knee")
    with pytest.raises(ConfigError, match="not an 'n_clusters' parameter"):
        select_k(parts, "2:4", n_clusters=3)
    with pytest.raises(ConfigError, match="'backend': 'ray'"):
        select_k(parts, "2:4", backend="ray")


def test_the_elbow_is_the_point_farthest_from_the_chord():
    assert farthest_from_chord([1, 2, 3, 4, 5], [100, 30, 10, 8, 6]) == 1
    assert farthest_from_chord([1, 2, 3], [3, 2, 1]) == 0  # a straight line has no elbow
    rows = [KRow(k, sse, 10, s, 1, True) for k, sse, s in ((2, 9.0, 0.5), (3, 2.0, 0.7),
                                                           (4, 1.5, 0.7), (5, 1.2, 0.6))]
    assert choose(rows, "silhouette") == 3  # a tie goes to the smaller k
    assert choose(rows, "elbow") == 3


def test_a_failed_k_fails_the_selection_naming_it():
    # 12 rows over 5 clients (3, 3, 2, 2, 2 rows) and p = 3: three clients have fewer than p rows.
    X, parts = blobs(per_blob=3)
    with pytest.raises(RunFailed, match=r"^k = 2: init \(local k-means\): 2 of 5 clients answered"):
        select_k(parts, "2:3", min_cluster_size=3)


# -- through real Flower ------------------------------------------------------------------

def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "fedcluster.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_simulate_standardize_through_flower(tmp_path):
    done = run_cli("simulate", "--dataset", "blobs", "--blobs-centers", "4", "--k", "4",
                   "--clients", "4", "--standardize", "--out", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "standardisation (moments): 2 features of" in done.stderr
    model = read_model(tmp_path / "out" / "model.pb")
    assert model.shift is not None and model.scale.shape == (2,)
    assert "standardised: centroids and score in units of (x - shift) / scale" in done.stdout


@pytest.mark.slow
def test_simulate_k_range_through_flower(tmp_path):
    X, _ = blobs()  # well separated once standardised (the blobs dataset's 4 centres may touch)
    np.save(tmp_path / "four.npy", X)
    done = run_cli("simulate", "--dataset", "four.npy", "--clients", "4", "--standardize",
                   "--k-range", "2:6", "--select", "silhouette", "--out", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "chosen k = 4 (silhouette)" in done.stdout, done.stdout
    table = (tmp_path / "out" / "k-selection.csv").read_text().splitlines()
    assert table[0] == "k,sse,score,silhouette,rounds,converged,chosen" and len(table) == 6
    assert read_model(tmp_path / "out" / "model.pb").n_clusters == 4
    bad = run_cli("simulate", "--k-range", "5:2", cwd=tmp_path)
    assert bad.returncode == 2 and "invalid k range '5:2'" in bad.stderr
