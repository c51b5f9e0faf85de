"""Garst & Reinders' federated k-means (FKM) through the client, the strategy and a federation."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ask_client, grid_data, messages

from fedcluster.client.respond import BAD_INPUT
from fedcluster.config import ConfigError, RunConfig
from fedcluster.data import partition_indices
from fedcluster.client.memory import InMemoryFederation
from fedcluster.messages import ClientSummary, ProtocolError, validate_reply
from fedcluster.config import build_strategy
from fedcluster.methods.fkm.client import GARST, GARST_INIT
from fedcluster.methods.fkm.strategy import GarstFederatedKMeans
from fedcluster.metrics import centre_distance

# Client A holds 0, 2, 4, 10, 12; client B holds 20, 22, 29, 31 (one feature).
PART_A = np.array([[0.0], [2.0], [4.0], [10.0], [12.0]])
PART_B = np.array([[20.0], [22.0], [29.0], [31.0]])
START = np.array([[0.0], [6.0], [11.0], [30.0]])


def test_round_request_sends_the_kept_clusters_and_the_score():
    # Against START, A's rows go 0 -> 0, 2 -> 0, 4 -> 6, 10 -> 11, 12 -> 11 and 30
    # gets none: new centroids 1, 4, 11 with 2, 1, 2 rows; SSE 0 + 4 + 4 + 1 + 1 = 10.
    # p = 2 (the default) withholds the cluster of one row: the counts cover 4 of the 5 rows.
    config = {"chunk-size": 2, "device": "cpu"}
    reply = ask_client(PART_A, GARST, config, START)
    summary = validate_reply(reply.summary, dim=1, expect=("centroids", "counts", "sse"))
    np.testing.assert_array_equal(summary.centroids, [[1.0], [11.0]])
    np.testing.assert_array_equal(summary.counts, [2, 2])
    assert (summary.n, summary.sse) == (5, 10.0)


def test_a_client_may_send_no_cluster_at_all():
    config = {"min-cluster-size": 5, "chunk-size": 8, "device": "cpu"}
    summary = validate_reply(ask_client(PART_A, GARST, config, START).summary, dim=1,
                             expect=("centroids", "counts", "sse"))
    assert summary.centroids.shape == (0, 1) and summary.counts.shape == (0,)
    assert summary.sse == 10.0


def test_init_request_sends_cluster_means_of_k_means_plus_plus_seeds():
    rows = np.array([[0.0, 0.0], [0.0, 1.0], [50.0, 50.0], [51.0, 50.0], [50.0, 51.0]])
    config = {"k": 2, "seed": 3, "min-cluster-size": 2, "chunk-size": 4, "device": "cpu"}
    summary = validate_reply(ask_client(rows, GARST_INIT, config).summary,
                             expect=("centroids", "counts"))
    order = np.argsort(summary.centroids[:, 0])
    np.testing.assert_allclose(summary.centroids[order], [[0.0, 0.5], [151 / 3, 151 / 3]])
    np.testing.assert_array_equal(summary.counts[order], [2, 3])


def test_init_request_of_more_clusters_than_p_rows_each_sends_the_clusters_it_can():
    # 5 rows for k = 3 (fewer than p x k = 6): the client answers, with clusters of 2 or more rows.
    config = {"k": 3, "seed": 1, "min-cluster-size": 2, "chunk-size": 4, "device": "cpu"}
    summary = validate_reply(ask_client(PART_A, GARST_INIT, config).summary,
                             expect=("centroids", "counts"))
    assert 1 <= len(summary.counts) <= 2 and np.all(summary.counts >= 2)
    assert summary.counts.sum() <= 5 and summary.n == 5


def test_bad_requests_get_error_replies():
    cases = [
        (GARST, {"min-cluster-size": 0, "chunk-size": 4}, START,
         "request config 'min-cluster-size' has an invalid value 0"),
        (GARST, {"min-cluster-size": 6, "chunk-size": 4}, START,
         "this client has 5 rows, fewer than min-cluster-size 6"),
        (GARST, {"chunk-size": 4}, None, "request carries no global centroids"),
        (GARST_INIT, {"k": 2, "chunk-size": 4}, None, "request config lacks 'seed'"),
    ]
    for kind, config, centroids, expected in cases:
        reply = ask_client(PART_A, kind, config, centroids)
        assert reply.summary is None and reply.error.startswith(f"error reply (code {BAD_INPUT}): ")
        assert expected in reply.error


def reply(centroids, counts, n=10, sse=1.0) -> ClientSummary:
    return ClientSummary(n=n, centroids=np.asarray(centroids, dtype=np.float64),
                         counts=np.asarray(counts, dtype=np.float64), sse=sse)


def test_replies_may_hold_fewer_centroids_but_never_small_clusters():
    strategy = GarstFederatedKMeans(3, min_cluster_size=2)
    fewer = strategy.validate_train_reply(reply([[1.0, 2.0]], [4]), 3, 2)
    assert fewer.centroids.shape == (1, 2)
    empty = strategy.validate_train_reply(reply(np.zeros((0, 2)), np.zeros(0)), 3, 2)
    assert empty.centroids.shape == (0, 2)
    with pytest.raises(ProtocolError, match="sent 4 centroids, more than k = 3"):
        strategy.validate_train_reply(reply(np.zeros((4, 2)), [2, 2, 2, 2]), 3, 2)
    with pytest.raises(ProtocolError, match="fewer than the privacy threshold of 2 points"):
        strategy.validate_train_reply(reply([[0.0, 0.0], [1.0, 1.0]], [3, 1]), 3, 2)
    with pytest.raises(ProtocolError, match=r"'centroids' has shape \(1, 3\)"):
        strategy.validate_train_reply(reply([[0.0, 0.0, 0.0]], [3]), 3, 2)


def test_aggregate_runs_weighted_k_means_over_all_received_centroids():
    # Received: 0 (w 3) and 10 (w 1) from one client, 1 (w 1) and 12 (w 3) from the
    # other. The weighted optimum (eq. 1) is 0.25 and 11.5 (see test_numerics_garst);
    # it comes back in the order of the current centroids (12, -1).
    strategy = GarstFederatedKMeans(2, seed=0)
    summaries = [ClientSummary(n=4, centroids=np.array([[0.0], [10.0]]), counts=np.array([3.0, 1.0])),
                 ClientSummary(n=4, centroids=np.array([[1.0], [12.0]]), counts=np.array([1.0, 3.0]))]
    new = strategy.aggregate(np.array([[12.0], [-1.0]]), summaries)
    np.testing.assert_allclose(new, [[11.5], [0.25]], rtol=0, atol=1e-12)


def test_aggregate_keeps_the_centroids_when_nobody_sent_a_cluster(flwr_log):
    strategy = GarstFederatedKMeans(2, min_cluster_size=5)
    current = np.array([[0.0], [1.0]])
    nothing = ClientSummary(n=3, centroids=np.zeros((0, 1)), counts=np.zeros(0))
    assert strategy.aggregate(current, [nothing]) is current
    assert "no client sent a cluster of 5 or more points" in messages(flwr_log)


def paired(rows):
    """Each row x as the pair x - 0.25, x + 0.25: the same cluster means, twice the rows."""
    return np.concatenate([rows - 0.25, rows + 0.25])


def run_from_start(min_cluster_size):
    federation = InMemoryFederation([paired(PART_A), paired(PART_B)])
    strategy = GarstFederatedKMeans(4, min_cluster_size=min_cluster_size, tol=0.0, seed=0,
                                    num_server_rounds=1)
    strategy.explicit_start = START
    return strategy.fit(federation)


def test_one_round_from_an_explicit_start_matches_the_hand_computation():
    # Every row of A and B as a pair x -+ 0.25 (no pair straddles a boundary), so every
    # cluster has the two rows p = 2 needs. A sends 1 (4 rows), 4 (2), 11 (4) (see
    # above). B's rows go 20 -> 11 (d 9 < 10), 22, 29, 31 -> 30: B sends 20 (2 rows) and
    # 82 / 3 (6 rows); 0 and 6 get none. Server, k = 4 over 1 (w 4), 4 (w 2), 11 (w 4),
    # 20 (w 2), 82/3 (w 6): the cheapest merge is {1, 4} -> 2 (weighted cost 4 * 1 + 2 * 4
    # = 12; {4, 11} costs 65.3, {11, 20} 108). Matched to START in sorted order: 2, 11,
    # 20, 82/3. Score: SSE to START, twice A's 10 and B's 81 + 64 + 1 + 1 = 147, plus
    # 2 * 0.25^2 per pair, over 18 rows.
    result = run_from_start(2)
    np.testing.assert_allclose(result.centroids.ravel(), [2, 11, 20, 82 / 3], rtol=0, atol=1e-12)
    [train] = result.history  # the explicit start replaces the k-means++ round
    assert (train.phase, train.round) == ("train", 1)
    assert train.score == pytest.approx((2 * 157 + 9 * 0.125) / 18, rel=1e-12)


def test_with_p_three_fewer_than_k_centroids_pull_their_nearest_global_centroids():
    # p = 3: A withholds 4, B withholds 20; the server gets 1 (w 4), 11 (w 4),
    # 82/3 (w 6), fewer than k = 4. From START they join 0, 11 and 30; 6 gets none
    # and stays: 1, 6, 11, 82/3.
    result = run_from_start(3)
    np.testing.assert_allclose(result.centroids.ravel(), [1, 6, 11, 82 / 3], rtol=0, atol=1e-12)


@pytest.mark.parametrize("beta", [0.1, 1.0, 10.0])
def test_recovers_the_16_grid_centres_on_a_distance_split(beta):
    from sklearn.metrics import adjusted_rand_score

    X, labels, centres = grid_data()
    parts = partition_indices(len(X), 4, f"distance:{beta}", points=X, seed=1)
    federation = InMemoryFederation([X[p] for p in parts])
    result = GarstFederatedKMeans(16, num_server_rounds=50, tol=1e-4, seed=1).fit(federation)

    assert result.converged and result.rounds < 50
    init = result.history[0]
    assert (init.phase, init.round, init.clients_answered) == ("init", 0, 4)
    assert all(r.clients_answered == 4 for r in result.history[1:])
    # The mean of 50 draws of N(0, I) is off by 0.2 on average (sqrt(2 / 50)), so
    # over 16 centres the matched distance is about sqrt(16 * 0.04) = 0.8. A wrong
    # solution (two centroids in one cluster, one between two clusters) puts a
    # centroid at least 2.5 from every free true centre, a distance above 2.5.
    assert centre_distance(result.centroids, centres) < 1.5
    nearest = ((result.centroids[:, None] - centres[None]) ** 2).sum(axis=2).min(axis=1)
    assert np.sqrt(nearest.max()) < 1.0
    found = ((X[:, None] - result.centroids[None]) ** 2).sum(axis=2).argmin(axis=1)
    # Garst's Fig. 1(b) reports ARI about 0.9 for FKM and central k-means alike.
    assert adjusted_rand_score(labels, found) > 0.9


def test_runs_are_reproducible_and_do_not_depend_on_node_order():
    X, _, _ = grid_data(1)
    parts = [X[p] for p in partition_indices(len(X), 4, "distance:0.1", points=X, seed=2)]

    def run(order):
        federation = InMemoryFederation([parts[i] for i in order])
        return GarstFederatedKMeans(16, num_server_rounds=20, tol=0.0, seed=7).fit(federation)

    a, b = run([0, 1, 2, 3]), run([3, 1, 0, 2])
    assert a.rounds == b.rounds == 20
    np.testing.assert_array_equal(a.centroids, b.centroids)


def test_from_config_and_validation():
    config = RunConfig.from_mapping({"algorithm": "fkm", "k": 7, "privacy-threshold": 3,
                                     "num-server-rounds": 12, "tol": 0.5})
    strategy = build_strategy(config)
    assert isinstance(strategy, GarstFederatedKMeans) and strategy.algorithm == "fkm"
    assert (strategy.k, strategy.min_cluster_size, strategy.num_server_rounds, strategy.tol) == (7, 3, 12, 0.5)
    assert strategy.settings["min-cluster-size"] == 3
    with pytest.raises(ConfigError, match="'min-cluster-size': 1 .*allowed: integer >= 2"):
        GarstFederatedKMeans(3, min_cluster_size=1)
    with pytest.raises(ConfigError, match="unknown setting 'init'"):
        GarstFederatedKMeans(3, init="random")
