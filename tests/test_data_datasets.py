"""Named datasets (fedcluster.data.datasets)."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import sys
from importlib import resources

import numpy as np
import pytest

from fedcluster.data import DATASET_NAMES, NOISE_LABEL, BlobsParams, DataError, load_dataset, make_blobs, write_points
from fedcluster.data.datasets import DATASET_PARAMS, G2_NAMES, FFCMCase1Params, GarstGridParams, TriebeParams, make_garst_grid


@pytest.mark.parametrize("name", ["s1", "s2", "s3", "s4"])
def test_ssets_load_with_ground_truth(name):
    ds = load_dataset(name)
    assert ds.name == name
    assert ds.X.shape == (5000, 2) and ds.X.dtype == np.float64
    assert ds.labels.shape == (5000,) and ds.labels.dtype == np.int64
    assert set(np.unique(ds.labels)) == set(range(1, 16))
    assert ds.true_centers.shape == (15, 2)
    assert "Fränti" in ds.citation
    # Label c belongs to centre row c - 1: each group's mean is nearest to it.
    means = np.array([ds.X[ds.labels == c].mean(axis=0) for c in range(1, 16)])
    dist = np.linalg.norm(means[:, None, :] - ds.true_centers[None, :, :], axis=2)
    assert np.array_equal(dist.argmin(axis=1), np.arange(15))


def test_s1_first_point_matches_the_file():
    assert np.array_equal(load_dataset("s1").X[0], [664159.0, 550946.0])


def test_blobs_defaults_follow_the_dwf_paper():
    ds = load_dataset("blobs", seed=3)
    assert ds.X.shape == (10_100, 2)
    assert ds.true_centers.shape == (5, 2)
    assert np.all(np.abs(ds.true_centers) <= 1.0)
    assert np.sum(ds.labels == NOISE_LABEL) == 100
    assert np.array_equal(np.bincount(ds.labels[ds.labels >= 0]), [2000] * 5)
    noise = ds.X[ds.labels == NOISE_LABEL]
    assert np.all(np.abs(noise) <= 1.0)


def test_blobs_points_scatter_around_their_centre():
    p = BlobsParams(n_samples=30_000, centers=3, n_features=4, cluster_std=0.5, n_noise=0)
    ds = make_blobs(p, seed=0)
    for c in range(3):
        spread = ds.X[ds.labels == c] - ds.true_centers[c]
        assert np.allclose(spread.mean(axis=0), 0.0, atol=0.02)
        assert np.allclose(spread.std(axis=0), 0.5, atol=0.02)


def test_blobs_are_deterministic_per_seed():
    a, b, c = make_blobs(seed=7), make_blobs(seed=7), make_blobs(seed=8)
    assert np.array_equal(a.X, b.X) and np.array_equal(a.labels, b.labels)
    assert np.array_equal(a.true_centers, b.true_centers)
    assert not np.array_equal(a.X, c.X)


def test_blobs_sizes_differ_by_at_most_one():
    ds = make_blobs(BlobsParams(n_samples=11, centers=3, n_noise=0), seed=0)
    assert sorted(np.bincount(ds.labels)) == [3, 4, 4]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_samples": 2, "centers": 3},
        {"centers": 0},
        {"n_features": True},
        {"cluster_std": 0.0},
        {"cluster_std": float("nan")},
        {"center_box": (1.0, -1.0)},
        {"n_noise": -1},
    ],
)
def test_blobs_params_are_validated(kwargs):
    with pytest.raises(ValueError):
        BlobsParams(**kwargs)


def test_unknown_name_lists_the_names():
    with pytest.raises(DataError) as info:
        load_dataset("s5")
    for name in DATASET_NAMES:
        assert name in str(info.value)


def test_blobs_params_only_for_blobs():
    with pytest.raises(ValueError, match="blobs parameters"):
        load_dataset("s1", blobs=BlobsParams())


def test_a_path_loads_as_a_dataset(tmp_path):
    path = write_points(tmp_path / "mine.npz", np.ones((4, 3)), [0, 0, 1, 1])
    ds = load_dataset(str(path))
    assert ds.name == str(path)
    assert ds.X.shape == (4, 3) and list(ds.labels) == [0, 0, 1, 1]
    assert ds.true_centers is None and ds.citation == ""


def test_dataset_is_frozen_and_validated():
    ds = make_blobs(BlobsParams(n_samples=10, centers=2, n_noise=0), seed=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ds.name = "other"  # type: ignore[misc]
    with pytest.raises(DataError, match="labels must be 10 integers"):
        dataclasses.replace(ds, labels=np.zeros(9, dtype=np.int64))
    with pytest.raises(DataError, match="expected 2 features"):
        dataclasses.replace(ds, true_centers=np.zeros((2, 3)))


# -- files with labels and true centres -----------------------------------------


def test_a_csv_file_with_a_named_label_column(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("f1,f2,class\n0,0,3\n1,1,3\n9,9,7\n")
    ds = load_dataset(str(path), label_column="class")
    assert ds.X.shape == (3, 2) and list(ds.labels) == [3, 3, 7] and ds.true_centers is None
    assert ds.known_k == 2
    with pytest.raises(DataError, match="column 'class' looks like labels"):
        load_dataset(str(path))
    with pytest.raises(DataError, match=r"no column 'kind' \(columns: f1, f2, class\)"):
        load_dataset(str(path), label_column="kind")
    assert load_dataset(str(path), label_column="").X.shape == (3, 3)


def test_an_npz_file_with_labels_and_true_centres(tmp_path):
    X = np.array([[0.0, 0.0], [0.2, 0.0], [5.0, 5.0], [5.0, 5.2]])
    centers = np.array([[0.1, 0.0], [5.0, 5.1], [9.0, 9.0]])
    np.savez(tmp_path / "p.npz", X=X, y=np.array([0, 0, 1, 1]), centers=centers)
    ds = load_dataset(str(tmp_path / "p.npz"))
    assert list(ds.labels) == [0, 0, 1, 1]
    np.testing.assert_array_equal(ds.true_centers, centers)
    assert ds.known_k == 3  # the centres, not the labels
    np.savez(tmp_path / "bad.npz", X=X, centers=np.zeros((2, 3)))
    with pytest.raises(DataError, match=r"bad\.npz: the true centres must have shape \(k, 2\)"):
        load_dataset(str(tmp_path / "bad.npz"))


def test_label_column_only_for_files():
    with pytest.raises(ValueError, match="label_column \\('class'\\) names a column of a CSV "
                       "file; the dataset 's1' is not a file"):
        load_dataset("s1", label_column="class")


def test_known_k_of_named_and_unlabelled_datasets(tmp_path):
    assert load_dataset("s1").known_k == 15
    assert load_dataset("triebe").known_k == 5  # 5 Gaussians; the labels are the 50 clients
    assert make_blobs(BlobsParams(n_samples=50, centers=3), seed=0).known_k == 3  # not the noise
    assert load_dataset(str(write_points(tmp_path / "p.npy", np.ones((3, 2))))).known_k is None


@pytest.mark.parametrize("split", ["by-label", "dirichlet:0.3"])
def test_a_label_split_of_an_unlabelled_file_says_how_to_supply_labels(tmp_path, split):
    from fedcluster.data import partition_indices

    path = tmp_path / "p.csv"
    path.write_text("f1,f2\n" + "".join(f"{i},{i}\n" for i in range(20)))
    ds = load_dataset(str(path))
    with pytest.raises(ValueError, match=(
            f"split {split} needs labels; this dataset has none. Supply them: for a CSV file "
            r"name its label column \(--label-column NAME; a column named 'label' is used by "
            r"default\), or use an \.npz file with the points in 'X' and the labels in 'y'")):
        partition_indices(len(ds.X), 2, split, labels=ds.labels, points=ds.X, seed=0)


# -- the papers' generated datasets, digits and the G2-sets -------------------------


def test_triebe_defaults_follow_the_paper():
    data = load_dataset("triebe", seed=4)
    assert data.X.shape == (500, 1) and data.name == "triebe"
    np.testing.assert_array_equal(data.true_centers, np.arange(1.0, 6.0)[:, None])
    for client in range(50):
        rows = data.X[data.labels == client, 0]
        assert len(rows) == 10
        mean = np.rint(rows.mean())  # each client's rows come from one Gaussian
        assert 1 <= mean <= 5 and np.abs(rows - mean).max() < 5 * 0.2
    assert "Triebe" in data.citation


def test_triebe_balanced_is_the_authors_code():
    data = load_dataset("triebe", seed=0, balanced=True, scale=0.5)
    means = np.array([data.X[data.labels == c, 0].mean() for c in range(50)])
    np.testing.assert_array_equal(np.bincount(np.rint(means).astype(int), minlength=6)[1:],
                                  [10] * 5)
    with pytest.raises(ValueError, match="balanced must be true or false"):
        TriebeParams(balanced="maybe")  # type: ignore[arg-type]


def test_garst_grid_defaults_follow_the_paper(garst_grid):
    assert garst_grid.X.shape == (800, 2) and garst_grid.name == "garst-grid"
    offsets = [-7.5, -2.5, 2.5, 7.5]
    np.testing.assert_array_equal(garst_grid.true_centers, [(a, b) for a in offsets for b in offsets])
    assert np.array_equal(np.bincount(garst_grid.labels), [50] * 16)
    spread = garst_grid.X - garst_grid.true_centers[garst_grid.labels]
    assert abs(spread.std() - 1.0) < 0.1
    assert "Garst" in garst_grid.citation


def test_garst_grid_takes_its_parameters_by_name():
    data = load_dataset("garst-grid", seed=1, points=200, noise=1.5)
    assert data.X.shape == (3200, 2)
    assert abs((data.X - data.true_centers[data.labels]).std() - 1.5) < 0.1
    again = make_garst_grid(GarstGridParams(points=200, noise=1.5), seed=1)
    np.testing.assert_array_equal(again.X, data.X)
    assert not np.array_equal(load_dataset("garst-grid", seed=2, points=200, noise=1.5).X, data.X)
    assert isinstance(GarstGridParams(noise=1).noise, float)


@pytest.mark.parametrize(
    "kwargs", [{"points": 0}, {"points": 2.5}, {"noise": 0}, {"noise": float("nan")},
               {"spacing": -1}, {"side": 0}, {"noise": True}],
)
def test_garst_grid_params_are_validated(kwargs):
    with pytest.raises(ValueError):
        GarstGridParams(**kwargs)


def test_ffcm_case1_is_table_2s_setting():
    data = load_dataset("ffcm-case1", seed=0)
    assert data.X.shape == (2998, 2)
    np.testing.assert_array_equal(data.true_centers, [[-2, -2], [0, 0], [2, 2]])
    assert list(np.bincount(data.labels)) == [999, 999, 1000]
    # Client 3 (label 2) has no row of the third Gaussian: none of its rows is near (2, 2)
    # beyond what the other two Gaussians (std 0.5) reach.
    third = data.X[data.labels == 2]
    assert np.linalg.norm(third - [2, 2], axis=1).min() > 0.3
    equal = load_dataset("ffcm-case1", seed=0, equal=True)
    assert list(np.bincount(equal.labels)) == [999, 999, 999]
    assert FFCMCase1Params(equal="false").equal is False


def test_digits_load_through_scikit_learn():
    pytest.importorskip("sklearn")
    data = load_dataset("digits")
    assert data.X.shape == (1797, 64) and data.X.dtype == np.float64
    assert set(np.unique(data.labels)) == set(range(10)) and data.true_centers is None
    assert data.X.min() == 0 and data.X.max() == 16


@pytest.mark.parametrize(("name", "shape", "classes"),
                         [("iris", (150, 4), 3), ("wine", (178, 13), 3),
                          ("breast-cancer", (569, 30), 2)])
def test_small_uci_sets_load_through_scikit_learn(name, shape, classes):
    pytest.importorskip("sklearn")
    data = load_dataset(name)
    assert data.X.shape == shape and data.X.dtype == np.float64 and data.name == name
    assert set(np.unique(data.labels)) == set(range(classes)) and data.true_centers is None
    assert data.image_shape is None and "scikit-learn" in data.citation


@pytest.mark.parametrize("name", ["digits", "wine"])
def test_scikit_learn_sets_without_scikit_learn_say_how_to_get_it(monkeypatch, name):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    with pytest.raises(DataError, match=f"dataset '{name}' .* install it with `pip install scikit-learn`"):
        load_dataset(name)


def test_parameters_are_refused_where_they_do_not_belong():
    with pytest.raises(ValueError, match="dataset 's1' takes no parameters, got points"):
        load_dataset("s1", points=5)
    with pytest.raises(ValueError, match="has no parameter 'pts'; its parameters: points, noise"):
        load_dataset("garst-grid", pts=5)
    assert set(DATASET_PARAMS) == {"blobs", "garst-grid", "triebe", "ffcm-case1",
                                 "google-synthetic"}
    assert set(DATASET_PARAMS) <= set(DATASET_NAMES)


# -- G2-sets -------------------------------------------------------------------------


def test_g2_sets_load_with_labels_and_centres():
    assert len(G2_NAMES) == 80
    for name, dim in (("g2-1-10", 1), ("g2-16-50", 16), ("g2-128-100", 128)):
        data = load_dataset(name)
        assert data.X.shape == (2048, dim) and data.name == name
        np.testing.assert_array_equal(data.true_centers, [[500.0] * dim, [600.0] * dim])
        assert list(np.bincount(data.labels)) == [1024, 1024]
        halves = np.stack([data.X[:1024].mean(axis=0), data.X[1024:].mean(axis=0)])
        nearest = ((halves[:, None] - data.true_centers[None]) ** 2).sum(axis=2).argmin(axis=1)
        assert list(nearest) == [0, 1]


def test_g2_files_are_the_originals():
    folder = resources.files("fedcluster.data").joinpath("sipu")
    sums = dict(line.split()[::-1] for line in
                folder.joinpath("g2-sha256.txt").read_text(encoding="ascii").splitlines())
    assert len(sums) == 160
    for name in G2_NAMES:
        data = gzip.decompress(folder.joinpath(f"{name}.txt.gz").read_bytes())
        assert hashlib.sha256(data).hexdigest() == sums[f"{name}.txt"], name
        truth = folder.joinpath(f"{name}-gt.txt").read_bytes()
        assert hashlib.sha256(truth).hexdigest() == sums[f"{name}-gt.txt"], name


def test_missing_g2_sets_are_named_in_the_error():
    with pytest.raises(DataError, match=r"G2-set 'g2-D-S' \(D in 1, 2, 4, 8, 16, 32, 64, 128"):
        load_dataset("g2-256-10")
