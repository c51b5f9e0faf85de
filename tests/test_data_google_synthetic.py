"""The ``google-synthetic`` generator: Google's DP clustering benchmark set, drawn from its description."""

from __future__ import annotations

import numpy as np
import pytest

from fedcluster.data import GoogleSyntheticParams, load_dataset


def small(seed: int, **fields):
    return load_dataset("google-synthetic", seed=seed, **{"points": 640, "dim": 20, "clusters": 8,
                                                          **fields})


def test_shape_labels_and_centres():
    data = small(0, points=643)
    assert data.X.shape == (643, 20) and data.true_centers.shape == (8, 20)
    sizes = np.bincount(data.labels, minlength=8)
    assert sizes.max() - sizes.min() <= 1 and sizes.sum() == 643
    assert np.linalg.norm(data.true_centers, axis=1).max() <= 1 - 1 / 8


def test_equal_seeds_give_equal_sets_and_others_differ():
    first, again, other = small(3), small(3), small(4)
    np.testing.assert_array_equal(first.X, again.X)
    np.testing.assert_array_equal(first.labels, again.labels)
    assert not np.allclose(first.X, other.X)


def test_defaults_are_the_readme_set():
    p = GoogleSyntheticParams()
    assert (p.points, p.dim, p.clusters) == (100_000, 100, 64)
    # 0.0125 per coordinate about each centre, centres within 0.875 of the origin.
    data = load_dataset("google-synthetic", seed=0, points=6400)
    deviation = (data.X - data.true_centers[data.labels]).std()
    assert deviation == pytest.approx(0.0125, rel=0.02)
    assert np.linalg.norm(data.true_centers, axis=1).max() <= 0.875


def test_points_outside_the_ball_are_projected_onto_it():
    # The deviation grows as sqrt(radius): a small ball and a ratio near 1 put most points past it.
    data = small(0, ratio=1.05, radius=0.25)
    norms = np.linalg.norm(data.X, axis=1)
    assert norms.max() == pytest.approx(0.25)
    assert np.isclose(norms, 0.25).mean() > 0.5


@pytest.mark.parametrize("fields", [{"ratio": 1.0}, {"points": 4, "clusters": 8}, {"radius": 0}])
def test_bad_parameters_are_refused(fields):
    with pytest.raises(ValueError):
        small(0, **fields)
