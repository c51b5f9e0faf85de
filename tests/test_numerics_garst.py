"""Kernels of Garst & Reinders' federated k-means (fedcluster.methods.fkm.kernels), on hand cases."""

from __future__ import annotations

import numpy as np
import pytest

from fedcluster.methods.fkm.kernels import local_step, seeded_clusters, withhold_small_clusters
from fedcluster.numerics.pooling import pool_centroids, server_kmeans

# Rows 0, 2, 4, 10, 12 on a line against global centroids 0, 6, 11, 30:
# 0 -> 0 (d 0), 2 -> 0 (d 2, against 4 to 6), 4 -> 6 (d 2, against 4 to 0),
# 10 -> 11 (d 1), 12 -> 11 (d 1); 30 gets no row. SSE 0 + 4 + 4 + 1 + 1 = 10.
# One Lloyd step from the kept centroids: means 1 ({0, 2}), 4 ({4}), 11 ({10, 12}).
ROWS = np.array([[0.0], [2.0], [4.0], [10.0], [12.0]])
GLOBAL = np.array([[0.0], [6.0], [11.0], [30.0]])


def test_local_step_drops_exactly_the_global_centroids_without_rows():
    step = local_step(ROWS, GLOBAL, threshold=1)
    np.testing.assert_array_equal(step.centroids, [[1.0], [4.0], [11.0]])
    np.testing.assert_array_equal(step.counts, [2, 1, 2])
    assert step.inertia == 10.0


def test_local_step_withholds_clusters_below_the_privacy_threshold():
    # p = 2: the cluster {4} of one row is not sent; counts now add up to 4 of 5 rows.
    step = local_step(ROWS, GLOBAL, threshold=2)
    np.testing.assert_array_equal(step.centroids, [[1.0], [11.0]])
    np.testing.assert_array_equal(step.counts, [2, 2])
    assert step.inertia == 10.0  # the score still covers every row
    # p = 3: nothing is sent, an empty (0, d) reply.
    nothing = local_step(ROWS, GLOBAL, threshold=3)
    assert nothing.centroids.shape == (0, 1) and nothing.counts.shape == (0,)


def test_local_step_gives_ties_to_the_lower_global_index():
    # Row 3 is 1 from both 2 and 4: it joins centroid 0 (index 0), and 4 gets no row.
    step = local_step(np.array([[3.0], [2.5]]), np.array([[2.0], [4.0]]), threshold=1)
    np.testing.assert_array_equal(step.centroids, [[2.75]])
    np.testing.assert_array_equal(step.counts, [2])


def test_withhold_small_clusters_keeps_order_and_validates():
    centroids, counts = withhold_small_clusters(np.arange(8.0).reshape(4, 2),
                                                np.array([5.0, 1.0, 2.0, 0.0]), 2)
    np.testing.assert_array_equal(centroids, [[0.0, 1.0], [4.0, 5.0]])
    np.testing.assert_array_equal(counts, [5.0, 2.0])
    with pytest.raises(ValueError, match="threshold must be a positive integer"):
        withhold_small_clusters(np.zeros((1, 1)), np.ones(1), 0)


def test_seeded_clusters_send_the_means_of_the_seeds_clusters():
    # Two groups far apart: k-means++ puts one seed in each (the second seed is
    # drawn with probability proportional to D^2, 0.25 inside a group, ~1e4 across).
    # Means: (0 + 0.5) / 2 = 0.25 with 2 rows, (100 + 101 + 102) / 3 = 101 with 3 rows.
    X = np.array([[0.0], [0.5], [100.0], [101.0], [102.0]])
    for seed in range(5):
        found = seeded_clusters(X, 2, rng=np.random.default_rng(seed), threshold=1)
        order = np.argsort(found.centroids[:, 0])
        np.testing.assert_allclose(found.centroids[order], [[0.25], [101.0]])
        np.testing.assert_array_equal(found.counts[order], [2, 3])
    # p = 3 withholds the group of two.
    kept = seeded_clusters(X, 2, rng=np.random.default_rng(0), threshold=3)
    np.testing.assert_allclose(kept.centroids, [[101.0]])


def test_seeded_clusters_never_send_a_raw_row_when_p_is_two():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(60, 3))
    found = seeded_clusters(X, 8, rng=np.random.default_rng(0), threshold=2)
    assert np.all(found.counts >= 2)
    assert not np.any((found.centroids[:, None, :] == X[None]).all(axis=2))


