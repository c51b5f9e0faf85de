"""The distance core: both forms agree with a brute-force reference, ties, blocking."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedcluster.numerics import distance
from fedcluster.numerics.distance import (
    assigned_sq_distances,
    expanded_sq_distances,
    nearest,
    row_blocks,
    row_sq_norms,
    sq_distances,
)


def _reference(X, C):
    """Brute force: one pair at a time, the squares summed by math.fsum (correctly rounded)."""
    return np.array([[math.fsum((float(a) - float(b)) ** 2 for a, b in zip(x, c)) for c in C]
                     for x in X])


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(60, 7)) * 4 + 3, rng.normal(size=(5, 7)) * 4 + 3


@pytest.mark.parametrize("summation", ["einsum", "pairwise"])
def test_direct_form_matches_the_reference(data, summation):
    X, C = data
    np.testing.assert_allclose(sq_distances(X, C, summation=summation), _reference(X, C),
                               rtol=1e-14)


def test_expanded_form_matches_the_reference(data):
    X, C = data
    d2 = expanded_sq_distances(X, C, row_sq_norms(X), row_sq_norms(C))
    np.testing.assert_allclose(d2, _reference(X, C), rtol=1e-12)


def test_expanded_form_is_clipped_at_zero():
    X = np.array([[1e8 + 1.0, 1e8]])
    d2 = expanded_sq_distances(X, X, row_sq_norms(X), row_sq_norms(X))
    assert d2[0, 0] >= 0.0


def test_nearest_and_its_distance(data):
    X, C = data
    labels = nearest(X, (-2.0 * C).T, row_sq_norms(C))
    reference = _reference(X, C)
    np.testing.assert_array_equal(labels, reference.argmin(axis=1))
    np.testing.assert_allclose(assigned_sq_distances(X, C, labels), reference.min(axis=1),
                               rtol=1e-14)


def test_ties_go_to_the_lowest_index():
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, 0.0]])
    C = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [1.0, 0.0]])
    labels = nearest(X, (-2.0 * C).T, row_sq_norms(C))
    np.testing.assert_array_equal(labels, [1, 0, 0])


@pytest.mark.parametrize("budget", [1, 7, 50, 1 << 21])
def test_blocking_changes_nothing(data, budget, monkeypatch):
    X, C = data
    whole = sq_distances(X, C)
    monkeypatch.setattr(distance, "DIFF_BUDGET", budget)
    np.testing.assert_array_equal(sq_distances(X, C), whole)


@pytest.mark.parametrize("chunk", [1, 7, 60, 1000])
def test_row_blocks_cover_the_rows_once(chunk):
    covered = np.concatenate([np.arange(60)[rows] for rows in row_blocks(60, chunk)])
    np.testing.assert_array_equal(covered, np.arange(60))
    assert all(rows.stop - rows.start <= chunk for rows in row_blocks(60, chunk))


def test_both_summations_agree_to_rounding(data):
    X, C = data
    np.testing.assert_allclose(sq_distances(X, C, summation="einsum"),
                               sq_distances(X, C, summation="pairwise"), rtol=1e-15)
