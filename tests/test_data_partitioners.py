"""The papers' partitioners and generated datasets (fedcluster.data.partition, .datasets)."""

from __future__ import annotations

import gzip
import hashlib
import sys
from importlib import resources

import numpy as np
import pytest

from fedcluster.data import DataError, Split, load_dataset, parse_split, partition_indices
from fedcluster.data.datasets import DATASET_NAMES, DATASET_PARAMS, G2_NAMES, FFCMCase1Params, GarstGridParams, TriebeParams, make_garst_grid
from fedcluster.data.partition import DIRICHLET_MIN_ROWS, SPLIT_FORMS, SPLIT_HELP, SPLIT_KINDS


def assert_partition(parts, n, num_clients):
    assert len(parts) == num_clients
    for p in parts:
        assert p.dtype == np.int64 and len(p) >= 1
        assert np.all(np.diff(p) > 0)  # sorted, no repeats
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(n))


def same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.fixture(scope="module")
def s1():
    return load_dataset("s1")


@pytest.fixture(scope="module")
def grid():
    return load_dataset("garst-grid", seed=0)


# -- parse_split ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("kmeans-noniid", Split("kmeans-noniid")),
        ("half-iid", Split("half-iid")),
        ("by-label", Split("by-label")),
        ("clusters-per-client:1,4,7,10,16", Split("clusters-per-client", counts=(1, 4, 7, 10, 16))),
        (" clusters-per-client: 3 , 2 ", Split("clusters-per-client", counts=(3, 2))),
        ("clusters-per-client:5", Split("clusters-per-client", counts=(5,))),
    ],
)
def test_parse_new_splits_and_print_them_back(spec, expected):
    assert parse_split(spec) == expected
    assert parse_split(str(expected)) == expected


@pytest.mark.parametrize(
    "spec",
    ["kmeans", "kmeans-noniid:3", "half-iid:0.5", "by-label:2", "clusters-per-client",
     "clusters-per-client:", "clusters-per-client:0,3", "clusters-per-client:1,x",
     "clusters-per-client:1.5", "clusters-per-client:-1", "clusters-per-client:1,,2"],
)
def test_bad_specs_list_every_accepted_form(spec):
    with pytest.raises(ValueError, match="accepted forms: 'iid', 'dirichlet:ALPHA'") as info:
        parse_split(spec)
    assert SPLIT_FORMS in str(info.value)
    for form in ("'kmeans-noniid'", "'half-iid'", "'clusters-per-client:C1,C2,...'", "'by-label'"):
        assert form in str(info.value)


def test_split_checks_its_counts():
    with pytest.raises(ValueError, match="integers >= 1"):
        Split("clusters-per-client", counts=(0, 2))
    with pytest.raises(ValueError, match="integers >= 1"):
        Split("clusters-per-client")
    with pytest.raises(ValueError, match="takes no counts"):
        Split("iid", counts=(1,))
    with pytest.raises(ValueError, match="takes no alpha"):
        Split("kmeans-noniid", alpha=1.0)
    with pytest.raises(ValueError, match="split kind must be one of"):
        Split("shards")  # type: ignore[arg-type]


def test_each_split_says_what_it_needs():
    needs = {kind: parse_split(spec).needs for kind, spec in zip(SPLIT_KINDS, [
        "iid", "dirichlet:1", "distance:1", "kmeans-noniid", "half-iid",
        "clusters-per-client:1", "by-label"], strict=True)}
    assert needs == {"iid": None, "dirichlet": "labels", "distance": "points",
                     "kmeans-noniid": "points", "half-iid": "points",
                     "clusters-per-client": "labels", "by-label": "labels"}


def test_help_names_every_scheme():
    for kind in SPLIT_KINDS:
        assert kind in SPLIT_HELP


@pytest.mark.parametrize("spec", ["kmeans-noniid", "half-iid"])
def test_point_splits_need_the_points(spec):
    with pytest.raises(ValueError, match="needs the points; pass points="):
        partition_indices(10, 2, spec, labels=np.zeros(10))
    with pytest.raises(ValueError, match="expected 10 points"):
        partition_indices(10, 2, spec, points=np.zeros((9, 2)))


@pytest.mark.parametrize("spec", ["clusters-per-client:1,1", "by-label"])
def test_label_splits_need_labels(spec):
    with pytest.raises(ValueError, match="needs labels; this dataset has none"):
        partition_indices(10, 2, spec, points=np.zeros((10, 2)))
    with pytest.raises(ValueError, match="expected 10 labels"):
        partition_indices(10, 2, spec, labels=np.zeros(9))


