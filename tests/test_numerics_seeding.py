"""Tests of k-means++ seeding, random box initialisation and weighted k-means."""

import numpy as np
import pytest

from fedcluster.numerics import kmeans, kmeans_plusplus, random_in_box

CENTRES = np.array([[0.0, 0.0], [30.0, 0.0], [0.0, 30.0], [30.0, 30.0], [15.0, 60.0]])


@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(0)
    X = np.concatenate([c + rng.normal(size=(50, 2)) for c in CENTRES])
    return X[rng.permutation(len(X))]


def sort_rows(a):
    return a[np.lexsort(a.T[::-1])]


def matched(found, reference):
    """Rows of `found` reordered to face their nearest row of `reference`, one to one."""
    order = ((reference[:, None, :] - found[None]) ** 2).sum(axis=2).argmin(axis=1)
    assert sorted(order) == list(range(len(found)))
    return found[order]


def test_kmeans_plusplus_is_deterministic_for_a_seed(blobs):
    first = kmeans_plusplus(blobs, 5, rng=np.random.default_rng(42))
    second = kmeans_plusplus(blobs, 5, rng=np.random.default_rng(42), chunk_size=7)
    np.testing.assert_array_equal(first, second)
    assert first.shape == (5, 2) and first.dtype == np.float64
    other = kmeans_plusplus(blobs, 5, rng=np.random.default_rng(43))
    assert not np.array_equal(first, other)


def test_kmeans_plusplus_picks_distinct_data_points_one_per_blob(blobs):
    centers = kmeans_plusplus(blobs, 5, rng=np.random.default_rng(1))
    assert all((blobs == c).all(axis=1).any() for c in centers)
    np.testing.assert_allclose(matched(centers, CENTRES), CENTRES, atol=5)


def test_kmeans_plusplus_is_unaffected_by_a_large_offset(blobs):
    # With an offset of 1e9 the plain ||x||^2 - 2 x.c + ||c||^2 expansion
    # would be off by hundreds, more than the blob distances themselves.
    centers = kmeans_plusplus(blobs + 1e9, 5, rng=np.random.default_rng(1)) - 1e9
    np.testing.assert_allclose(matched(centers, CENTRES), CENTRES, atol=5)


def test_kmeans_plusplus_never_picks_zero_weight_points(blobs):
    # Far-away zero-weight points would dominate D^2 sampling if weights were ignored.
    outliers = np.random.default_rng(3).uniform(1e4, 2e4, size=(200, 2))
    X = np.concatenate([blobs, outliers])
    weights = np.concatenate([np.ones(len(blobs)), np.zeros(len(outliers))])
    for seed in range(20):
        centers = kmeans_plusplus(X, 5, rng=np.random.default_rng(seed), sample_weight=weights)
        assert (np.abs(centers) < 100).all()


def test_kmeans_plusplus_with_exactly_k_positive_weights():
    X = np.arange(20, dtype=float).reshape(10, 2)
    weights = np.zeros(10)
    weights[[2, 5, 7]] = [1.0, 3.0, 0.5]
    for seed in range(10):
        centers = kmeans_plusplus(X, 3, rng=np.random.default_rng(seed), sample_weight=weights)
        np.testing.assert_array_equal(sort_rows(centers), X[[2, 5, 7]])


def test_kmeans_plusplus_with_coinciding_points_keeps_away_from_zero_weights():
    # All weighted points coincide: the D^2 potential vanishes after the first pick.
    X = np.array([[1.0, 1.0], [1.0, 1.0], [5.0, 5.0], [1.0, 1.0]])
    weights = np.array([1.0, 1.0, 0.0, 1.0])
    centers = kmeans_plusplus(X, 3, rng=np.random.default_rng(0), sample_weight=weights)
    np.testing.assert_array_equal(centers, np.ones((3, 2)))


def test_kmeans_plusplus_needs_k_positive_weights():
    X = np.arange(8, dtype=float).reshape(4, 2)
    message = r"k=3 exceeds the number of samples with positive weight \(2\)"
    with pytest.raises(ValueError, match=message):
        kmeans_plusplus(X, 3, rng=np.random.default_rng(0), sample_weight=[1, 0, 2, 0])
    with pytest.raises(ValueError, match="exceeds the number of samples"):
        kmeans(X, 5, rng=np.random.default_rng(0))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 0}, "k must be a positive integer"),
        ({"n_local_trials": 0}, "n_local_trials must be a positive integer"),
        ({"chunk_size": -1}, "chunk_size must be a positive integer"),
        ({"sample_weight": [1.0, -1.0, 1.0]}, "sample_weight must be non-negative"),
    ],
)
def test_kmeans_plusplus_validation(kwargs, message):
    args = {"k": 2, "rng": np.random.default_rng(0)} | kwargs
    with pytest.raises(ValueError, match=message):
        kmeans_plusplus(np.eye(3), **args)


