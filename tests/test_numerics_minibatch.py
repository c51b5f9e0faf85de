"""The federated mini-batch k-means kernels of fedcluster.methods.fedkmeans.kernels (paper 003)."""

from __future__ import annotations

import numpy as np
import pytest

from fedcluster.numerics import ClusterStats
from fedcluster.methods.fedkmeans.kernels import client_kmeans, count_weighted_mean, minibatch_step, reseed, small_clusters

X4 = np.array([[0.0], [2.0], [10.0], [12.0]])
START = np.array([[0.0], [10.0]])


def test_minibatch_step_hand_case():
    # Cluster 0: the batch holds 1 and 2 (lambda^b = 2, batch mean 1.5); 3 points were
    # counted before, so lambda = 5 and mu_0 = 0 + 0.5 * 2/5 * (1.5 - 0) = 0.3.
    # Cluster 1 has no point in the batch and stays at 10.
    batch = ClusterStats(np.array([[3.0], [0.0]]), np.array([2.0, 0.0]), 0.0)
    new = minibatch_step(START, batch, np.array([5.0, 3.0]), 0.5)
    np.testing.assert_allclose(new, [[0.3], [10.0]], rtol=1e-15)


@pytest.mark.parametrize("epochs, expected", [(1, [0.5, 10.5]), (2, [0.75, 10.75])])
def test_full_batch_epochs_step_by_beta(epochs, expected):
    # B = 0 (all rows): lambda^b / lambda = 1, so each epoch is mu += beta (mean - mu):
    # from (0, 10) with beta 0.5 and cluster means (1, 11): (0.5, 10.5), then (0.75, 10.75).
    # The score is against the start: 0 + 4 + 0 + 4 = 8. Counts of the last epoch: (2, 2).
    out = client_kmeans(X4, START, rng=np.random.default_rng(0), epochs=epochs, batch_size=0, lr=0.5)
    np.testing.assert_allclose(out.centroids.ravel(), expected, rtol=1e-15)
    np.testing.assert_array_equal(out.counts, [2.0, 2.0])
    assert out.inertia == 8.0


@pytest.mark.parametrize("batch_size", [1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beta_one_mini_batches_give_the_running_mean_in_any_order(batch_size, seed):
    # With beta = 1, mu += lambda^b / lambda (mu^b - mu) is the running mean of the points
    # counted so far in the epoch, whatever the batch order: the cluster means (1, 11).
    out = client_kmeans(X4, START, rng=np.random.default_rng(seed), batch_size=batch_size, lr=1.0)
    np.testing.assert_allclose(out.centroids.ravel(), [1.0, 11.0], rtol=1e-15)
    np.testing.assert_array_equal(out.counts, [2.0, 2.0])


def test_mini_batches_follow_the_seed():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 2))
    C = X[:3].copy()
    kw = dict(epochs=3, batch_size=7, lr=0.3, chunk_size=4)
    a = client_kmeans(X, C, rng=np.random.default_rng(1), **kw)
    b = client_kmeans(X, C, rng=np.random.default_rng(1), **kw)
    c = client_kmeans(X, C, rng=np.random.default_rng(2), **kw)
    np.testing.assert_array_equal(a.centroids, b.centroids)
    assert not np.array_equal(a.centroids, c.centroids)
    assert a.counts.sum() == 40 and a.inertia == b.inertia == c.inertia


def test_client_parameters_are_checked():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="batch_size"):
        client_kmeans(X4, START, rng=rng, batch_size=-1)
    with pytest.raises(ValueError, match="lr"):
        client_kmeans(X4, START, rng=rng, lr=0.0)
    with pytest.raises(ValueError, match="epochs"):
        client_kmeans(X4, START, rng=rng, epochs=0)
    with pytest.raises(TypeError, match="Generator"):
        client_kmeans(X4, START, rng=0)


def test_count_weighted_mean_keeps_uncounted_clusters():
    # Gamma* = sum Lambda_i Gamma_i / Lambda: cluster 0 (2 * 1 + 6 * 3) / 8 = 2.5;
    # cluster 1 was counted by nobody (0/0) and keeps the current 7.
    local = np.array([[[1.0], [4.0]], [[3.0], [5.0]]])
    counts = np.array([[2.0, 0.0], [6.0, 0.0]])
    np.testing.assert_allclose(count_weighted_mean(local, counts, np.array([[0.0], [7.0]])),
                               [[2.5], [7.0]], rtol=1e-15)


def test_reseed_moves_due_clusters_next_to_the_largest():
    C = np.array([[0.0, 0.0], [10.0, 0.0], [50.0, 50.0], [60.0, 60.0]])
    sizes = np.array([30.0, 70.0, 0.0, 0.0])
    due = np.array([False, False, True, True])
    new = reseed(C, due, sizes, 2.0, np.random.default_rng(0))
    # First due -> largest (cluster 1), second -> next largest (cluster 0), each at distance 2.
    np.testing.assert_array_equal(new[:2], C[:2])
    assert np.linalg.norm(new[2] - C[1]) == pytest.approx(2.0, rel=1e-15)
    assert np.linalg.norm(new[3] - C[0]) == pytest.approx(2.0, rel=1e-15)
    np.testing.assert_array_equal(new, reseed(C, due, sizes, 2.0, np.random.default_rng(0)))


def test_reseed_cycles_donors_and_needs_one():
    C = np.array([[0.0], [5.0], [9.0]])
    new = reseed(C, np.array([False, True, True]), np.array([4.0, 0.0, 0.0]), 1.0,
                 np.random.default_rng(3))
    np.testing.assert_allclose(np.abs(new[1:] - 0.0), 1.0, rtol=1e-15)
    unchanged = reseed(C, np.array([True, True, True]), np.array([4.0, 0.0, 0.0]), 1.0,
                       np.random.default_rng(3))
    np.testing.assert_array_equal(unchanged, C)
    with pytest.raises(ValueError, match="radius"):
        reseed(C, np.zeros(3, bool), np.ones(3), -1.0, np.random.default_rng(0))


def test_small_clusters_are_small_against_the_mean_cluster_size():
    # 100 points over k = 4 clusters: the mean size is 25; below 0.2 * 25 = 5 is small.
    sizes = np.array([4.0, 5.0, 0.0, 91.0])
    np.testing.assert_array_equal(small_clusters(sizes, 100, 0.2), [True, False, True, False])
    assert not small_clusters(sizes, 100, 0.0).any()
    # k = 100 equal clusters of 51 and 50 points: the paper's 1 % of all points (51.5)
    # calls every cluster of 50 small; 1 % of the mean size (0.515) none.
    equal = np.array([51.0, 50.0] * 50)
    assert (equal < 0.01 * equal.sum()).sum() == 50
    assert not small_clusters(equal, equal.sum(), 0.01).any()


@pytest.mark.parametrize("sizes, points, fraction", [
    (np.ones((2, 2)), 4, 0.1), (np.ones(0), 0, 0.1), (np.ones(2), -1, 0.1), (np.ones(2), 2, 1.0),
])
def test_small_clusters_checks_its_input(sizes, points, fraction):
    with pytest.raises(ValueError):
        small_clusters(sizes, points, fraction)
