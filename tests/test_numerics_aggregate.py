"""Tests of the DWF server aggregation (eq. 3-6 of the DWF k-means paper)."""

from pathlib import Path

import numpy as np
import pytest

import fedcluster
from fedcluster.numerics import frobenius_movement, lloyd, momentum_update, weighted_centroid_mean

SIPU = Path(fedcluster.__file__).parent / "data" / "sipu"


def test_dwf_weighted_mean_by_hand():
    local = np.array(
        [
            [[0.0, 0.0], [10.0, 10.0]],  # client 1, counts (3, 1)
            [[4.0, 0.0], [20.0, 10.0]],  # client 2, counts (1, 3)
        ]
    )
    counts = np.array([[3.0, 1.0], [1.0, 3.0]])
    # Cluster 1: (3 * (0, 0) + 1 * (4, 0)) / 4 = (1, 0).
    # Cluster 2: (1 * (10, 10) + 3 * (20, 10)) / 4 = (17.5, 10).
    np.testing.assert_allclose(
        weighted_centroid_mean(local, counts), [[1.0, 0.0], [17.5, 10.0]], rtol=1e-15
    )


def test_ewf_weights_give_the_plain_mean():
    local = np.array([[[0.0, 0.0]], [[4.0, 2.0]], [[2.0, 7.0]]])
    np.testing.assert_allclose(weighted_centroid_mean(local, np.ones((3, 1))), [[2.0, 3.0]])


def test_fallback_to_equal_weights_only_for_the_all_zero_cluster():
    local = np.array(
        [
            [[0.0, 0.0], [1.0, 1.0]],  # client 1, counts (2, 0)
            [[4.0, 8.0], [3.0, 5.0]],  # client 2, counts (6, 0)
            [[100.0, 100.0], [5.0, 0.0]],  # client 3, counts (0, 0)
        ]
    )
    counts = np.array([[2.0, 0.0], [6.0, 0.0], [0.0, 0.0]])
    # Cluster 1 is weighted and ignores client 3: (2 * (0, 0) + 6 * (4, 8)) / 8 = (3, 6).
    # Cluster 2 has no weight anywhere: mean over all three clients,
    # ((1, 1) + (3, 5) + (5, 0)) / 3 = (3, 2).
    np.testing.assert_allclose(
        weighted_centroid_mean(local, counts), [[3.0, 6.0], [3.0, 2.0]], rtol=1e-15
    )


def test_momentum_update_by_hand():
    current = np.array([[2.0, 4.0], [0.0, 0.0]])
    previous = np.array([[1.0, 1.0], [0.0, -5.0]])
    aggregate = np.array([[6.0, 0.0], [0.0, 0.0]])
    # Row 1: (2, 4) + 0.5 * (4, -4) + 0.8 * (1, 3) = (4.8, 4.4).
    # Row 2: (0, 0) + 0.5 * (0, 0) + 0.8 * (0, 5) = (0, 4).
    np.testing.assert_allclose(
        momentum_update(current, previous, aggregate, lr=0.5, momentum=0.8),
        [[4.8, 4.4], [0.0, 4.0]],
        rtol=1e-15,
    )
    # First round, C(-1) = C(0): the momentum term vanishes.
    # Row 1: (2, 4) + 0.5 * (4, -4) = (4, 2); row 2 stays at (0, 0).
    np.testing.assert_allclose(
        momentum_update(current, current, aggregate, lr=0.5, momentum=0.8),
        [[4.0, 2.0], [0.0, 0.0]],
        rtol=1e-15,
    )


