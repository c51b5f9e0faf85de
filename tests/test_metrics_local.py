"""What a client computes for the federated metrics (fedcluster.metrics.local)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import fedcluster.numerics.distance as distance_module
from fedcluster.metrics import LocalStatistics, local_statistics
from fedcluster.numerics.backend import get_namespace


@pytest.fixture
def rows():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 4)) * 3
    labels = rng.choice([11, -2, 30], size=300)
    centroids = rng.normal(size=(5, 4)) * 3
    return X, labels, centroids


def test_statistics_by_hand():
    # 1-D rows 0, 1, 4, 10 and centroids 0 and 9: clusters {0, 1, 4} and {10}.
    X = np.array([[0.0], [1.0], [4.0], [10.0]])
    stats = local_statistics(X, np.array([[0.0], [9.0]]), np.array([3, 3, 5, 5]))
    assert stats.n == 4 and stats.k == 2 and stats.dimension == 1
    np.testing.assert_array_equal(stats.counts, [3, 1])
    np.testing.assert_array_equal(stats.sums, [[5.0], [10.0]])
    np.testing.assert_array_equal(stats.cluster_sse, [17.0, 1.0])
    assert stats.sse == 18.0
    np.testing.assert_array_equal(stats.distance_sums, [5.0, 1.0])
    assert stats.outside_distance == 9.0 + 8.0 + 5.0 + 10.0
    assert stats.outside_sse == 81.0 + 64.0 + 25.0 + 100.0
    # (b - a) / max(a, b): row 0: (9-0)/9, row 1: (8-1)/8, row 4: (5-4)/5, row 10: (10-1)/10.
    assert stats.silhouette_sum == pytest.approx(1 + 7 / 8 + 1 / 5 + 9 / 10)
    np.testing.assert_array_equal(stats.label_values, [3, 5])
    np.testing.assert_array_equal(stats.contingency, [[2, 1], [0, 1]])


def test_nothing_per_row_leaves_the_client(rows):
    X, labels, centroids = rows
    stats = local_statistics(X, centroids, labels)
    for field in dataclasses.fields(LocalStatistics):
        value = getattr(stats, field.name)
        if isinstance(value, np.ndarray):
            assert len(X) not in value.shape, field.name
    assert stats.contingency.shape == (5, 3)


def test_chunks_do_not_change_the_statistics(rows):
    X, labels, centroids = rows
    whole = local_statistics(X, centroids, labels)
    for chunk in (1, 7, 299, 5000):
        part = local_statistics(X, centroids, labels, chunk_size=chunk)
        np.testing.assert_array_equal(part.counts, whole.counts)
        np.testing.assert_array_equal(part.contingency, whole.contingency)
        np.testing.assert_allclose(part.sums, whole.sums, rtol=1e-13)
        np.testing.assert_allclose(part.distance_sums, whole.distance_sums, rtol=1e-13)
        for name in ("sse", "outside_distance", "outside_sse", "silhouette_sum"):
            assert getattr(part, name) == pytest.approx(getattr(whole, name), rel=1e-13)


def test_the_difference_budget_does_not_change_the_distances(rows, monkeypatch):
    X, labels, centroids = rows
    whole = local_statistics(X, centroids)
    monkeypatch.setattr(distance_module, "DIFF_BUDGET", 7)
    small = local_statistics(X, centroids)
    assert small.outside_distance == pytest.approx(whole.outside_distance, rel=1e-13)
    assert small.silhouette_sum == pytest.approx(whole.silhouette_sum, rel=1e-13)


def test_a_given_vocabulary_fixes_the_columns(rows):
    X, labels, centroids = rows
    stats = local_statistics(X, centroids, labels, label_values=[30, 11, -2, 99])
    np.testing.assert_array_equal(stats.label_values, [-2, 11, 30, 99])
    assert stats.contingency.shape == (5, 4) and not stats.contingency[:, 3].any()
    own = local_statistics(X, centroids, labels)
    np.testing.assert_array_equal(stats.contingency[:, :3], own.contingency)


def test_label_errors_are_clear(rows):
    X, labels, centroids = rows
    with pytest.raises(ValueError, match=r"labels \[30\] are not in label_values"):
        local_statistics(X, centroids, labels, label_values=[11, -2])
    with pytest.raises(ValueError, match="must not repeat"):
        local_statistics(X, centroids, labels, label_values=[11, 11, -2, 30])
    with pytest.raises(ValueError, match="label_values given without labels"):
        local_statistics(X, centroids, label_values=[1])
    with pytest.raises(ValueError, match="expected 300 labels"):
        local_statistics(X, centroids, labels[:-1])


def test_shape_errors_are_clear(rows):
    X, labels, centroids = rows
    with pytest.raises(ValueError, match="2-D"):
        local_statistics(X[:, 0], centroids)
    with pytest.raises(ValueError, match="centroids has 3 features but X has 4"):
        local_statistics(X, centroids[:, :3])
    with pytest.raises(ValueError, match="reference must have the shape of centroids"):
        local_statistics(X, centroids, reference=centroids[:2])
    with pytest.raises(ValueError, match="chunk_size"):
        local_statistics(X, centroids, chunk_size=0)


def test_a_client_without_rows_contributes_zeros(rows):
    _, _, centroids = rows
    stats = local_statistics(np.empty((0, 4)), centroids, np.empty(0, dtype=int))
    assert stats.n == 0 and stats.sse == 0.0 and not stats.counts.any()
    assert stats.contingency.shape == (5, 0)


def test_labels_may_be_strings(rows):
    X, labels, centroids = rows
    names = np.array(["a", "b", "c"])[np.searchsorted([-2, 11, 30], labels)]
    text = local_statistics(X, centroids, names)
    ints = local_statistics(X, centroids, labels)
    np.testing.assert_array_equal(text.contingency, ints.contingency)


def test_float32_rows_are_accepted(rows):
    X, labels, centroids = rows
    single = local_statistics(X.astype(np.float32), centroids, labels)
    double = local_statistics(X.astype(np.float32).astype(np.float64), centroids, labels)
    np.testing.assert_array_equal(single.counts, double.counts)
    assert single.sse == pytest.approx(double.sse, rel=1e-6)


def test_cupy_gives_the_numpy_statistics(rows):
    try:
        cp = get_namespace("cuda")
    except RuntimeError:
        pytest.skip("no CUDA GPU with CuPy")
    X, labels, centroids = rows
    gpu = local_statistics(cp.asarray(X), cp.asarray(centroids), cp.asarray(labels))
    cpu = local_statistics(X, centroids, labels)
    np.testing.assert_array_equal(gpu.counts, cpu.counts)
    np.testing.assert_array_equal(gpu.contingency, cpu.contingency)
    np.testing.assert_allclose(gpu.distance_sums, cpu.distance_sums, rtol=1e-12)
    for name in ("sse", "outside_distance", "outside_sse", "silhouette_sum"):
        assert getattr(gpu, name) == pytest.approx(getattr(cpu, name), rel=1e-12)
    assert isinstance(gpu.counts, np.ndarray) and isinstance(gpu.sse, float)
