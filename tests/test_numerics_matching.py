"""Match averaging (the M-Avg baseline of paper 004) on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import column

from fedcluster.methods.mavg.kernels import best_match_average, fill_empty_slots, match_average
from fedcluster.numerics.matching import match_order, match_to_reference


def test_hungarian_matching_undoes_a_permutation():
    reference = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]])
    order = np.array([2, 0, 3, 1])
    shuffled = reference[order] + 0.5
    np.testing.assert_array_equal(match_to_reference(shuffled, reference), order)
    # A smaller set takes a subset of the slots.
    np.testing.assert_array_equal(match_to_reference(shuffled[:2], reference), order[:2])


def test_matching_minimises_the_total_not_each_distance():
    # Greedy nearest slots would send 1 -> 1.2 and then 2 -> 0 (cost 0.04 + 4 = 4.04);
    # the optimum sends 1 -> 0 and 2 -> 1.2 (cost 1 + 0.64 = 1.64).
    np.testing.assert_array_equal(match_to_reference(column(1, 2), column(0, 1.2)), [0, 1])


def test_permuted_centroids_come_back_averaged_in_the_reference_order():
    # S_2 is S_1 + 1 permuted; S_3 has two centroids, S_1 - 1 without its first.
    # Matching to S_1: S_2 -> slots (2, 0, 1), S_3 -> slots (1, 2). Means per slot:
    # (0 + 1) / 2 = 0.5, (10 + 11 + 9) / 3 = 10, (20 + 21 + 19) / 3 = 20. Matching to
    # (0.5, 10, 20) changes nothing: the second round confirms the fixed point.
    sets = [column(0, 10, 20), column(21, 1, 11), column(9, 19)]
    result = match_average(sets, sets[0])
    np.testing.assert_allclose(result.centroids, column(0.5, 10, 20), rtol=0, atol=1e-14)
    assert [s.tolist() for s in result.slots] == [[0, 1, 2], [2, 0, 1], [1, 2]]
    assert result.n_iter == 2
    # Squared distances to the means: 0.25 + 0.25, 0 + 1 + 1, 0 + 1 + 1.
    assert result.cost == pytest.approx(4.5, rel=1e-14)


def test_the_fixed_point_does_not_depend_on_the_starting_set():
    # Reference (0, 4); the other sets are (2, 8) and (2, 8). Matching (2, 8) to (0, 4):
    # 2 -> 0, 8 -> 4 costs 4 + 16 = 20, 2 -> 4, 8 -> 0 costs 4 + 64. Means:
    # (0 + 2 + 2) / 3 = 4/3, (4 + 8 + 8) / 3 = 20/3; matching to them changes nothing.
    sets = [column(0, 4), column(2, 8), column(2, 8)]
    result = match_average(sets, sets[0])
    np.testing.assert_allclose(result.centroids, column(4 / 3, 20 / 3), rtol=1e-14)
    # Starting from (2, 8) gives the same fixed point; best_match_average agrees whatever the order.
    for order in ([0, 1, 2], [1, 2, 0], [2, 0, 1]):
        best = best_match_average([sets[i] for i in order])
        np.testing.assert_allclose(np.sort(best.centroids, axis=0), column(4 / 3, 20 / 3), rtol=1e-14)


def test_best_match_average_starts_from_every_largest_set():
    # Two sets of two and one of one; the result has two centroids. From A = (0, 10):
    # B = (1, 30) matches 1 -> 0, 30 -> 10 (1 + 400 against 81 + 900), C = (29) takes
    # slot 1 (361 against 841); means (0.5, (10 + 30 + 29) / 3 = 23), and matching to
    # them changes nothing. From B the same fixed point follows. Cost: A 0.25 + 169,
    # B 0.25 + 49, C 36.
    a, b, c = column(0, 10), column(1, 30), column(29)
    result = best_match_average([c, a, b])
    np.testing.assert_allclose(result.centroids, column(0.5, 23), rtol=1e-14)
    assert result.cost == pytest.approx(0.5 + 169 + 49 + 36, rel=1e-14)


def test_bad_sets_are_refused():
    with pytest.raises(ValueError, match="cannot match 3 centroids one-to-one to 2 slots"):
        match_to_reference(column(0, 1, 2), column(0, 1))
    with pytest.raises(ValueError, match=r"shape \(k, 1\)"):
        match_average([np.zeros((2, 2))], column(0, 1))
    with pytest.raises(ValueError, match="no centroid sets"):
        best_match_average([])
    with pytest.raises(ValueError, match="NaN"):
        match_to_reference(column(np.nan), column(0))


def test_match_order_minimises_the_total_squared_distance():
    reference = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    new = np.array([[0.0, 9.0], [1.0, 0.0], [9.0, 1.0]])
    np.testing.assert_array_equal(match_order(new, reference), new[[1, 2, 0]])


def test_empty_slots_take_the_worst_represented_local_centroids():
    # Slots 1 and 3 are empty; the anchors are 0 and 10. Local centroids 0, 10, 20, 21
    # with counts 5, 5, 1, 4: count * squared distance to the nearest anchor 0, 0, 100,
    # 484, so slot 1 takes 21; then 20 is 1 from 21 (gain 1 * 1) and slot 3 takes it.
    centroids = column(0, 55, 10, 77)
    local, counts = column(0, 10, 20, 21), np.array([5.0, 5.0, 1.0, 4.0])
    new, used = fill_empty_slots(centroids, np.array([False, True, False, True]), local, counts)
    np.testing.assert_array_equal(new, column(0, 21, 10, 20))
    np.testing.assert_array_equal(used, [False, False, True, True])
    # Used ones are not placed again, and a local centroid on an anchor gains nothing.
    again, still = fill_empty_slots(new, np.array([False, True, False, False]), local, counts, used)
    np.testing.assert_array_equal(again, new)
    np.testing.assert_array_equal(still, used)


def test_fill_empty_slots_checks_its_input():
    with pytest.raises(ValueError, match="empty must have shape"):
        fill_empty_slots(column(0, 1), np.array([True]), column(0), np.ones(1))
    with pytest.raises(ValueError, match="local_counts and used"):
        fill_empty_slots(column(0, 1), np.array([True, False]), column(0), np.ones(2))
    with pytest.raises(ValueError, match="finite and >= 0"):
        fill_empty_slots(column(0, 1), np.array([True, False]), column(0), -np.ones(1))
