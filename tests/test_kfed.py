"""k-FED as a one-shot strategy, and as the start of DWF (init="kfed")."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import messages, unreadable_data

from fedcluster.config import ConfigError, RunConfig
from fedcluster.data import load_dataset, partition_indices
from fedcluster.client.memory import InMemoryFederation
from fedcluster.config import build_strategy
from fedcluster.methods.dwf.strategy import WeightedFederatedKMeans
from fedcluster.methods.kfed.strategy import KFed
from fedcluster.metrics import centre_distance
from fedcluster.strategies import RunFailed


@pytest.fixture(scope="module")
def s1_dirichlet():
    """S1 over 10 clients, Dirichlet(0.3) label skew: the setting of FeCA's Table 1."""
    data = load_dataset("s1")
    parts = partition_indices(len(data.X), 10, "dirichlet:0.3", labels=data.labels, seed=1)
    return [data.X[p] for p in parts]


def federation_of(parts):
    return InMemoryFederation(parts)


def test_one_shot_on_a_hand_case(flwr_log):
    # Clients whose local 2-means find {0, 10}, {1, 30} and {11, 31} exactly (pairs of
    # rows x -+ 0.25, so no centroid is a row): k = 3 gives 0.5, 10.5 and 30.5 whichever
    # client starts (see test_numerics_kfed), in one round.
    parts = [np.concatenate([[[a - 0.25], [a + 0.25]], [[b - 0.25], [b + 0.25]]])
             for a, b in ((0.0, 10.0), (1.0, 30.0), (11.0, 31.0))]
    result = KFed(3, k_prime=2, seed=4).fit(federation_of(parts))
    np.testing.assert_allclose(np.sort(result.centroids.ravel()), [0.5, 10.5, 30.5], atol=1e-12)
    assert (result.rounds, result.converged) == (1, True)
    [record] = result.history
    assert (record.phase, record.clients_sampled, record.clients_answered) == ("train", 3, 3)
    assert "kfed is one-shot: finished in one round with 3 of 3 clients, 3 centroids" in messages(flwr_log)


def test_recovers_s1_on_the_feca_dirichlet_setting(s1_dirichlet, s1_centres):
    # FeCA's Table 1 reports k-FED (k' = 5) on S1, Dirichlet(0.3), 10 clients at an
    # l2 distance of (59.4 +- 12.3) x 1e4 over 10 runs (84.6e4 is the IID column).
    # This seed gives 13.3e4; over seeds 0-9 of split and run the mean is 23.8e4
    # (see the report), so the bound below is the paper's mean.
    result = KFed(15, k_prime=5, seed=1).fit(federation_of(s1_dirichlet))
    assert result.centroids.shape == (15, 2) and result.rounds == 1
    assert centre_distance(result.centroids, s1_centres) < 59.4e4
    assert result.n_points == 5000


def test_dwf_with_kfed_init_improves_on_its_start_and_restarts_reach_s1(s1_dirichlet, s1_centres):
    result = WeightedFederatedKMeans(15, init="kfed", k_prime=5, seed=0, n_init=3,
                                     num_server_rounds=100).fit(federation_of(s1_dirichlet))
    assert result.converged and result.rounds < 100
    for restart in range(3):
        rows = [r for r in result.history if r.restart == restart]
        assert (rows[0].phase, rows[0].clients_answered) == ("init", 10)
        # Full participation, one Lloyd step, lr 1: every round lowers the score, up to
        # the clusters of one row that a client withholds (the privacy floor, p = 2),
        # which Lloyd's mean would include: on this split the score rose once, by 1.9e-6.
        scores = [r.score for r in rows[1:]]
        assert all(b <= a * (1 + 1e-5) for a, b in zip(scores, scores[1:]))
    # A k-FED start (k' = 5) on a non-IID split can lead Lloyd into a local
    # optimum: on this split, 7 of seeds 0-9 reach the optimum level (about 1.0e4;
    # the others 26e4-35e4) with one restart and all 10 with n_init = 3; on the
    # split of seed 0, 1 of 10 and 6 of 10.
    assert centre_distance(result.centroids, s1_centres) < 1.3e4


def test_kfed_start_of_dwf_is_the_kfed_strategy(s1_dirichlet):
    # One computation serves both: for one seed, the centroids DWF sends in its
    # first round (its k-FED start) are the k-FED strategy's result.
    federation = federation_of(s1_dirichlet)
    kfed = KFed(15, k_prime=5, seed=3).fit(federation)
    dwf = WeightedFederatedKMeans(15, init="kfed", k_prime=5, seed=3, num_server_rounds=1, tol=0.0)
    sent = []
    train_round = dwf.train_round

    def record(federation, t, current):
        sent.append(np.array(current))
        return train_round(federation, t, current)

    dwf.train_round = record
    dwf.fit(federation)
    np.testing.assert_array_equal(sent[0], kfed.centroids)


def test_no_usable_reply_fails_the_run(tmp_path):
    federation = InMemoryFederation([np.zeros((4, 1))],
                                    responders={0: unreadable_data(tmp_path / "missing.npy")})
    with pytest.raises(RunFailed, match=r"k-FED \(local k' = 2\): 0 of 1 clients answered usably"):
        KFed(2).fit(federation)


def test_too_few_centres_is_a_clear_error():
    with pytest.raises(RunFailed, match="received 2 distinct centres, fewer than k = 3"):
        pairs = np.array([[-0.25, 0.0], [0.25, 0.0]] * 2)
        KFed(3, k_prime=1, seed=0).fit(federation_of([pairs, pairs + 1.0]))


def test_from_config_and_validation():
    strategy = build_strategy(RunConfig.from_mapping({"algorithm": "kfed", "k": 9, "k-prime": 3}))
    assert isinstance(strategy, KFed) and (strategy.algorithm, strategy.k, strategy.options.local_k) == ("kfed", 9, 3)
    assert strategy.settings["k-prime"] == 3
    assert build_strategy(RunConfig.from_mapping({"algorithm": "kfed", "k": 9})).options.local_k == 9
    assert KFed(3, k_prime=0).options.local_k == 3  # 0 means k, on the command line and in Python
    with pytest.raises(ConfigError, match="'k-prime': 1.5 .*allowed: integer >= 0"):
        KFed(3, k_prime=1.5)