def test_seeded_clusters_cap_k_at_the_rows_and_drop_duplicate_seeds():
    # Two rows, k = 5: two seeds, two clusters of one row; p = 2 sends nothing.
    two = seeded_clusters(np.array([[0.0], [1.0]]), 5, rng=np.random.default_rng(0), threshold=2)
    assert two.centroids.shape == (0, 1)
    # Three equal rows, k = 3: the later seeds lose their rows to the first (ties
    # go to the lower index), so one cluster of 3 is sent.
    same = seeded_clusters(np.ones((3, 2)), 3, rng=np.random.default_rng(0), threshold=1)
    np.testing.assert_array_equal(same.centroids, [[1.0, 1.0]])
    np.testing.assert_array_equal(same.counts, [3])


def test_pool_centroids_does_not_depend_on_client_order():
    a = (np.array([[5.0, 1.0], [0.0, 2.0]]), np.array([3.0, 4.0]))
    b = (np.zeros((0, 2)), np.zeros(0))  # a client that withheld everything
    c = (np.array([[0.0, 1.0]]), np.array([2.0]))
    one = pool_centroids([a[0], b[0], c[0]], [a[1], b[1], c[1]])
    two = pool_centroids([c[0], a[0], b[0]], [c[1], a[1], b[1]])
    for x, y in zip(one, two):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(one[0], [[0.0, 1.0], [0.0, 2.0], [5.0, 1.0]])
    np.testing.assert_array_equal(one[1], [2.0, 4.0, 3.0])
    with pytest.raises(ValueError, match="one counts array per centroids array"):
        pool_centroids([], [])


# Weighted points 0 (w 3), 1 (w 1), 10 (w 1), 12 (w 3), k = 2. The optimum of eq. 1
# groups {0, 1} and {10, 12}: weighted means (3 * 0 + 1) / 4 = 0.25 and
# (10 + 3 * 12) / 4 = 11.5, with weighted inertia 3 * 0.25^2 + 0.75^2 + 1.5^2
# + 3 * 0.5^2 = 3.75 (unweighted means 0.5 and 11 would be eq. 3's answer).
POINTS = np.array([[0.0], [1.0], [10.0], [12.0]])
WEIGHTS = np.array([3.0, 1.0, 1.0, 3.0])


def test_server_kmeans_minimises_the_weighted_objective():
    for seed in range(5):
        found = server_kmeans(POINTS, WEIGHTS, 2, rng=np.random.default_rng(seed))
        np.testing.assert_allclose(np.sort(found[:, 0]), [0.25, 11.5], rtol=0, atol=1e-12)


def test_server_kmeans_keeps_the_order_of_the_current_centroids():
    found = server_kmeans(POINTS, WEIGHTS, 2, rng=np.random.default_rng(0),
                          start=np.array([[20.0], [-5.0]]))
    np.testing.assert_allclose(found, [[11.5], [0.25]], rtol=0, atol=1e-12)


def test_server_kmeans_prefers_a_better_restart_to_the_current_centroids():
    # From (100, 200) every point joins 100, which moves to the weighted mean
    # 47 / 8 = 5.875, and 200 stays empty: inertia 3 * 5.875^2 + ... > 3.75, so a
    # k-means++ start wins; matched to (100, 200), 0.25 goes first (cost
    # 99.75^2 + 188.5^2 < 88.5^2 + 199.75^2).
    found = server_kmeans(POINTS, WEIGHTS, 2, rng=np.random.default_rng(0),
                          start=np.array([[100.0], [200.0]]))
    np.testing.assert_allclose(found, [[0.25], [11.5]], rtol=0, atol=1e-12)


def test_server_kmeans_with_fewer_points_than_k_moves_the_nearest_centroids():
    # Points 0 and 10 (weight 2 each), k = 3, current centroids 0, 5, 20: the
    # point 10 joins 5 (d 5 against 10 to 20), so 5 moves to 10; 20 gets nothing
    # and stays. k-means++ cannot start with 2 distinct points.
    points, weights = np.array([[0.0], [10.0]]), np.array([2.0, 2.0])
    found = server_kmeans(points, weights, 3, rng=np.random.default_rng(0),
                          start=np.array([[0.0], [5.0], [20.0]]))
    np.testing.assert_array_equal(found, [[0.0], [10.0], [20.0]])
    with pytest.raises(ValueError, match="2 distinct centroids of positive weight, fewer than k = 3"):
        server_kmeans(points, weights, 3, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="received no centroids"):
        server_kmeans(np.zeros((0, 1)), np.zeros(0), 1, rng=np.random.default_rng(0))
