"""FeCA's numerical steps (paper 004: Algorithms 2, 3, 4 and 5) on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import column

from fedcluster.numerics import kmeans
from fedcluster.methods.feca.kernels import ClusterGeometry, cluster_geometry, empirical_radii, feca_aggregate, feca_client_update, group_by_radius, merged_sse, remove_one_fit_many, theoretical_radius


# A local solution on a line: c_0 = 5 sits between the tight clusters A = {-1, 1}
# and B = {9, 11} (one-fit-many), c_1 = 18.5 and c_2 = 21.5 split C = {18, 19, 21, 22}
# (many-fit-one). Each centroid is the mean of its Voronoi set: a Lloyd fixed point.
LOCAL_X = column(-1, 1, 9, 11, 18, 19, 21, 22)
LOCAL_C = column(5, 18.5, 21.5)


def test_cluster_geometry_by_hand():
    # Centroid 0 is not the mean of its points {0, 2} (a Lloyd run stopped early);
    # centroid 2 at 100 gets no point.
    geometry = cluster_geometry(column(0, 2, 10, 12, 14), column(0, 12, 100), chunk_size=2)
    np.testing.assert_array_equal(geometry.counts, [2, 3, 0])
    np.testing.assert_array_equal(geometry.means, column(1, 12, 100))
    np.testing.assert_array_equal(geometry.sse, [0 + 4, 4 + 0 + 4, 0])  # eq. 3, about c_i
    np.testing.assert_array_equal(geometry.reach, [2, 2, 0])  # r'_i


def test_reach_is_the_mean_of_the_p_largest_distances():
    # Distances to c_0 = 0: {0, 2}; to c_1 = 12: {2, 0, 2, 5}; c_2 gets no row.
    X, C = column(0, 2, 10, 12, 14, 17), column(0, 12, 100)
    reach = {p: cluster_geometry(X, C, min_rows=p, chunk_size=2).reach for p in (2, 3)}
    np.testing.assert_allclose(reach[2], [1, (5 + 2) / 2, 0], rtol=0, atol=1e-15)
    # Fewer rows than p (cluster 0): the mean of all of them (such a cluster is never sent).
    np.testing.assert_allclose(reach[3], [1, (5 + 2 + 2) / 3, 0], rtol=0, atol=1e-15)


def test_merged_sse_is_eq4_about_the_common_mean():
    geometry = cluster_geometry(column(0, 2, 10, 12, 14), column(0, 12))
    # D_0 u D_1 = {0, 2, 10, 12, 14} has mean 7.6:
    # 7.6^2 + 5.6^2 + 2.4^2 + 4.4^2 + 6.4^2 = 57.76 + 31.36 + 5.76 + 19.36 + 40.96 = 155.2,
    # although G_0 = 4 is taken about c_0 = 0, not about the mean 1 of D_0.
    assert merged_sse(column(0, 12), geometry, 0, 1) == pytest.approx(155.2, rel=1e-14)


def test_algorithm2_removes_the_centroid_between_two_tight_clusters():
    geometry = cluster_geometry(LOCAL_X, LOCAL_C)
    # Deviations sqrt(G_i / |D_i|): c_0 sqrt(104 / 4) = 5.1 (36 + 16 + 16 + 36 = 104),
    # c_1 and c_2 sqrt(0.5 / 2) = 0.5, so c_0 is the candidate one-fit-many. The closest
    # pair is (c_1, c_2), 3 apart; merged, C has mean 20 and G_j = 4 + 1 + 1 + 4 = 10.
    # G_0 = 104 >= 10 removes c_0. Next candidate c_1 (tie, lowest index): G_1 = 0.5 < 10 stops.
    np.testing.assert_array_equal(remove_one_fit_many(LOCAL_C, geometry), [False, True, True])


def test_algorithm2_keeps_a_global_solution():
    # One centroid per cluster A = {-1, 1}, B = {9, 11}, C = {19, 21}: every G_i = 2; the
    # closest pair (0, 1) (tie with (1, 2), lowest first) merges into {-1, 1, 9, 11}
    # with G_j = 104 > 2, so the loop stops at once.
    C = column(0, 10, 20)
    geometry = cluster_geometry(column(-1, 1, 9, 11, 19, 21), C)
    assert remove_one_fit_many(C, geometry).all()


def test_algorithm2_goes_on_against_the_same_pair_as_written():
    # LOCAL_X plus a wide genuine cluster D = {40, 50} with centroid 45: G = 50,
    # deviation 5 < 5.1. After c_0 goes, c_3 is the candidate; the pair (c_1, c_2) stays
    # (Algorithm 2 merges it only tentatively), G_3 = 50 >= G_j = 10: c_3 goes too.
    # Then G_1 = 0.5 < 10 stops. The server recovers such centroids from other clients.
    C = column(5, 18.5, 21.5, 45)
    geometry = cluster_geometry(np.vstack([LOCAL_X, column(40, 50)]), C)
    np.testing.assert_array_equal(remove_one_fit_many(C, geometry), [False, True, True, False])


@pytest.mark.parametrize("seed", range(5))
def test_algorithm2_removes_nothing_from_a_two_centroid_lloyd_solution(seed):
    # At a Lloyd fixed point with k' = 2 the only pair is (c_0, c_1), so the candidate
    # c_i is one of them and G_j (their merged cluster) >= G_i: Algorithm 2 keeps a
    # one-fit-many centroid beside a centroid of one outlying row (the FeCA paper's own
    # limit at k = 2; see BENCHMARKS.md, "FeCA at k = 2 in 30 dimensions").
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(0, 1, (40, 3)), rng.normal(4, 1, (20, 3)), [[30, 0, 0]]])
    result = kmeans(X, 2, rng=rng, max_iter=300, tol=0.0)
    geometry = cluster_geometry(X, result.centroids)
    assert remove_one_fit_many(result.centroids, geometry).all()


def test_algorithm2_needs_non_empty_clusters():
    geometry = ClusterGeometry(np.array([1.0, 0.0]), column(0, 1), np.zeros(2), np.zeros(2))
    with pytest.raises(ValueError, match="at least one point"):
        remove_one_fit_many(column(0, 1), geometry)


def test_algorithm4_radii_by_hand():
    # Nearest other centroid: 3, 3, 7 away, so r'' = 1.5, 1.5, 3.5; r = min(r', r'').
    np.testing.assert_array_equal(empirical_radii(column(0, 3, 10), [1, 2, 4]), [1, 1.5, 3.5])
    # A single centroid has no neighbour: r = r'.
    np.testing.assert_array_equal(empirical_radii(column(7), [2.5]), [2.5])


def test_algorithm3_radius_by_hand():
    # c_0 = 0 and its nearest c_1 = 3 overlap (2 + 2 > 3): both leave the tentative set.
    # c_2 = 10 and c_3 = 20 do not (1 + 1 < 10). Radius: half of |20 - 10|.
    assert theoretical_radius(column(0, 3, 10, 20), [2, 2, 1, 1]) == 5.0
    # Centroids are visited in index order: c_0's nearest is c_1 (2 away, 1.5 + 1 > 2), both
    # go; c_2 = 3.5 and c_3 = 10 stay (1 + 1 < 6.5): radius 3.25. (Visiting c_1 first would
    # remove c_1 with its nearest c_2, 1.5 away, and leave 0 and 10: radius 5.)
    assert theoretical_radius(column(0, 2, 3.5, 10), [1.5, 1, 1, 1]) == 3.25
    # Everything overlaps: half the smallest distance of all centroids stands in.
    assert theoretical_radius(column(0, 3), [2, 2]) == 1.5
    assert theoretical_radius(column(4), [0.75]) == 0.75


def test_feca_client_update_removes_one_fit_many_and_assigns_radii():
    # Add a centroid at 1000 that gets no point: it is dropped first.
    C = np.vstack([LOCAL_C, column(1000)])
    update = feca_client_update(LOCAL_X, C, [4, 2, 2, 0])
    np.testing.assert_array_equal(update.centroids, column(18.5, 21.5))
    np.testing.assert_array_equal(update.counts, [2, 2])
    # r' = 0.5 for both, half their distance is 1.5: Algorithm 4 gives 0.5.
    np.testing.assert_array_equal(update.radii, [0.5, 0.5])
    # Algorithm 3: 0.5 + 0.5 < 3, both stay; uniform radius 3 / 2.
    theoretical = feca_client_update(LOCAL_X, C, [4, 2, 2, 0], radius="theoretical")
    np.testing.assert_array_equal(theoretical.radii, [1.5, 1.5])
    with pytest.raises(ValueError, match="radius must be one of"):
        feca_client_update(LOCAL_X, C, [4, 2, 2, 0], radius="largest")


def test_withheld_clusters_rows_join_no_cluster_sent():
    # The floor withholds c_0 = 5: its rows -1, 1, 9, 11 are nearer 18.5 than 21.5,
    # yet they neither count for c_1 nor set its radius (19.5 from the row at -1).
    # The counts sent are the sizes given (the rows each centroid averages).
    update = feca_client_update(LOCAL_X, LOCAL_C, [4, 2, 3], sendable=[False, True, True],
                                min_rows=2)
    np.testing.assert_array_equal(update.centroids, column(18.5, 21.5))
    np.testing.assert_array_equal(update.counts, [2, 3])
    np.testing.assert_array_equal(update.radii, [0.5, 0.5])
    # A Voronoi set of fewer than min_rows rows is not sent either; none left: nothing sent.
    lone = feca_client_update(LOCAL_X, LOCAL_C, [4, 2, 2], min_rows=5)
    assert lone.centroids.shape == (0, 1) and lone.radii.shape == (0,) and lone.counts.shape == (0,)


# Received centroids on a line with their radii (Algorithm 5 hand case).
RECEIVED = column(0, 0.5, 1.0, 5, 5.3, 9)
RADII = np.array([1, 0.2, 0.3, 0.4, 2, 0.1])


def test_algorithm5_groups_largest_radius_first():
    # 5.3 (r = 2) takes 5 (0.3 away) but not 9 (3.7) nor 1.0 (4.3): S_1 = {3, 4}.
    # Then 0 (r = 1) takes 0.5 and 1.0 (exactly 1 away: the ball is closed): S_2 = {0, 1, 2}.
    # Then 9 alone: S_3 = {5}.
    groups = group_by_radius(RECEIVED, RADII)
    assert [g.tolist() for g in groups] == [[3, 4], [0, 1, 2], [5]]


def test_algorithm5_returns_unweighted_means_of_the_largest_groups():
    result = feca_aggregate(RECEIVED, RADII, 2)
    # Sizes 2, 3, 1: the two largest are S_2 (mean 1.5 / 3 = 0.5) and S_1 (mean 5.15).
    np.testing.assert_allclose(result.centroids, column(0.5, 5.15), rtol=0, atol=1e-15)
    assert [m.tolist() for m in result.members] == [[0, 1, 2], [3, 4]]
    assert result.n_groups == 3


def test_algorithm5_with_fewer_groups_than_k_returns_them_all():
    result = feca_aggregate(RECEIVED, RADII, 15)
    assert result.n_groups == 3 and len(result.centroids) == 3
    np.testing.assert_allclose(result.centroids, column(0.5, 5.15, 9), atol=1e-15)


def test_algorithm5_ties_keep_the_order_of_formation():
    # Three singletons: formed in the order 10 (r = 3), 0 (r = 2), 20 (r = 1).
    result = feca_aggregate(column(0, 10, 20), [2, 3, 1], 2)
    np.testing.assert_array_equal(result.centroids, column(10, 0))


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="one value per centroid"):
        group_by_radius(RECEIVED, RADII[:-1])
    with pytest.raises(ValueError, match="non-negative"):
        empirical_radii(column(0, 1), [1, -1])
    with pytest.raises(ValueError, match="no centroids"):
        feca_aggregate(np.empty((0, 2)), np.empty(0), 3)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        feca_aggregate(RECEIVED, RADII, 0)