def test_one_dwf_round_equals_one_centralized_lloyd_step():
    X = np.loadtxt(SIPU / "s1.txt")
    truth = np.loadtxt(SIPU / "s1-cb.txt")
    start = X[[np.argmin(((X - c) ** 2).sum(axis=1)) for c in truth]]
    # Non-IID split of unequal sizes: sorted along the first coordinate, so
    # most clients see only a few clusters and send empty ones back unchanged.
    parts = np.split(X[np.argsort(X[:, 0], kind="stable")], [400, 1500, 1700, 3100])

    results = [lloyd(part, start, max_iter=1) for part in parts]
    counts = np.stack([r.first.counts for r in results])
    assert (counts == 0).any() and (counts.sum(axis=0) > 0).all()
    aggregate = weighted_centroid_mean(np.stack([r.centroids for r in results]), counts)
    federated = momentum_update(start, start, aggregate, lr=1.0, momentum=0.0)

    central = lloyd(X, start, max_iter=1).centroids
    np.testing.assert_allclose(federated, central, rtol=1e-9)


def test_frobenius_movement():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    b = np.array([[1.0, 0.0], [0.0, 4.0]])
    assert frobenius_movement(a, b) == pytest.approx(np.sqrt(4.0 + 9.0))
    assert isinstance(frobenius_movement(a, a), float)
    with pytest.raises(ValueError, match="a and b must have the same shape"):
        frobenius_movement(a, b[:1])


@pytest.mark.parametrize(
    ("local", "weights", "message"),
    [
        (np.zeros((2, 3)), np.ones((2, 3)), "local_centroids must be a 3-D array"),
        (np.zeros((0, 3, 2)), np.ones((0, 3)), "n_clients >= 1"),
        (
            np.zeros((2, 3, 2)),
            np.ones((2, 2)),
            r"weights must have shape \(n_clients, k\) = \(2, 3\)",
        ),
        (np.zeros((2, 3, 2)), -np.ones((2, 3)), "weights must be non-negative"),
        (np.zeros((2, 3, 2)), np.full((2, 3), np.nan), "weights must not contain NaN"),
        (np.full((2, 3, 2), np.inf), np.ones((2, 3)), "local_centroids must not contain NaN"),
    ],
)
def test_weighted_centroid_mean_validation(local, weights, message):
    with pytest.raises(ValueError, match=message):
        weighted_centroid_mean(local, weights)


@pytest.mark.parametrize(
    ("lr", "momentum", "message"),
    [
        (0.0, 0.0, "lr must satisfy 0 < lr <= 1"),
        (1.5, 0.0, "lr must satisfy 0 < lr <= 1"),
        (float("nan"), 0.0, "lr must satisfy"),
        (1.0, 1.0, "momentum must satisfy 0 <= momentum < 1"),
        (1.0, -0.1, "momentum must satisfy 0 <= momentum < 1"),
    ],
)
def test_momentum_update_validation(lr, momentum, message):
    c = np.zeros((2, 2))
    with pytest.raises(ValueError, match=message):
        momentum_update(c, c, c, lr=lr, momentum=momentum)


def test_momentum_update_shape_check():
    c = np.zeros((2, 2))
    with pytest.raises(ValueError, match="must have the same shape"):
        momentum_update(c, c, np.zeros((3, 2)), lr=1.0, momentum=0.0)


# -- bounded influence: share cap, trimmed mean, median, spread check ----------------

from fedcluster.methods.dwf.kernels import cap_client_shares, robust_centroid_aggregate
from fedcluster.numerics.outliers import spread_outliers


