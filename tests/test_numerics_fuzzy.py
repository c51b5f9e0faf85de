"""The FFCM kernels of fedcluster.methods.ffcm.kernels against hand-computed cases (paper 001)."""

from __future__ import annotations

import numpy as np
import pytest

from fedcluster.methods.ffcm.kernels import fuzzy_step, kmeans_average, memberships, summed_movement

# Centres 0 and 2 on a line; points 0.5, 1 and 3.
HAND_X = np.array([[0.5], [1.0], [3.0]])
HAND_C = np.array([[0.0], [2.0]])


def reference_memberships(X, C, m):
    """Bezdek's rule written plainly: u_ij = 1 / sum_k (d_ij / d_ik)^(2/(m-1))."""
    d = np.sqrt(((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2))
    return 1.0 / ((d[:, :, None] / d[:, None, :]) ** (2.0 / (m - 1.0))).sum(axis=2)


def test_memberships_hand_case_m2():
    # m = 2: u_ij ~ 1 / d_ij^2. x = 0.5: d^2 = (0.25, 2.25) -> (4, 4/9) / (40/9) = (0.9, 0.1);
    # x = 1 is equidistant -> (0.5, 0.5); x = 3: d^2 = (9, 1) -> (1/9, 1) / (10/9) = (0.1, 0.9).
    u = memberships(HAND_X, HAND_C, fuzzifier=2.0)
    np.testing.assert_allclose(u, [[0.9, 0.1], [0.5, 0.5], [0.1, 0.9]], rtol=0, atol=1e-15)


def test_memberships_hand_case_m3():
    # m = 3: u_ij ~ 1 / d_ij. x = 0.5: d = (0.5, 1.5) -> (2, 2/3) / (8/3) = (0.75, 0.25).
    u = memberships(HAND_X, HAND_C, fuzzifier=3.0)
    np.testing.assert_allclose(u, [[0.75, 0.25], [0.5, 0.5], [0.25, 0.75]], rtol=0, atol=1e-15)


def test_fuzzy_step_hand_case():
    # u^2 of cluster 0: (0.81, 0.25, 0.01), W_0 = 1.07 (eq. 7);
    # c_0 = (0.81 * 0.5 + 0.25 * 1 + 0.01 * 3) / 1.07 = 0.685 / 1.07 (eq. 6).
    # u^2 of cluster 1: (0.01, 0.25, 0.81), W_1 = 1.07; c_1 = (0.005 + 0.25 + 2.43) / 1.07.
    # Crisp: x = 1 ties and goes to the lower index: counts (2, 1), SSE 0.25 + 1 + 1.
    step = fuzzy_step(HAND_X, HAND_C, fuzzifier=2.0)
    np.testing.assert_allclose(step.centres, [[0.685 / 1.07], [2.685 / 1.07]], rtol=1e-14)
    np.testing.assert_allclose(step.supports, [1.07, 1.07], rtol=1e-14)
    np.testing.assert_array_equal(step.counts, [2.0, 1.0])
    assert step.inertia == pytest.approx(2.25, rel=1e-15)


def test_point_on_a_centre_belongs_to_it_alone():
    C = np.array([[0.0, 0.0], [2.0, 2.0], [-2.0, -2.0]])
    u = memberships(np.array([[2.0, 2.0], [0.0, 0.0]]), C)
    np.testing.assert_array_equal(u, [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    step = fuzzy_step(np.array([[2.0, 2.0], [1.0, 1.0]]), C)
    assert np.all(np.isfinite(step.centres)) and np.all(np.isfinite(step.supports))


def test_coincident_centres_share_equally():
    # Two identical centres at (2, 2): a point there splits its membership between them;
    # (1, 1) is equally far from all three centres.
    C = np.array([[2.0, 2.0], [2.0, 2.0], [0.0, 0.0]])
    u = memberships(np.array([[2.0, 2.0], [1.0, 1.0], [3.0, 3.0]]), C)
    np.testing.assert_allclose(u[0], [0.5, 0.5, 0.0], rtol=0, atol=0)
    np.testing.assert_allclose(u[1], [1 / 3, 1 / 3, 1 / 3], rtol=1e-15)
    # (3, 3): d^2 = (2, 2, 18) -> (1/2, 1/2, 1/18) / (19/18).
    np.testing.assert_allclose(u[2], [9 / 19, 9 / 19, 1 / 19], rtol=1e-14)


def test_unsupported_centre_keeps_its_position():
    # Every point sits on centre 0, so centre 1 has support 0 (0/0 in eq. 6).
    step = fuzzy_step(np.array([[1.0], [1.0]]), np.array([[1.0], [5.0]]))
    np.testing.assert_array_equal(step.supports, [2.0, 0.0])
    np.testing.assert_array_equal(step.centres, [[1.0], [5.0]])
    assert step.inertia == 0.0


@pytest.mark.parametrize("m", [1.1, 1.5, 2.0, 4.0])
def test_memberships_match_the_plain_formula_and_do_not_depend_on_chunks(m):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(101, 3))
    C = rng.normal(size=(4, 3))
    expected = reference_memberships(X, C, m)
    for chunk in (1, 7, 1000):
        u = memberships(X, C, fuzzifier=m, chunk_size=chunk)
        np.testing.assert_allclose(u, expected, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(u.sum(axis=1), 1.0, rtol=1e-14)
    steps = [fuzzy_step(X, C, fuzzifier=m, chunk_size=chunk) for chunk in (1, 7, 1000)]
    w = expected**m
    np.testing.assert_allclose(steps[0].centres, (w.T @ X) / w.sum(axis=0)[:, None], rtol=1e-12)
    for step in steps[1:]:
        np.testing.assert_allclose(step.centres, steps[0].centres, rtol=1e-13)
        np.testing.assert_allclose(step.supports, steps[0].supports, rtol=1e-13)
        assert step.inertia == pytest.approx(steps[0].inertia, rel=1e-13)


def test_memberships_stay_accurate_far_from_the_origin():
    # Unit-spread data offset by 1e6: the expansion around the centres' mean keeps
    # the relative error of the distances near machine precision.
    rng = np.random.default_rng(1)
    X = 1e6 + rng.normal(size=(200, 2))
    C = 1e6 + rng.normal(size=(3, 2))
    np.testing.assert_allclose(memberships(X, C), reference_memberships(X, C, 2.0), rtol=1e-9)


def test_parameters_are_checked():
    for bad in (1.0, 0.5, float("inf"), True):
        with pytest.raises(ValueError, match="fuzzifier"):
            memberships(HAND_X, HAND_C, fuzzifier=bad)
    with pytest.raises(ValueError, match="features"):
        fuzzy_step(HAND_X, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="chunk_size"):
        fuzzy_step(HAND_X, HAND_C, chunk_size=0)


def test_kmeans_average_hand_case_and_matching():
    # Local centres {0, 10} and {1, 11}: 2-means over {0, 1, 10, 11} gives 0.5 and 10.5.
    # The current centres (12, -1) put 10.5 first and 0.5 second.
    local = np.array([[[0.0], [10.0]], [[1.0], [11.0]]])
    found = kmeans_average(local, 2, rng=np.random.default_rng(0), reference=np.array([[12.0], [-1.0]]))
    np.testing.assert_allclose(found, [[10.5], [0.5]], rtol=0, atol=1e-15)
    # The client order does not matter, and the supports play no part.
    again = kmeans_average(local[::-1], 2, rng=np.random.default_rng(0), reference=np.array([[12.0], [-1.0]]))
    np.testing.assert_array_equal(found, again)


def test_kmeans_average_is_unweighted():
    # Three clients report a centre near 0 and one near 3: 1-means is their plain mean 0.75
    # (a support-weighted mean would be anything between 0 and 3).
    local = np.array([[[0.0]], [[0.0]], [[0.0]], [[3.0]]])
    found = kmeans_average(local, 1, rng=np.random.default_rng(0))
    np.testing.assert_allclose(found, [[0.75]], rtol=1e-15)


def test_summed_movement_is_the_sum_of_euclidean_distances():
    # Centre 0 moves by (3, 4), length 5; centre 1 by (0, 1): 5 + 1 (Frobenius would give sqrt 26).
    old = np.array([[0.0, 0.0], [1.0, 1.0]])
    new = np.array([[3.0, 4.0], [1.0, 2.0]])
    assert summed_movement(new, old) == pytest.approx(6.0, rel=1e-15)
    with pytest.raises(ValueError, match="shape"):
        summed_movement(new, old[:1])
