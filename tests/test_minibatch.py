"""Federated mini-batch k-means (fedkmeans) through the client and the strategy (paper 003)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import ask_client, messages

from fedcluster.client.respond import BAD_INPUT
from fedcluster.config import RunConfig
from fedcluster.client.memory import InMemoryFederation
from fedcluster.messages import ClientSummary, validate_reply
from fedcluster.config import build_strategy
from fedcluster.methods.fedkmeans.client import MINIBATCH
from fedcluster.methods.fedkmeans.strategy import FederatedMiniBatchKMeans

CONFIG = {"local-steps": 1, "batch-size": 0, "client-lr": 0.5, "seed": 3, "chunk-size": 2,
          "device": "cpu"}
TRIEBE_MEANS = np.arange(1.0, 6.0)


def triebe_parts(seed: int) -> list[np.ndarray]:
    """Paper 003, section 2.1: 50 clients of 10 1-D points, each from one of 5 Gaussians.

    Means 1..5, scale 0.2; the clients cycle through the Gaussians, 10 per
    Gaussian, as in the authors' data generator.
    """
    rng = np.random.default_rng(seed)
    return [TRIEBE_MEANS[i % 5] + 0.2 * rng.standard_normal((10, 1)) for i in range(50)]


def test_client_step_hand_case():
    # Full batch, beta = 0.5 from (0, 10): cluster means (1, 11), so (0.5, 10.5);
    # counts (2, 2); squared distances to the start 0 + 4 + 0 + 4.
    reply = ask_client(np.array([[0.0], [2.0], [10.0], [12.0]]), MINIBATCH, CONFIG, np.array([[0.0], [10.0]]))
    summary = validate_reply(reply.summary, k=2, dim=1, expect=("centroids", "counts", "sse"))
    np.testing.assert_allclose(summary.centroids.ravel(), [0.5, 10.5], rtol=1e-15)
    np.testing.assert_array_equal(summary.counts, [2.0, 2.0])
    assert summary.sse == 8.0 and summary.n == 4


@pytest.mark.parametrize("key, value", [
    ("client-lr", 0.0), ("client-lr", 1.5), ("batch-size", -1), ("local-steps", 0), ("seed", None),
])
def test_bad_settings_get_an_error_reply(key, value):
    config = {k: v for k, v in CONFIG.items() if k != key}
    if value is not None:
        config[key] = value
    reply = ask_client(np.array([[0.0], [1.0]]), MINIBATCH, config, np.array([[0.0], [1.0]]))
    assert reply.summary is None and reply.error.startswith(f"error reply (code {BAD_INPUT}): ")
    assert key in reply.error


def replies() -> list[ClientSummary]:
    # Gamma* = (2 * 1 + 2 * 3) / 4 = 2 for cluster 0 and (0 * 10 + 2 * 12) / 2 = 12 for cluster 1.
    return [
        ClientSummary(n=2, centroids=np.array([[1.0], [10.0]]), counts=np.array([2.0, 0.0]), sse=1.0),
        ClientSummary(n=4, centroids=np.array([[3.0], [12.0]]), counts=np.array([2.0, 2.0]), sse=1.0),
    ]


def test_server_step_with_alpha():
    # Gamma_1 = Gamma_0 + alpha (Gamma* - Gamma_0) = (0, 10) + 0.5 (2, 2) = (1, 11).
    strategy = FederatedMiniBatchKMeans(2, lr=0.5, momentum=0.0)
    start = np.array([[0.0], [10.0]])
    strategy.begin(start)
    np.testing.assert_allclose(strategy.aggregate(start, replies()), [[1.0], [11.0]], rtol=1e-15)


def test_server_step_with_the_papers_alpha_pair():
    # alpha = (1, 0.5): v_t = 0.5 v_{t-1} + 0.5 * 1 * (Gamma* - Gamma_{t-1}), Gamma_t = Gamma_{t-1} + v_t.
    # Round 1: v = 0.5 (2, 2) = (1, 1), Gamma = (1, 11).
    # Round 2: v = 0.5 (1, 1) + 0.5 (1, 1) = (1, 1), Gamma = (2, 12).
    # Round 3: v = 0.5 (1, 1) + 0.5 (0, 0) = (0.5, 0.5), Gamma = (2.5, 12.5).
    strategy = FederatedMiniBatchKMeans(2, lr=1.0, momentum=0.5)
    current = np.array([[0.0], [10.0]])
    strategy.begin(current)
    for expected in ([1.0, 11.0], [2.0, 12.0], [2.5, 12.5]):
        current = strategy.aggregate(current, replies())
        np.testing.assert_allclose(current.ravel(), expected, rtol=1e-15)


def test_uncounted_cluster_keeps_its_centroid():
    strategy = FederatedMiniBatchKMeans(2, lr=1.0)
    start = np.array([[0.0], [10.0]])
    strategy.begin(start)
    only_first = [replies()[0]]
    np.testing.assert_allclose(strategy.aggregate(start, only_first), [[1.0], [10.0]], rtol=1e-15)


def test_starved_cluster_is_reseeded_next_to_the_largest(tmp_path, flwr_log):
    # Clients {0, 2} and {10, 10.5, 13.5, 14}; start (1, 12, 100). With beta = alpha = 1
    # the centroids stay (1, 12, 100) and cluster 2 holds no point: 0 is below 1 % of
    # the mean cluster size, 0.01 * 6 / 3, in rounds 1 and 2, so after round 2 (patience 2)
    # it moves next to the largest cluster (cluster 1, 4 points, at 12) at the RMS distance
    # to the nearest centroid, sqrt((1 + 1 + 4 + 2.25 + 2.25 + 4) / 6) = sqrt(14.5 / 6). In
    # round 3 it takes the two points on its side of 12 (two: the privacy floor withholds a
    # cluster of one row), and cluster 1 keeps the other two.
    parts = [np.array([[0.0], [2.0]]), np.array([[10.0], [10.5], [13.5], [14.0]])]
    np.save(tmp_path / "start.npy", np.array([[1.0], [12.0], [100.0]]))
    federation = InMemoryFederation(parts)

    def run(rounds):
        return FederatedMiniBatchKMeans(3, init=str(tmp_path / "start.npy"), tol=0.0, num_server_rounds=rounds,
                                        reseed_patience=2, seed=4).fit(federation)

    one = run(1)
    np.testing.assert_array_equal(one.centroids.ravel(), [1.0, 12.0, 100.0])
    two = run(2)
    assert two.centroids[:2].ravel().tolist() == [1.0, 12.0]
    assert abs(two.centroids[2, 0] - 12.0) == pytest.approx(math.sqrt(14.5 / 6), rel=1e-14)
    assert "re-seeded cluster(s) [2] after 2 small rounds" in messages(flwr_log)
    three = run(3)
    np.testing.assert_allclose(sorted(three.centroids.ravel()), [1.0, 10.25, 13.75], rtol=1e-15)
    assert (three.centroids[2, 0] > 12.0) == (two.centroids[2, 0] > 12.0)
    never = FederatedMiniBatchKMeans(3, init=str(tmp_path / "start.npy"), tol=0.0, num_server_rounds=3,
                                     reseed_patience=2, reseed_fraction=0.0).fit(federation)
    assert never.centroids[2, 0] == 100.0


def test_from_config_reads_every_setting():
    strategy = build_strategy(RunConfig.from_mapping({
        "algorithm": "fedkmeans", "k": 5, "lr": 0.8, "momentum": 0.5, "client-lr": 0.2,
        "local-steps": 5, "batch-size": 4, "reseed-fraction": 0.02, "reseed-patience": 7,
        "participation": 0.1, "init": "random"}))
    assert isinstance(strategy, FederatedMiniBatchKMeans) and strategy.algorithm == "fedkmeans"
    assert (strategy.lr, strategy.momentum, strategy.client_lr, strategy.local_steps, strategy.batch_size,
            strategy.reseed_fraction, strategy.reseed_patience, strategy.participation) == (
        0.8, 0.5, 0.2, 5, 4, 0.02, 7, 0.1)
    settings = strategy.train_settings()
    assert {k: settings[k] for k in ("local-steps", "batch-size", "client-lr")} == {
        "local-steps": 5, "batch-size": 4, "client-lr": 0.2}
    assert settings["seed"] != strategy.train_settings()["seed"]


def test_bad_parameters_are_refused():
    for kwargs in ({"lr": 0.0}, {"momentum": 1.0}, {"client_lr": 2.0}, {"batch_size": -1},
                   {"reseed_fraction": 1.0}, {"reseed_patience": 0}):
        with pytest.raises(ValueError):
            FederatedMiniBatchKMeans(2, **kwargs)


def triebe_run(seed, **kwargs):
    federation = InMemoryFederation(triebe_parts(seed))
    # The paper's setting: C = 0.1, E = 1, B = infinity, T = 200, alpha = (1, 0.5), beta = 1,
    # random start.
    options = dict(init="random", participation=0.1, local_steps=1, batch_size=0, num_server_rounds=200, tol=0.0,
                   lr=1.0, momentum=0.5, client_lr=1.0, seed=seed)
    return FederatedMiniBatchKMeans(5, **{**options, **kwargs}).fit(federation)


def centre_errors(centroids):
    """Distance of each true mean to the centroid matched to it (one-to-one)."""
    from scipy.optimize import linear_sum_assignment

    cost = np.abs(centroids.ravel()[:, None] - TRIEBE_MEANS[None, :])
    rows, cols = linear_sum_assignment(cost)
    return cost[rows, cols]


def test_triebe_data_recovers_the_five_clusters():
    result = triebe_run(0, n_init=3)
    train = [r for r in result.history if r.phase == "train"]
    assert len(train) == 600 and all(r.clients_sampled == 5 for r in train)
    # Every mean gets its own centroid, within a quarter of the spacing of the means
    # (seed 0: errors 0.014 to 0.16); the final centroids carry the last rounds'
    # sampling noise (5 clients of 10 points each, momentum 0.5).
    errors = centre_errors(result.centroids)
    assert errors.max() < 0.25
    X = np.concatenate(triebe_parts(0))
    d2 = ((X[:, None, :] - result.centroids[None]) ** 2).sum(axis=2).min(axis=1)
    assert result.score == pytest.approx(d2.mean(), rel=1e-12) and result.score < 0.05


def test_runs_are_reproducible():
    a = triebe_run(1, num_server_rounds=20, batch_size=3, local_steps=2, client_lr=0.5)
    b = triebe_run(1, num_server_rounds=20, batch_size=3, local_steps=2, client_lr=0.5)
    np.testing.assert_array_equal(a.centroids, b.centroids)
    assert [r.participants for r in a.history] == [r.participants for r in b.history]


@pytest.mark.slow
def test_triebe_data_over_twenty_seeds():
    worst = np.array([triebe_run(seed, n_init=3).centroids for seed in range(20)])
    errors = np.array([centre_errors(c).max() for c in worst])
    # 19 of 20 seeds put every centroid within 0.25 of its mean (median largest error 0.09).
    assert np.sum(errors < 0.25) >= 19
    assert np.median(errors) < 0.12


def test_default_reseeding_leaves_a_hundred_separated_clusters_alone():
    # 100 well-separated blobs (sd 0.01 in [-1, 1]^2) of 30 points and 100 uniform noise
    # points over 10 IID clients. DWF converges; fedkmeans from the same start, run past
    # its re-seeding patience (tol 0, 45 rounds), must end within 1 % of DWF's score. The
    # paper's literal rule, 1 % of all points, would call the clusters with fewer than
    # 31 points small (42 of DWF's 100 here) and re-seed them every 20 rounds.
    from fedcluster.data import load_dataset, partition_indices

    data = load_dataset("blobs", seed=0, centers=100, n_samples=3000, cluster_std=0.01)
    parts = partition_indices(len(data.X), 10, "iid", seed=0)
    federation = InMemoryFederation([data.X[p] for p in parts])

    def fit(**settings):
        return build_strategy(RunConfig.from_mapping({"k": 100, "seed": 0, **settings})).fit(federation)

    dwf = fit(algorithm="dwf")
    assert dwf.converged
    assert np.sum(dwf.counts < 0.01 * len(data.X)) >= 30
    fedkmeans = fit(algorithm="fedkmeans", tol=0.0, **{"num-server-rounds": 45})
    assert fedkmeans.rounds == 45
    assert fedkmeans.score <= 1.01 * dwf.score
