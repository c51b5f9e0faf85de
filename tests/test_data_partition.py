"""Client partitions (fedcluster.data.partition): the split forms, every partitioner, the files.

The distance split of Garst & Reinders has its own file (test_data_distance_split.py);
the datasets the partitioners are tried on are tested in test_data_datasets.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedcluster.data import (MANIFEST_NAME, DataError, Split, load_dataset, parse_split, partition_indices,
                             read_labelled, read_points, write_partitions)
from fedcluster.data.partition import DIRICHLET_MIN_ROWS, SPLIT_FORMS, SPLIT_HELP, SPLIT_KINDS


def assert_partition(parts, n, num_clients):
    """``parts`` are ``num_clients`` sorted, non-empty int64 index sets that cover 0..n-1 once."""
    assert len(parts) == num_clients
    for p in parts:
        assert p.dtype == np.int64 and len(p) >= 1
        assert np.all(np.diff(p) > 0)  # sorted, no repeats
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(n))


def same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def label_skew(parts, labels):
    """Mean total-variation distance between client and global label mixes."""
    classes, y = np.unique(labels, return_inverse=True)
    overall = np.bincount(y, minlength=len(classes)) / len(y)
    mixes = [np.bincount(y[p], minlength=len(classes)) / len(p) for p in parts]
    return np.mean([0.5 * np.abs(mix - overall).sum() for mix in mixes])


# -- parse_split and Split ------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("iid", Split("iid")),
        (" iid ", Split("iid")),
        ("dirichlet:0.3", Split("dirichlet", 0.3)),
        ("dirichlet:1e-1", Split("dirichlet", 0.1)),
        ("kmeans-noniid", Split("kmeans-noniid")),
        ("half-iid", Split("half-iid")),
        ("by-label", Split("by-label")),
        ("clusters-per-client:1,4,7,10,16", Split("clusters-per-client", counts=(1, 4, 7, 10, 16))),
        (" clusters-per-client: 3 , 2 ", Split("clusters-per-client", counts=(3, 2))),
        ("clusters-per-client:5", Split("clusters-per-client", counts=(5,))),
    ],
)
def test_parse_split_and_print_it_back(spec, expected):
    assert parse_split(spec) == expected
    assert parse_split(str(expected)) == expected


@pytest.mark.parametrize(
    "spec",
    ["", "IID", "niid", "dirichlet", "dirichlet:", "dirichlet:0", "dirichlet:-1",
     "dirichlet:nan", "dirichlet:inf", "dirichlet:x", "dir:0.3", "iid:1",
     "kmeans", "kmeans-noniid:3", "half-iid:0.5", "by-label:2", "clusters-per-client",
     "clusters-per-client:", "clusters-per-client:0,3", "clusters-per-client:1,x",
     "clusters-per-client:1.5", "clusters-per-client:-1", "clusters-per-client:1,,2"],
)
def test_bad_specs_list_every_accepted_form(spec):
    with pytest.raises(ValueError, match="accepted forms: 'iid', 'dirichlet:ALPHA'") as info:
        parse_split(spec)
    assert SPLIT_FORMS in str(info.value)
    for form in ("'kmeans-noniid'", "'half-iid'", "'clusters-per-client:C1,C2,...'", "'by-label'"):
        assert form in str(info.value)


def test_split_checks_its_fields():
    with pytest.raises(ValueError):
        Split("dirichlet", None)
    with pytest.raises(ValueError):
        Split("iid", 1.0)
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


# -- partition_indices: what every split checks -----------------------------------


@pytest.mark.parametrize("num_clients", [0, 11])
def test_num_clients_is_validated(num_clients):
    with pytest.raises(ValueError, match="num_clients must be between 1 and the number of rows"):
        partition_indices(10, num_clients, "iid")


@pytest.mark.parametrize("spec", ["kmeans-noniid", "half-iid"])
def test_point_splits_need_the_points(spec):
    with pytest.raises(ValueError, match="needs the points; pass points="):
        partition_indices(10, 2, spec, labels=np.zeros(10))
    with pytest.raises(ValueError, match="expected 10 points"):
        partition_indices(10, 2, spec, points=np.zeros((9, 2)))


@pytest.mark.parametrize("spec", ["dirichlet:0.5", "clusters-per-client:1,1", "by-label"])
def test_label_splits_need_labels(spec):
    with pytest.raises(ValueError, match="needs labels; this dataset has none"):
        partition_indices(10, 2, spec, points=np.zeros((10, 2)))
    with pytest.raises(ValueError, match="expected 10 labels"):
        partition_indices(10, 2, spec, labels=np.zeros(9))


# -- iid ---------------------------------------------------------------------------


def test_iid_partition_is_complete_balanced_and_deterministic():
    parts = partition_indices(103, 10, "iid", seed=5)
    assert_partition(parts, 103, 10)
    assert {len(p) for p in parts} == {10, 11}
    assert same(parts, partition_indices(103, 10, Split("iid"), seed=5))
    assert not same(parts, partition_indices(103, 10, "iid", seed=6))


def test_one_client_per_row():
    assert_partition(partition_indices(4, 4, "iid"), 4, 4)


# -- dirichlet (the FeCA authors' balanced per-label draw) ----------------------


def test_dirichlet_partition_is_complete_and_deterministic(s1_dataset):
    parts = partition_indices(5000, 10, "dirichlet:0.3", labels=s1_dataset.labels, seed=1)
    assert_partition(parts, 5000, 10)
    assert same(parts, partition_indices(5000, 10, "dirichlet:0.3", labels=s1_dataset.labels, seed=1))


def test_smaller_alpha_gives_more_label_skew(s1_dataset):
    labels = s1_dataset.labels

    def mean_skew(spec):
        return np.mean([label_skew(partition_indices(5000, 10, spec, labels=labels, seed=s), labels)
                        for s in range(5)])

    iid, mild, strong = mean_skew("iid"), mean_skew("dirichlet:100"), mean_skew("dirichlet:0.1")
    mid = mean_skew("dirichlet:1")
    assert iid < 0.1 and mild < 0.1
    assert mild < mid < strong
    assert strong > 0.6


def test_dirichlet_follows_the_balance_rule(s1_dataset):
    # A client receives rows of a label (labels in increasing order) only while it
    # holds fewer than n / clients rows.
    for seed in range(5):
        parts = partition_indices(5000, 10, "dirichlet:0.1", labels=s1_dataset.labels, seed=seed)
        assert_partition(parts, 5000, 10)
        held = np.zeros(10)
        for label in np.unique(s1_dataset.labels):
            got = np.array([np.count_nonzero(s1_dataset.labels[p] == label) for p in parts])
            assert np.all(held[got > 0] < 500)
            held += got
        assert min(len(p) for p in parts) >= DIRICHLET_MIN_ROWS


def test_dirichlet_with_a_huge_alpha_is_nearly_iid(s1_dataset):
    parts = partition_indices(5000, 10, "dirichlet:1e6", labels=s1_dataset.labels, seed=0)
    assert max(abs(len(p) - 500) for p in parts) <= 16
    classes = np.unique(s1_dataset.labels)
    for p in parts:
        mix = np.array([np.mean(s1_dataset.labels[p] == c) for c in classes])
        assert np.abs(mix - 1 / 15).max() < 0.02


def test_dirichlet_minimum_shrinks_with_few_rows_per_client():
    # 30 rows for 10 clients: at least 3 each, not 10.
    labels = np.repeat([1, 2, 3], 10)
    for seed in range(3):
        parts = partition_indices(30, 10, "dirichlet:5", labels=labels, seed=seed)
        assert min(len(p) for p in parts) >= 3


def test_dirichlet_names_its_minimum_when_it_gives_up():
    # Each client needs min(DIRICHLET_MIN_ROWS, n // clients) rows: 10 of 40 over 2, 1 of 3 over 3.
    with pytest.raises(ValueError, match="at least 10 rows; use fewer clients or a larger alpha"):
        partition_indices(40, 2, "dirichlet:0.000001", labels=np.zeros(40))
    with pytest.raises(ValueError, match="at least one row; use fewer clients or a larger alpha"):
        partition_indices(3, 3, "dirichlet:0.001", labels=np.zeros(3))


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


def test_kmeans_noniid_is_deterministic_and_unequal(s1_dataset):
    parts = partition_indices(5000, 10, "kmeans-noniid", points=s1_dataset.X, seed=4)
    assert_partition(parts, 5000, 10)
    assert same(parts, partition_indices(5000, 10, "kmeans-noniid", points=s1_dataset.X, seed=4))
    assert not same(parts, partition_indices(5000, 10, "kmeans-noniid", points=s1_dataset.X, seed=5))
    assert len({len(p) for p in parts}) > 1
    # Each client is compact: far more label-pure than an IID client.
    purity = np.mean([np.bincount(s1_dataset.labels[p]).max() / len(p) for p in parts])
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


def test_clusters_per_client_gives_nested_label_sets(garst_grid):
    counts = (1, 4, 7, 10, 16)
    parts = partition_indices(800, 5, f"clusters-per-client:{','.join(map(str, counts))}",
                              labels=garst_grid.labels, seed=0)
    assert_partition(parts, 800, 5)
    for p, c in zip(parts, counts, strict=True):
        assert set(np.unique(garst_grid.labels[p])) == set(range(c))
    # Label 0 is shared by all five clients, label 15 held by one; 50 rows each.
    assert [np.count_nonzero(garst_grid.labels[p] == 0) for p in parts] == [10] * 5
    held_by_four = sorted(np.count_nonzero(garst_grid.labels[p] == 1) for p in parts[1:])
    assert held_by_four == [12, 12, 13, 13]  # 50 rows: parts differ by at most one
    assert len(parts[0]) == 10  # "one client only has ten datapoints in total"


def test_clusters_per_client_follows_the_authors_order_with_any_labels():
    # Labels are taken in increasing order whatever their values; clients in any order.
    labels = np.repeat([-5, 7, 100], 6)
    parts = partition_indices(18, 3, "clusters-per-client:3,1,2", labels=labels, seed=0)
    assert [set(labels[p]) for p in parts] == [{-5, 7, 100}, {-5}, {-5, 7}]


def test_clusters_per_client_checks_its_counts(garst_grid):
    with pytest.raises(ValueError, match="names 5 clients, but num_clients is 4"):
        partition_indices(800, 4, "clusters-per-client:1,4,7,10,16", labels=garst_grid.labels)
    with pytest.raises(ValueError, match="largest count must be 16"):
        partition_indices(800, 2, "clusters-per-client:1,15", labels=garst_grid.labels)
    with pytest.raises(ValueError, match="largest count must be 16"):
        partition_indices(800, 2, "clusters-per-client:1,17", labels=garst_grid.labels)
    labels = np.array([0, 1, 1, 1])
    with pytest.raises(ValueError, match="client 1 would get no rows"):
        partition_indices(4, 2, "clusters-per-client:2,1", labels=labels)


# -- by-label --------------------------------------------------


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


# -- write_partitions ---------------------------------------------------------


def test_write_partitions_files_and_manifest(tmp_path, s1_dataset):
    parts = partition_indices(5000, 4, "iid", seed=0)
    out = tmp_path / "parts"
    paths = write_partitions(s1_dataset.X, parts, out, split="iid", seed=0, dataset="s1")
    assert [p.name for p in paths] == [f"client_00{i}.npy" for i in range(4)]
    for p, rows in zip(paths, parts):
        assert np.array_equal(read_points(p), s1_dataset.X[rows])
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["dataset"] == "s1" and manifest["split"] == "iid" and manifest["seed"] == 0
    assert manifest["dimension"] == 2 and manifest["n_points"] == 5000
    assert manifest["clients"] == [{"file": p.name, "rows": len(r)} for p, r in zip(paths, parts)]


def test_write_partitions_csv_with_labels(tmp_path, s1_dataset):
    parts = partition_indices(5000, 3, "dirichlet:0.5", labels=s1_dataset.labels, seed=2)
    paths = write_partitions(
        s1_dataset.X, parts, tmp_path / "o", labels=s1_dataset.labels, fmt="csv", split=Split("dirichlet", 0.5)
    )
    X, y = read_labelled(paths[2])
    assert np.array_equal(X, s1_dataset.X[parts[2]]) and np.array_equal(y, s1_dataset.labels[parts[2]])
    assert json.loads((tmp_path / "o" / MANIFEST_NAME).read_text())["split"] == "dirichlet:0.5"


def test_write_partitions_refuses_a_non_empty_directory(tmp_path):
    X = np.ones((4, 2))
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty"):
        write_partitions(X, partition_indices(4, 2, "iid"), tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_overwrite_replaces_earlier_partitions_only(tmp_path):
    X = np.arange(12.0).reshape(6, 2)
    write_partitions(X, partition_indices(6, 3, "iid"), tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    write_partitions(X, partition_indices(6, 2, "iid"), tmp_path, overwrite=True)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["client_000.npy", "client_001.npy", MANIFEST_NAME, "notes.txt"]


def test_write_partitions_rejects_bad_input_before_writing(tmp_path):
    X = np.ones((4, 2))
    out = tmp_path / "o"
    with pytest.raises(DataError, match="holds points only"):
        write_partitions(X, [np.arange(4)], out, labels=np.zeros(4, dtype=int))
    with pytest.raises(ValueError, match="fmt must be one of"):
        write_partitions(X, [np.arange(4)], out, fmt="txt")
    with pytest.raises(ValueError, match="parts overlap: row 2"):
        write_partitions(X, [np.array([0, 2]), np.array([1, 2, 3])], out)
    with pytest.raises(ValueError, match=r"part 1: row indices must lie in \[0, 4\)"):
        write_partitions(X, [np.array([0]), np.array([4])], out)
    assert not out.exists()