# -- dirichlet (the FeCA authors' balanced per-label draw) ----------------------


def test_dirichlet_follows_the_balance_rule(s1):
    # A client receives rows of a label (labels in increasing order) only while it
    # holds fewer than n / clients rows.
    for seed in range(5):
        parts = partition_indices(5000, 10, "dirichlet:0.1", labels=s1.labels, seed=seed)
        assert_partition(parts, 5000, 10)
        held = np.zeros(10)
        for label in np.unique(s1.labels):
            got = np.array([np.count_nonzero(s1.labels[p] == label) for p in parts])
            assert np.all(held[got > 0] < 500)
            held += got
        assert min(len(p) for p in parts) >= DIRICHLET_MIN_ROWS


def test_dirichlet_with_a_huge_alpha_is_nearly_iid(s1):
    parts = partition_indices(5000, 10, "dirichlet:1e6", labels=s1.labels, seed=0)
    assert max(abs(len(p) - 500) for p in parts) <= 16
    classes = np.unique(s1.labels)
    for p in parts:
        mix = np.array([np.mean(s1.labels[p] == c) for c in classes])
        assert np.abs(mix - 1 / 15).max() < 0.02


def test_dirichlet_minimum_shrinks_with_few_rows_per_client():
    # 30 rows for 10 clients: at least 3 each, not 10.
    labels = np.repeat([1, 2, 3], 10)
    for seed in range(3):
        parts = partition_indices(30, 10, "dirichlet:5", labels=labels, seed=seed)
        assert min(len(p) for p in parts) >= 3


def test_dirichlet_names_its_minimum_when_it_gives_up():
    with pytest.raises(ValueError, match="at least 10 rows; use fewer clients or a larger alpha"):
        partition_indices(40, 2, "dirichlet:0.000001", labels=np.zeros(40))


# -- kmeans-noniid and half-iid (DWF paper) -------------------------------------


def test_kmeans_noniid_gives_each_client_one_cluster():
    # Five tight, far-apart groups and five clients: each client is one group.
    data = load_dataset("blobs", seed=3, n_samples=1000, centers=5, cluster_std=0.01,
                        n_noise=0, center_box=(-100.0, 100.0))
    parts = partition_indices(1000, 5, "kmeans-noniid", points=data.X, seed=0)
    assert_partition(parts, 1000, 5)
    for p in parts:
        assert len(np.unique(data.labels[p])) == 1
    assert sorted(len(p) for p in parts) == [200] * 5


def test_kmeans_noniid_is_deterministic_and_unequal(s1):
    parts = partition_indices(5000, 10, "kmeans-noniid", points=s1.X, seed=4)
    assert_partition(parts, 5000, 10)
    assert same(parts, partition_indices(5000, 10, "kmeans-noniid", points=s1.X, seed=4))
    assert not same(parts, partition_indices(5000, 10, "kmeans-noniid", points=s1.X, seed=5))
    assert len({len(p) for p in parts}) > 1
    # Each client is compact: far more label-pure than an IID client.
    purity = np.mean([np.bincount(s1.labels[p]).max() / len(p) for p in parts])
    assert purity > 0.6


def test_kmeans_noniid_fills_empty_clusters():
    # Five identical rows and one other: k-means++ must repeat a centre, leaving
    # empty clusters, and each empty cluster takes a row from a cluster that keeps one.
    X = np.array([[0.0]] * 5 + [[10.0]])
    for seed in range(5):
        parts = partition_indices(6, 4, "kmeans-noniid", points=X, seed=seed)
        assert_partition(parts, 6, 4)
    parts = partition_indices(3, 3, "kmeans-noniid", points=np.zeros((3, 2)), seed=0)
    assert_partition(parts, 3, 3)


def test_half_iid_mixes_an_iid_half_and_a_cluster():
    data = load_dataset("blobs", seed=1, n_samples=2000, centers=10, cluster_std=0.01,
                        n_noise=0, center_box=(-100.0, 100.0))
    parts = partition_indices(2000, 10, "half-iid", points=data.X, seed=2)
    assert_partition(parts, 2000, 10)
    for p in parts:
        counts = np.bincount(data.labels[p], minlength=10)
        # The cluster half is one blob (about 100 rows), the IID half about 10 per blob.
        assert counts.max() >= 0.45 * len(p)
        assert np.count_nonzero(counts) >= 5
    assert same(parts, partition_indices(2000, 10, "half-iid", points=data.X, seed=2))