def test_kmeans_plusplus_requires_a_generator():
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator"):
        kmeans_plusplus(np.eye(3), 2, rng=0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kmeans_plusplus_compiled_passes_make_the_array_passes_draws(monkeypatch, dtype):
    """The compiled kernels (large NumPy data) choose the same centroids from the same draws as
    the array operations, with weights (zeros among them), duplicated rows and a large offset."""
    from fedcluster.numerics import seeding

    rng = np.random.default_rng(3)
    centres = rng.uniform(-50, 50, size=(40, 8))
    X = (5e5 + centres[rng.integers(40, size=20_000)] + rng.normal(size=(20_000, 8)))
    X[::7] = X[1]  # a row held many times over
    X = X.astype(dtype)
    weights = rng.uniform(0.5, 2.0, size=len(X))
    weights[rng.random(len(X)) < 0.2] = 0.0
    k = 32
    assert seeding._compiled(X, k)
    compiled = [kmeans_plusplus(X, k, rng=np.random.default_rng(seed), sample_weight=weights)
                for seed in range(3)]
    monkeypatch.setattr(seeding, "_compiled", lambda X, k: False)
    arrays = [kmeans_plusplus(X, k, rng=np.random.default_rng(seed), sample_weight=weights)
              for seed in range(3)]
    for ours, reference in zip(compiled, arrays):
        np.testing.assert_array_equal(ours, reference)
        holders = (X[:, None, :] == ours[None].astype(dtype)).all(axis=2)  # (rows, centroids)
        assert (np.where(holders, weights[:, None], 0.0).max(axis=0) > 0).all()
    assert not np.array_equal(compiled[0], compiled[1])


def test_random_in_box_stays_inside_and_is_reproducible():
    low, high = np.array([-1.0, 10.0, 5.0]), np.array([1.0, 20.0, 5.0])
    centers = random_in_box(low, high, 500, rng=np.random.default_rng(0))
    assert centers.shape == (500, 3)
    assert (centers >= low).all() and (centers <= high).all()
    np.testing.assert_array_equal(centers[:, 2], 5.0)
    again = random_in_box(low, high, 500, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(centers, again)


@pytest.mark.parametrize(
    ("low", "high", "k", "message"),
    [
        ([0.0, 2.0], [1.0, 1.0], 2, "low must not exceed high"),
        ([0.0, 0.0], [1.0, 1.0, 1.0], 2, "low and high must be 1-D arrays of the same shape"),
        ([[0.0]], [[1.0]], 2, "low and high must be 1-D arrays"),
        ([0.0, np.nan], [1.0, 1.0], 2, "low must not contain NaN"),
        ([0.0], [1.0], 0, "k must be a positive integer"),
    ],
)
def test_random_in_box_validation(low, high, k, message):
    with pytest.raises(ValueError, match=message):
        random_in_box(np.array(low), np.array(high), k, rng=np.random.default_rng(0))


def test_kmeans_recovers_blob_centres(blobs):
    result = kmeans(blobs, 5, rng=np.random.default_rng(0), n_init=2)
    np.testing.assert_allclose(matched(result.centroids, CENTRES), CENTRES, atol=0.5)
    np.testing.assert_array_equal(np.sort(result.counts), np.full(5, 50.0))


def test_weighted_kmeans_equals_kmeans_on_duplicated_points(blobs):
    weights = np.random.default_rng(5).integers(1, 4, size=len(blobs))
    weighted = kmeans(blobs, 5, rng=np.random.default_rng(0), sample_weight=weights, n_init=2)
    repeated = kmeans(np.repeat(blobs, weights, axis=0), 5, rng=np.random.default_rng(1), n_init=2)
    np.testing.assert_allclose(
        matched(weighted.centroids, repeated.centroids), repeated.centroids, rtol=1e-9
    )
    assert weighted.inertia == pytest.approx(repeated.inertia, rel=1e-9)
    np.testing.assert_array_equal(np.sort(weighted.counts), np.sort(repeated.counts))


def test_kmeans_keeps_the_best_of_several_starts(blobs):
    single = [kmeans(blobs, 5, rng=np.random.default_rng(s), tol=0, max_iter=50) for s in range(4)]
    best = kmeans(blobs, 5, rng=np.random.default_rng(0), n_init=4, tol=0, max_iter=50)
    assert best.inertia <= min(r.inertia for r in single) * (1 + 1e-12)


def test_kmeans_validation(blobs):
    with pytest.raises(ValueError, match="n_init must be a positive integer"):
        kmeans(blobs, 5, rng=np.random.default_rng(0), n_init=0)