def test_cap_clips_the_dominant_client_to_the_share_by_hand():
    weights = np.array([[100.0, 1.0, 5.0, 0.0],
                        [1.0, 1.0, 2.0, 0.0],
                        [1.0, 1.0, 0.0, 0.0],
                        [1.0, 1.0, 0.0, 0.0]])
    capped = cap_client_shares(weights, 0.3)
    # Cluster 0: the level tau = 0.3 * (tau + 3) gives tau = 0.9 / 0.7 = 9/7, and
    # (9/7) / (9/7 + 3) = 0.3 exactly; the three small clients keep their weight 1.
    np.testing.assert_allclose(capped[:, 0], [9 / 7, 1.0, 1.0, 1.0], rtol=1e-15)
    assert capped[0, 0] / capped[:, 0].sum() == pytest.approx(0.3, rel=1e-14)
    # Cluster 1: four equal weights, shares 0.25 <= 0.3: unchanged, bit for bit.
    assert np.array_equal(capped[:, 1], weights[:, 1])
    # Cluster 2: two holders (fewer than 1 / 0.3): the cap cannot hold; both get
    # the smaller holder's weight, equal shares 1/2.
    np.testing.assert_array_equal(capped[:, 2], [2.0, 2.0, 0.0, 0.0])
    # Cluster 3: nobody holds it: zeros stay (eq. 4's fallback applies later).
    np.testing.assert_array_equal(capped[:, 3], 0.0)
    # Aggregated: cluster 0 moves 0.3 of the way to the dominant client, not 100/103.
    local = np.zeros((4, 4, 1))
    local[0, 0, 0] = 1000.0
    assert weighted_centroid_mean(local, capped)[0, 0] == pytest.approx(300.0, rel=1e-14)
    assert weighted_centroid_mean(local, weights)[0, 0] == pytest.approx(1000 * 100 / 103)


def test_cap_one_is_the_identity_and_two_clients_at_one_half_are_equal():
    weights = np.array([[7.0, 0.0], [3.0, 4.0]])
    assert np.array_equal(cap_client_shares(weights, 1.0), weights)
    np.testing.assert_array_equal(cap_client_shares(weights, 0.5), [[3.0, 0.0], [3.0, 4.0]])


@pytest.mark.parametrize("share", [0.1, 0.25, 0.3, 0.5, 0.9])
def test_cap_holds_after_renormalisation_when_enough_clients_hold(share):
    rng = np.random.default_rng(4)
    for _ in range(50):
        m = int(rng.integers(int(np.ceil(1 / share)), 30))
        weights = np.floor(rng.pareto(0.8, size=(m, 6)) * 100) + 1  # heavy-tailed, all > 0
        capped = cap_client_shares(weights, share)
        shares = capped / capped.sum(axis=0)
        assert shares.max() <= share * (1 + 1e-12)
        level = capped.max(axis=0)
        # Below the level nothing changes; at it, every clipped weight was larger.
        kept = weights < level
        assert np.array_equal(capped[kept], weights[kept])
        assert np.all(weights[~kept] >= capped[~kept])


def test_trimmed_mean_and_median_over_the_holders_by_hand():
    # One feature, one cluster held by five clients; client 5 holds nothing.
    values = np.array([0.0, 1.0, 2.0, 3.0, 100.0, -1e9])[:, None, None]
    counts = np.array([1.0, 1.0, 1.0, 1.0, 1e6, 0.0])[:, None]
    # trim 0.2 of 5 holders: one value cut at each end, mean of (1, 2, 3).
    assert robust_centroid_aggregate(values, counts, method="trimmed-mean",
                                     trim_fraction=0.2)[0, 0] == 2.0
    # trim 0: the unweighted mean of the holders (the counts do not weigh).
    assert robust_centroid_aggregate(values, counts, method="trimmed-mean",
                                     trim_fraction=0.0)[0, 0] == pytest.approx(106 / 5)
    assert robust_centroid_aggregate(values, counts, method="median")[0, 0] == 2.0
    # An even number of holders: the mean of the two middle values.
    counts[0] = 0.0
    assert robust_centroid_aggregate(values, counts, method="median")[0, 0] == 2.5
    # Fewer than 1 / trim_fraction holders: nothing is cut.
    assert robust_centroid_aggregate(values[:3], np.ones((3, 1)), method="trimmed-mean",
                                     trim_fraction=0.3)[0, 0] == 1.0


