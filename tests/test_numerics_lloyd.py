"""Tests of the chunked Lloyd kernels in fedcluster.numerics.lloyd."""

import numpy as np
import pytest
from sklearn.cluster import KMeans
from helpers import naive_stats

from fedcluster.numerics import DEFAULT_CHUNK_SIZE, ClusterStats, assign, cluster_stats, lloyd, update_centroids


@pytest.fixture(scope="module")
def blobs_and_start():
    """Five well-separated blobs in 3-D and a start with one point per blob."""
    rng = np.random.default_rng(0)
    centres = np.array(
        [[0, 0, 0], [20, 0, 0], [0, 20, 0], [0, 0, 20], [20, 20, 20]], dtype=float
    )
    X = np.concatenate([c + rng.normal(size=(40 + 7 * i, 3)) for i, c in enumerate(centres)])
    rng.shuffle(X)
    init = X[[np.argmin(((X - c) ** 2).sum(axis=1)) for c in centres]] + 0.5
    return X, init


def sklearn_one_step(X, init):
    km = KMeans(n_clusters=len(init), init=init, n_init=1, max_iter=1, algorithm="lloyd")
    return km.fit(X).cluster_centers_


@pytest.mark.parametrize("data", ["blobs", "s1"])
def test_one_step_matches_naive_and_sklearn(data, request):
    X, init = request.getfixturevalue(f"{data}_and_start")
    labels, expected = naive_stats(X, init)
    assert (expected.counts > 0).all()

    stats = cluster_stats(X, init)
    np.testing.assert_array_equal(assign(X, init)[0], labels)
    np.testing.assert_array_equal(stats.counts, expected.counts)
    np.testing.assert_allclose(stats.sums, expected.sums, rtol=1e-12)
    assert stats.inertia == pytest.approx(expected.inertia, rel=1e-12)

    result = lloyd(X, init, max_iter=1)
    assert result.n_iter == 1
    np.testing.assert_allclose(
        result.centroids, expected.sums / expected.counts[:, None], rtol=1e-12
    )
    np.testing.assert_allclose(result.centroids, sklearn_one_step(X, init), rtol=1e-9)
    np.testing.assert_array_equal(result.counts, expected.counts)


def test_assign_returns_labels_and_squared_distances(blobs_and_start):
    X, init = blobs_and_start
    labels, sqdist = assign(X, init)
    assert labels.dtype == np.int64 and sqdist.dtype == np.float64
    np.testing.assert_allclose(sqdist, ((X - init[labels]) ** 2).sum(axis=1), rtol=1e-12)


def test_assign_breaks_ties_towards_lowest_index():
    X = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 0.0]])
    centroids = np.array([[2.0, 0.0], [0.0, 0.0], [2.0, 0.0], [0.0, 0.0]])
    labels, _ = assign(X, centroids)
    np.testing.assert_array_equal(labels, [1, 0, 0])


@pytest.mark.parametrize("data", ["blobs", "s1"])
def test_chunk_size_does_not_change_results(data, request):
    X, init = request.getfixturevalue(f"{data}_and_start")
    reference = cluster_stats(X, init, chunk_size=DEFAULT_CHUNK_SIZE)
    for chunk_size in (1, 7, len(X)):
        stats = cluster_stats(X, init, chunk_size=chunk_size)
        np.testing.assert_array_equal(stats.counts, reference.counts)
        np.testing.assert_allclose(stats.sums, reference.sums, rtol=1e-13)
        assert stats.inertia == pytest.approx(reference.inertia, rel=1e-13)
        np.testing.assert_array_equal(
            assign(X, init, chunk_size=chunk_size)[0], assign(X, init)[0]
        )
    np.testing.assert_allclose(
        lloyd(X, init, max_iter=5, tol=0, chunk_size=7).centroids,
        lloyd(X, init, max_iter=5, tol=0).centroids,
        rtol=1e-12,
    )


@pytest.mark.parametrize("data", ["blobs", "s1"])
def test_float32_input_accumulates_in_float64(data, request):
    X, init = request.getfixturevalue(f"{data}_and_start")
    stats32 = cluster_stats(X.astype(np.float32), init)
    stats64 = cluster_stats(X.astype(np.float32).astype(np.float64), init)
    assert stats32.sums.dtype == np.float64 and stats32.counts.dtype == np.float64
    np.testing.assert_array_equal(stats32.counts, stats64.counts)
    np.testing.assert_allclose(stats32.sums, stats64.sums, rtol=1e-12)
    assert stats32.inertia == pytest.approx(stats64.inertia, rel=1e-12)
    reference = cluster_stats(X, init)
    np.testing.assert_allclose(stats32.sums, reference.sums, rtol=1e-6)
    assert stats32.inertia == pytest.approx(reference.inertia, rel=1e-4)
    assert lloyd(X.astype(np.float32), init, max_iter=1).centroids.dtype == np.float64


def test_integer_weights_equal_repeated_rows(blobs_and_start):
    X, init = blobs_and_start
    weights = np.random.default_rng(1).integers(0, 4, size=len(X))
    repeated = np.repeat(X, weights, axis=0)

    stats = cluster_stats(X, init, sample_weight=weights)
    expected = cluster_stats(repeated, init)
    np.testing.assert_array_equal(stats.counts, expected.counts)
    np.testing.assert_allclose(stats.sums, expected.sums, rtol=1e-12)
    assert stats.inertia == pytest.approx(expected.inertia, rel=1e-12)
    np.testing.assert_allclose(
        naive_stats(X, init, weights.astype(float))[1].sums, stats.sums, rtol=1e-12
    )

    weighted = lloyd(X, init, sample_weight=weights, tol=0, max_iter=10)
    plain = lloyd(repeated, init, tol=0, max_iter=10)
    np.testing.assert_allclose(weighted.centroids, plain.centroids, rtol=1e-12)
    np.testing.assert_array_equal(weighted.counts, plain.counts)


