"""M-Avg, the match-averaging baseline of paper 004, through the strategy and a federation."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import column, messages

from fedcluster.client.respond import respond
from fedcluster.config import ConfigError, RunConfig
from fedcluster.data import load_dataset, partition_indices
from fedcluster.client.memory import InMemoryFederation
from fedcluster.messages import LOCAL_KMEANS, ClientSummary
from fedcluster.config import build_strategy
from fedcluster.methods.mavg.strategy import MatchAveraging
from fedcluster.metrics import centre_distance


def canned_federation(replies) -> InMemoryFederation:
    """Clients that answer query.local_kmeans with their canned reply and evaluate for real.

    A local_kmeans request for other than k = 3 clusters fails the client's
    assertion, which it reports as an error reply, and so fails the run.
    """

    def canned(reply):
        def answer(X, request, node_config):
            if request.kind != LOCAL_KMEANS:
                return respond(X, request, node_config)
            assert request.config["k"] == 3, f"asked for k = {request.config['k']}"
            return reply
        return answer

    # Each client holds as many rows as its canned reply declares (the server
    # rejects a client whose score reply declares another number of points), spread
    # within 1 of the centroids they belong to, so that the score round finds
    # every matched mean holding points.
    parts = [column(*(c + offset for c, count in zip(r.centroids[:, 0], r.counts)
                      for offset in np.linspace(-1.0, 1.0, int(count))))
             for r in replies]
    return InMemoryFederation(parts, responders={i: canned(r) for i, r in enumerate(replies)})


def summary(centroids, counts) -> ClientSummary:
    return ClientSummary(n=int(sum(counts)), centroids=column(*centroids),
                         counts=np.array(counts, dtype=np.float64))


# Client 2 sends client 1's centroids + 1, permuted; client 3 two of them - 1 and an empty
# cluster (count 0), which is dropped. Matched to (0, 10, 20): slot means
# (0 + 1) / 2 = 0.5, (10 + 11 + 9) / 3 = 10, (20 + 21 + 19) / 3 = 20.
REPLIES = [summary([0, 10, 20], [5, 5, 5]), summary([21, 1, 11], [4, 4, 4]),
           summary([9, 50, 19], [3, 0, 3])]


def test_permuted_centroids_come_back_averaged_in_the_right_order(flwr_log):
    result = MatchAveraging(3, device="cpu").fit(canned_federation(REPLIES))
    np.testing.assert_allclose(np.sort(result.centroids, axis=0), column(0.5, 10, 20),
                               rtol=0, atol=1e-14)
    reordered = MatchAveraging(3, device="cpu").fit(canned_federation(REPLIES[::-1]))
    np.testing.assert_array_equal(reordered.centroids, result.centroids)
    log = messages(flwr_log)
    assert "M-Avg (local k' = 3): matched 3 centroid sets in 2 rounds" in log
    assert "mavg is one-shot: finished in one round with 3 of 3 clients, 3 centroids" in log


def test_k_prime_sets_the_local_clusters_and_the_result_size(flwr_log):
    result = MatchAveraging(2, k_prime=3, device="cpu").fit(canned_federation(REPLIES))
    assert result.centroids.shape == (3, 1)
    assert "the largest client set has 3 centroids, so the result has 3, not k = 2" in messages(flwr_log)


def test_from_config_and_bad_parameters():
    strategy = build_strategy(RunConfig(algorithm="mavg", k=4, k_prime=6))
    assert isinstance(strategy, MatchAveraging)
    assert (strategy.options.local_k, strategy.algorithm) == (6, "mavg")
    assert build_strategy(RunConfig(algorithm="mavg", k=4)).options.local_k == 4
    with pytest.raises(ConfigError, match="'k-prime': -2 .*allowed: integer >= 0"):
        MatchAveraging(3, k_prime=-2)


def test_s1_iid_recovers_the_true_centres(s1_centres):
    # Table 1 of the paper, M-Avg on S1 IID over 10 clients: l2-distance 7.2 +- 4.3
    # (x 1e4) over 10 runs. Here, seeds 0..9 (split and method): 9.3, 7.2, 5.3, 9.6,
    # 1.0, 7.4, 8.2, 8.5, 7.3, 3.7 (x 1e4), mean 6.8 +- 2.6.
    data = load_dataset("s1")
    distances = []
    for seed in range(10):
        parts = partition_indices(len(data.X), 10, "iid", seed=seed)
        federation = InMemoryFederation([data.X[p] for p in parts])
        result = MatchAveraging(15, seed=seed, device="cpu").fit(federation)
        assert result.centroids.shape == (15, 2)
        distances.append(centre_distance(result.centroids, s1_centres))
    assert max(distances) < 1.2e5
    assert np.mean(distances) < 9e4


def test_non_iid_split_leaves_no_cluster_empty(flwr_log):
    # S1 over 10 clients, each one cluster of a k-means with k = 100 (the DWF paper's
    # non-IID split): the means of matched centroids leave 2 of the 15 clusters empty
    # (seed 0), each an average of centroids of different true clusters. They are
    # replaced by local centroids, and every cluster holds points.
    data = load_dataset("s1")
    parts = partition_indices(len(data.X), 10, "kmeans-noniid", points=data.X, seed=0)
    federation = InMemoryFederation([data.X[p] for p in parts])
    result = build_strategy(RunConfig(algorithm="mavg", k=15, seed=0, device="cpu")).fit(federation)
    assert "held no point; replaced by the local centroids" in messages(flwr_log)
    d2 = ((data.X[:, None, :] - result.centroids[None]) ** 2).sum(axis=2)
    counts = np.bincount(d2.argmin(axis=1), minlength=15)
    assert result.centroids.shape == (15, 2) and counts.min() > 0
    np.testing.assert_array_equal(result.counts, counts)


def test_clients_with_fewer_centroids_than_k_still_give_k(flwr_log):
    # Every client sends two of the three clusters it was asked for (the third withheld).
    # Matched means: (0 + 1 - 1) / 3 = 0 and (10 + 11 + 30) / 3 = 17; the third slot takes
    # the local centroid they represent worst: count * squared distance to the nearest
    # mean is 3 * 1, 3 * 169, 4 * 1, 4 * 36, 0, 5 * 49 for -1, 30, 1, 11, 0, 10, so 30.
    replies = [summary([0, 10], [5, 5]), summary([1, 11], [4, 4]), summary([-1, 30], [3, 3])]
    result = MatchAveraging(3, device="cpu").fit(canned_federation(replies))
    np.testing.assert_allclose(result.centroids, column(0, 17, 30), atol=1e-14)
    assert "the largest client set has 2 centroids; 1 more are local centroids" in messages(flwr_log)