def test_robust_aggregates_are_coordinate_wise_per_cluster_with_a_robust_eq4_fallback():
    local = np.array([
        [[0.0, 10.0], [5.0, 5.0]],
        [[1.0, 30.0], [6.0, 5.0]],
        [[2.0, 20.0], [900.0, 5.0]],
        [[1e6, 1e6], [7.0, 5.0]],
    ])
    counts = np.array([[3.0, 0.0], [1.0, 0.0], [2.0, 0.0], [0.0, 0.0]])
    result = robust_centroid_aggregate(local, counts, method="median")
    # Cluster 0: holders 0-2 only; the medians of (0, 1, 2) and (10, 30, 20), each
    # feature on its own (no client's centroid is (1, 20)).
    np.testing.assert_array_equal(result[0], [1.0, 20.0])
    # Cluster 1: nobody holds it; eq. 4's equal weights over all four clients
    # become the median over all four: (6 + 7) / 2, and 5.
    np.testing.assert_array_equal(result[1], [6.5, 5.0])


@pytest.mark.parametrize(("method", "trim", "message"), [
    ("mode", 0.0, "method must be one of"),
    ("trimmed-mean", 0.5, r"trim_fraction must be in \[0, 0.5\)"),
    ("trimmed-mean", -0.1, "trim_fraction must be in"),
])
def test_robust_aggregate_validation(method, trim, message):
    with pytest.raises(ValueError, match=message):
        robust_centroid_aggregate(np.zeros((2, 1, 1)), np.ones((2, 1)), method=method,
                                  trim_fraction=trim)


@pytest.mark.parametrize("share", [0.0, 1.5, float("nan")])
def test_cap_validation(share):
    with pytest.raises(ValueError, match=r"max_share must be in \(0, 1\]"):
        cap_client_shares(np.ones((2, 2)), share)
    with pytest.raises(ValueError, match="weights must be non-negative"):
        cap_client_shares(-np.ones((2, 2)), 0.5)


def _local_kmeans_of(parts, k=5, seed=0):
    from fedcluster.numerics import kmeans

    results = [kmeans(p, k, rng=np.random.default_rng(seed)) for p in parts]
    return [r.centroids for r in results], [r.counts for r in results]


def test_spread_check_names_the_client_in_other_units_and_no_honest_one():
    X = np.loadtxt(SIPU / "s1.txt")
    parts = np.array_split(X[np.random.default_rng(0).permutation(len(X))], 8)
    centroids, counts = _local_kmeans_of(parts)
    assert spread_outliers(centroids, counts) == []
    parts[5] = parts[5] * 1e6
    centroids, counts = _local_kmeans_of(parts)
    [(client, feature, ratio)] = spread_outliers(centroids, counts)
    assert client == 5 and feature in (0, 1) and 1e5 < ratio < 1e7


def test_spread_check_names_the_feature_and_needs_three_clients():
    X = np.loadtxt(SIPU / "s1.txt")
    parts = np.array_split(X[np.random.default_rng(1).permutation(len(X))], 5)
    parts[2] = parts[2] * np.array([1.0, 1e3])  # feature 1 in other units
    centroids, counts = _local_kmeans_of(parts)
    [(client, feature, ratio)] = spread_outliers(centroids, counts)
    assert (client, feature) == (2, 1) and ratio > 100
    assert spread_outliers(centroids[1:3], counts[1:3]) == []  # two clients: nobody to blame


def test_spread_check_ignores_a_nearly_constant_feature():
    # Feature 1 is nearly zero everywhere (an image's border pixel): one faint row per
    # client, and five inked rows at one client.
    rng = np.random.default_rng(2)
    parts = [np.column_stack([rng.uniform(0, 1, 200), np.zeros(200)]) for _ in range(6)]
    for part in parts:
        part[0, 1] = 0.001
    parts[0][:5, 1] = 1.0
    centroids, counts = _local_kmeans_of(parts, k=3)
    # Against the others' median alone it would be hundreds of times theirs ...
    [(client, feature, ratio)] = spread_outliers(centroids, counts, floor=0.0)
    assert (client, feature) == (0, 1) and ratio > 100
    # ... but the floor (a tenth of the typical spread over all features) keeps it quiet.
    assert spread_outliers(centroids, counts) == []