def test_half_iid_needs_enough_rows_for_its_kmeans_half():
    with pytest.raises(ValueError, match="needs at least 4 rows in its k-means half"):
        partition_indices(6, 4, "half-iid", points=np.arange(12.0).reshape(6, 2))
    parts = partition_indices(7, 4, "half-iid", points=np.arange(14.0).reshape(7, 2))
    assert_partition(parts, 7, 4)


# -- clusters-per-client (Garst & Reinders, Fig. 4) -----------------------------


def test_clusters_per_client_gives_nested_label_sets(grid):
    counts = (1, 4, 7, 10, 16)
    parts = partition_indices(800, 5, f"clusters-per-client:{','.join(map(str, counts))}",
                              labels=grid.labels, seed=0)
    assert_partition(parts, 800, 5)
    for p, c in zip(parts, counts, strict=True):
        assert set(np.unique(grid.labels[p])) == set(range(c))
    # Label 0 is shared by all five clients, label 15 held by one; 50 rows each.
    assert [np.count_nonzero(grid.labels[p] == 0) for p in parts] == [10] * 5
    held_by_four = sorted(np.count_nonzero(grid.labels[p] == 1) for p in parts[1:])
    assert held_by_four == [12, 12, 13, 13]  # 50 rows: parts differ by at most one
    assert len(parts[0]) == 10  # "one client only has ten datapoints in total"


def test_clusters_per_client_follows_the_authors_order_with_any_labels():
    # Labels are taken in increasing order whatever their values; clients in any order.
    labels = np.repeat([-5, 7, 100], 6)
    parts = partition_indices(18, 3, "clusters-per-client:3,1,2", labels=labels, seed=0)
    assert [set(labels[p]) for p in parts] == [{-5, 7, 100}, {-5}, {-5, 7}]


def test_clusters_per_client_checks_its_counts(grid):
    with pytest.raises(ValueError, match="names 5 clients, but num_clients is 4"):
        partition_indices(800, 4, "clusters-per-client:1,4,7,10,16", labels=grid.labels)
    with pytest.raises(ValueError, match="largest count must be 16"):
        partition_indices(800, 2, "clusters-per-client:1,15", labels=grid.labels)
    with pytest.raises(ValueError, match="largest count must be 16"):
        partition_indices(800, 2, "clusters-per-client:1,17", labels=grid.labels)
    labels = np.array([0, 1, 1, 1])
    with pytest.raises(ValueError, match="client 1 would get no rows"):
        partition_indices(4, 2, "clusters-per-client:2,1", labels=labels)


# -- by-label and Triebe's data --------------------------------------------------


def test_by_label_gives_each_client_its_label():
    data = load_dataset("triebe", seed=0)
    parts = partition_indices(len(data.X), 50, "by-label", labels=data.labels)
    assert_partition(parts, 500, 50)
    for i, p in enumerate(parts):
        assert np.all(data.labels[p] == i) and len(p) == 10
    labels = np.array([9, -1, 9, 4])
    parts = partition_indices(4, 3, "by-label", labels=labels)
    assert [list(p) for p in parts] == [[1], [3], [0, 2]]


def test_by_label_needs_one_client_per_label():
    with pytest.raises(ValueError, match="num_clients must be 3, got 2"):
        partition_indices(4, 2, "by-label", labels=np.array([9, -1, 9, 4]))


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


# -- generated datasets ----------------------------------------------------------


def test_garst_grid_defaults_follow_the_paper(grid):
    assert grid.X.shape == (800, 2) and grid.name == "garst-grid"
    offsets = [-7.5, -2.5, 2.5, 7.5]
    np.testing.assert_array_equal(grid.true_centers, [(a, b) for a in offsets for b in offsets])
    assert np.array_equal(np.bincount(grid.labels), [50] * 16)
    spread = grid.X - grid.true_centers[grid.labels]
    assert abs(spread.std() - 1.0) < 0.1
    assert "Garst" in grid.citation


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


def test_digits_without_scikit_learn_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(DataError, match="install it with `pip install scikit-learn`"):
        load_dataset("digits")


def test_parameters_are_refused_where_they_do_not_belong():
    with pytest.raises(ValueError, match="dataset 's1' takes no parameters, got points"):
        load_dataset("s1", points=5)
    with pytest.raises(ValueError, match="has no parameter 'pts'; its parameters: points, noise"):
        load_dataset("garst-grid", pts=5)
    assert set(DATASET_PARAMS) == {"blobs", "garst-grid", "triebe", "ffcm-case1"}
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
