"""Federated fuzzy c-means (ffcm-avg1, ffcm-avg2) through the client and the strategy (paper 001)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ask_client

from fedcluster.client.respond import BAD_INPUT
from fedcluster.config import ConfigError, RunConfig
from fedcluster.client.memory import InMemoryFederation
from fedcluster.messages import ClientSummary, validate_reply
from fedcluster.config import build_strategy
from fedcluster.methods.ffcm.client import FUZZY
from fedcluster.methods.ffcm.strategy import FederatedFuzzyCMeans
from fedcluster.metrics import centre_distance

CASE1_MEANS = np.array([[-2.0, -2.0], [0.0, 0.0], [2.0, 2.0]])
#: The paper does not state case 1's spread; its Table 2 gives the central clustering a
#: within-cluster SSE per point and dimension of 0.3120, which these Gaussians reach at
#: a standard deviation of about 0.56 (0.299 at 0.55, 0.310 at 0.56, 0.320 at 0.57).
CASE1_SIGMA = 0.56


def case1_parts(seed: int) -> list[np.ndarray]:
    """Paper 001, case 1: three clients of 999 points, 333 from each of the three Gaussians."""
    rng = np.random.default_rng(seed)
    return [np.concatenate([m + CASE1_SIGMA * rng.standard_normal((333, 2)) for m in CASE1_MEANS])
            for _ in range(3)]


def test_client_step_hand_case():
    # The hand case of test_numerics_fuzzy (centres (0, 2), points 0.5, 1, 3, m = 2), every
    # point twice so that each crisp cluster has the two rows the privacy floor needs:
    # the same centres, twice the supports, counts and sse.
    reply = ask_client(np.array([[0.5], [1.0], [3.0], [0.5], [1.0], [3.0]]), FUZZY,
                {"fuzzifier": 2.0, "chunk-size": 2, "device": "cpu"}, np.array([[0.0], [2.0]]))
    summary = validate_reply(reply.summary, k=2, dim=1, expect=("centroids", "weights", "counts", "sse"))
    assert summary.n == 6
    np.testing.assert_allclose(summary.centroids, [[0.685 / 1.07], [2.685 / 1.07]], rtol=1e-14)
    np.testing.assert_allclose(summary.weights, [2.14, 2.14], rtol=1e-14)
    np.testing.assert_array_equal(summary.counts, [4.0, 2.0])
    assert summary.sse == pytest.approx(4.5, rel=1e-15)


def test_client_withholds_a_centre_of_one_crisp_row():
    # 3.0 is the only row nearest centre 2: that centre goes back as given, with support
    # and count 0; the other is the fuzzy mean as usual.
    reply = ask_client(np.array([[0.4], [0.5], [0.6], [3.0]]), FUZZY,
                {"fuzzifier": 2.0, "chunk-size": 2, "device": "cpu"}, np.array([[0.0], [2.0]]))
    summary = validate_reply(reply.summary, k=2, dim=1, expect=("centroids", "weights", "counts", "sse"))
    assert summary.centroids[1, 0] == 2.0 and summary.weights[1] == 0 and summary.counts[1] == 0
    assert summary.counts[0] == 3 and summary.weights[0] > 0 and summary.centroids[0, 0] != 0


@pytest.mark.parametrize("config", [
    {"fuzzifier": 1.0, "chunk-size": 8},
    {"fuzzifier": "2", "chunk-size": 8},
    {"chunk-size": 8},
])
def test_bad_fuzzifier_gets_an_error_reply(config):
    reply = ask_client(np.array([[0.0], [0.2], [0.8], [1.0]]), FUZZY, config, np.array([[0.0], [1.0]]))
    assert reply.summary is None and reply.error.startswith(f"error reply (code {BAD_INPUT}): ")
    assert "fuzzifier" in reply.error


def summaries() -> list[ClientSummary]:
    return [
        ClientSummary(n=4, centroids=np.array([[0.0], [10.0]]), weights=np.array([1.0, 3.0]),
                      counts=np.array([2.0, 2.0]), sse=1.0),
        ClientSummary(n=4, centroids=np.array([[2.0], [14.0]]), weights=np.array([3.0, 1.0]),
                      counts=np.array([2.0, 2.0]), sse=1.0),
    ]


def test_avg1_is_the_support_weighted_mean():
    # Eq. 8: c_0 = (1 * 0 + 3 * 2) / 4 = 1.5, c_1 = (3 * 10 + 1 * 14) / 4 = 11.
    strategy = FederatedFuzzyCMeans(2, algorithm="ffcm-avg1")
    new = strategy.aggregate(np.array([[1.0], [12.0]]), summaries())
    np.testing.assert_allclose(new, [[1.5], [11.0]], rtol=1e-15)


def test_avg2_is_kmeans_over_all_local_centres_matched_to_the_current_ones():
    # Eq. 9: 2-means over {0, 10, 2, 14} is {1, 12}; the current centres (13, -1) order
    # them (12, 1). The supports play no part.
    strategy = FederatedFuzzyCMeans(2, algorithm="ffcm-avg2")
    new = strategy.aggregate(np.array([[13.0], [-1.0]]), summaries())
    np.testing.assert_allclose(new, [[12.0], [1.0]], rtol=1e-15)


def test_movement_is_the_papers_sum_of_distances():
    strategy = FederatedFuzzyCMeans(2)
    assert strategy.movement(np.array([[3.0, 4.0], [0.0, 1.0]]), np.zeros((2, 2))) == pytest.approx(6.0)


@pytest.mark.parametrize("name", ["ffcm-avg1", "ffcm-avg2"])
def test_from_config(name):
    strategy = build_strategy(RunConfig.from_mapping(
        {"algorithm": name, "k": 3, "fuzzifier": 1.5, "init": "random", "tol": 0.01}))
    assert isinstance(strategy, FederatedFuzzyCMeans)
    assert strategy.algorithm == name and strategy.averaging == name[-4:]
    assert (strategy.fuzzifier, strategy.init, strategy.tol) == (1.5, "random", 0.01)
    assert strategy.train_settings() == {"fuzzifier": 1.5}


def test_bad_parameters_are_refused():
    with pytest.raises(ConfigError, match="'algorithm': 'ffcm-avg3' .*allowed: one of 'ffcm-avg1', "
                       "'ffcm-avg2'"):
        FederatedFuzzyCMeans(2, algorithm="ffcm-avg3")
    with pytest.raises(ConfigError, match="'fuzzifier': 1.0 .*allowed: number > 1.0"):
        FederatedFuzzyCMeans(2, fuzzifier=1.0)


@pytest.mark.parametrize("averaging", ["avg1", "avg2"])
def test_case1_recovers_the_three_centres(averaging):
    parts = case1_parts(0)
    result = FederatedFuzzyCMeans(3, algorithm=f"ffcm-{averaging}", init="random", seed=0,
                                  num_server_rounds=100, tol=1e-4).fit(InMemoryFederation(parts))
    # Both recover every centre to within 0.04 (0.039 for either averaging, random start).
    assert result.converged and result.rounds < 30
    assert centre_distance(result.centroids, CASE1_MEANS) < 0.06
    errors = np.sort(np.linalg.norm(result.centroids[:, None] - CASE1_MEANS[None], axis=2).min(axis=0))
    assert errors[-1] < 0.05
    # The score is the crisp k-means score of the final centres over all points.
    X = np.concatenate(parts)
    d2 = ((X[:, None, :] - result.centroids[None]) ** 2).sum(axis=2).min(axis=1)
    assert result.score == pytest.approx(d2.mean(), rel=1e-12)
    train = [r for r in result.history if r.phase == "train"]
    assert train[-1].movement < 1e-4 <= min(r.movement for r in train[:-1])


def test_tol_zero_runs_every_round():
    result = FederatedFuzzyCMeans(3, algorithm="ffcm-avg2", init="random", seed=1,
                                  num_server_rounds=4, tol=0.0).fit(InMemoryFederation(case1_parts(1)))
    assert result.rounds == 4 and not result.converged