def test_empty_cluster_keeps_its_centroid(blobs_and_start):
    X, init = blobs_and_start
    far = np.array([[1e3, -1e3, 1e3]])
    start = np.concatenate([init[:2], far, init[2:]])
    stats = cluster_stats(X, start)
    assert stats.counts[2] == 0
    np.testing.assert_array_equal(update_centroids(stats, start)[2], far[0])

    result = lloyd(X, start, max_iter=20)
    np.testing.assert_array_equal(result.centroids[2], far[0])
    assert result.counts[2] == 0


def test_zero_weight_cluster_counts_as_empty(blobs_and_start):
    X, init = blobs_and_start
    labels, _ = assign(X, init)
    weights = np.where(labels == 0, 0.0, 1.0)
    result = lloyd(X, init, max_iter=1, sample_weight=weights)
    np.testing.assert_array_equal(result.centroids[0], init[0])


def test_inertia_is_accurate_on_s1(s1_and_start):
    X, init = s1_and_start
    # Non-integer centroids: with S1's integer coordinates and integer
    # centroids even the ||x||^2 - 2 x.c + ||c||^2 expansion would be exact.
    centroids = lloyd(X, init, max_iter=1).centroids
    labels, _ = naive_stats(X, centroids)
    diff = X.astype(np.longdouble) - centroids.astype(np.longdouble)[labels]
    reference = float((diff * diff).sum())
    assert cluster_stats(X, centroids).inertia == pytest.approx(reference, rel=1e-12)


def test_inertia_is_accurate_with_large_offset():
    rng = np.random.default_rng(2)
    X = 1e6 + rng.normal(size=(500, 2))
    centroids = X[:4] + 0.25
    labels, _ = naive_stats(X, centroids)
    diff = X.astype(np.longdouble) - centroids.astype(np.longdouble)[labels]
    assert cluster_stats(X, centroids, chunk_size=64).inertia == pytest.approx(
        float((diff * diff).sum()), rel=1e-12
    )


def test_lloyd_stopping_rules(blobs_and_start):
    X, init = blobs_and_start
    assert lloyd(X, init, max_iter=7, tol=0).n_iter == 7
    converged = lloyd(X, init)
    assert 1 < converged.n_iter < 300
    again = lloyd(X, converged.centroids, max_iter=5)
    assert again.n_iter == 1
    np.testing.assert_allclose(again.centroids, converged.centroids, atol=1e-4)
    assert again.inertia == pytest.approx(cluster_stats(X, converged.centroids).inertia)


def test_lloyd_first_is_the_assignment_against_the_start(blobs_and_start):
    X, init = blobs_and_start
    result = lloyd(X, init, max_iter=10)
    expected = cluster_stats(X, init)
    np.testing.assert_array_equal(result.first.counts, expected.counts)
    np.testing.assert_array_equal(result.first.sums, expected.sums)
    assert result.first.inertia == expected.inertia
    assert isinstance(result.inertia, float) and isinstance(result.first.inertia, float)


def test_lloyd_matches_sklearn_to_convergence(blobs_and_start):
    X, init = blobs_and_start
    km = KMeans(n_clusters=len(init), init=init, n_init=1, algorithm="lloyd", tol=0).fit(X)
    result = lloyd(X, init, tol=0, max_iter=50)
    np.testing.assert_allclose(result.centroids, km.cluster_centers_, rtol=1e-9)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"X": np.zeros(3)}, "X must be a 2-D array"),
        ({"X": np.zeros((0, 2))}, "at least one sample"),
        ({"X": np.array([[np.nan, 0.0]])}, "X must not contain NaN"),
        ({"X": np.array([["a", "b"]])}, "X must hold real numbers"),
        ({"centroids": np.zeros((0, 2))}, "at least one centroid"),
        ({"centroids": np.zeros((2, 3))}, "has 3 features but X has 2"),
        ({"centroids": np.zeros(2)}, "centroids must be a 2-D array"),
        ({"chunk_size": 0}, "chunk_size must be a positive integer"),
        ({"chunk_size": 2.5}, "chunk_size must be a positive integer"),
        ({"sample_weight": np.ones(3)}, r"sample_weight must have shape \(n_samples,\) = \(4,\)"),
        ({"sample_weight": -np.ones(4)}, "sample_weight must be non-negative"),
        ({"sample_weight": np.array([1, 1, np.inf, 1])}, "sample_weight must not contain NaN"),
    ],
)
def test_cluster_stats_validation(kwargs, message):
    args = {"X": np.zeros((4, 2)), "centroids": np.zeros((2, 2))} | kwargs
    with pytest.raises(ValueError, match=message):
        cluster_stats(args.pop("X"), args.pop("centroids"), **args)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_iter": 0}, "max_iter must be a positive integer"),
        ({"tol": -1.0}, "tol must be a finite number >= 0"),
        ({"tol": float("nan")}, "tol must be a finite number >= 0"),
        ({"init": np.zeros((2, 3))}, "init has 3 features but X has 2"),
    ],
)
def test_lloyd_validation(kwargs, message):
    args = {"init": np.zeros((2, 2))} | kwargs
    with pytest.raises(ValueError, match=message):
        lloyd(np.zeros((4, 2)), args.pop("init"), **args)


def test_update_centroids_validation():
    stats = ClusterStats(np.zeros((2, 2)), np.zeros(2), 0.0)
    with pytest.raises(ValueError, match="previous must have the shape"):
        update_centroids(stats, np.zeros((3, 2)))
