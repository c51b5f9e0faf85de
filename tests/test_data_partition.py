"""Client partitions (fedcluster.data.partition)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedcluster.data import MANIFEST_NAME, DataError, Split, load_dataset, parse_split, partition_indices, read_labelled, read_points, write_partitions


@pytest.fixture(scope="module")
def s1():
    return load_dataset("s1")


def label_skew(parts, labels):
    """Mean total-variation distance between client and global label mixes."""
    classes, y = np.unique(labels, return_inverse=True)
    overall = np.bincount(y, minlength=len(classes)) / len(y)
    mixes = [np.bincount(y[p], minlength=len(classes)) / len(p) for p in parts]
    return np.mean([0.5 * np.abs(mix - overall).sum() for mix in mixes])


def assert_partition(parts, n, num_clients):
    assert len(parts) == num_clients
    for p in parts:
        assert p.dtype == np.int64 and len(p) >= 1
        assert np.all(np.diff(p) > 0)  # sorted, no repeats
    everything = np.concatenate(parts)
    assert len(everything) == n and np.array_equal(np.sort(everything), np.arange(n))


# -- parse_split --------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("iid", Split("iid")),
        (" iid ", Split("iid")),
        ("dirichlet:0.3", Split("dirichlet", 0.3)),
        ("dirichlet:1e-1", Split("dirichlet", 0.1)),
    ],
)
def test_parse_split(spec, expected):
    assert parse_split(spec) == expected
    assert parse_split(str(expected)) == expected


@pytest.mark.parametrize(
    "spec",
    ["", "IID", "niid", "dirichlet", "dirichlet:", "dirichlet:0", "dirichlet:-1",
     "dirichlet:nan", "dirichlet:inf", "dirichlet:x", "dir:0.3", "iid:1"],
)
def test_parse_split_rejects_other_forms_listing_the_accepted_ones(spec):
    with pytest.raises(ValueError, match=r"accepted forms: 'iid', 'dirichlet:ALPHA'"):
        parse_split(spec)


def test_split_validates_its_fields():
    with pytest.raises(ValueError):
        Split("dirichlet", None)
    with pytest.raises(ValueError):
        Split("iid", 1.0)


# -- partition_indices --------------------------------------------------------


def test_iid_partition_is_complete_balanced_and_deterministic():
    parts = partition_indices(103, 10, "iid", seed=5)
    assert_partition(parts, 103, 10)
    assert {len(p) for p in parts} == {10, 11}
    again = partition_indices(103, 10, Split("iid"), seed=5)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    other = partition_indices(103, 10, "iid", seed=6)
    assert not all(np.array_equal(a, b) for a, b in zip(parts, other))


def test_dirichlet_partition_is_complete_and_deterministic(s1):
    parts = partition_indices(5000, 10, "dirichlet:0.3", labels=s1.labels, seed=1)
    assert_partition(parts, 5000, 10)
    again = partition_indices(5000, 10, "dirichlet:0.3", labels=s1.labels, seed=1)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))


def test_smaller_alpha_gives_more_label_skew(s1):
    def mean_skew(spec):
        skews = [
            label_skew(partition_indices(5000, 10, spec, labels=s1.labels, seed=s), s1.labels)
            for s in range(5)
        ]
        return np.mean(skews)

    iid, mild, strong = mean_skew("iid"), mean_skew("dirichlet:100"), mean_skew("dirichlet:0.1")
    mid = mean_skew("dirichlet:1")
    assert iid < 0.1 and mild < 0.1
    assert mild < mid < strong
    assert strong > 0.6


def test_dirichlet_needs_labels():
    with pytest.raises(ValueError, match="needs labels"):
        partition_indices(10, 2, "dirichlet:0.5")
    with pytest.raises(ValueError, match="expected 10 labels"):
        partition_indices(10, 2, "dirichlet:0.5", labels=np.zeros(9))


def test_dirichlet_gives_up_with_a_clear_error():
    with pytest.raises(ValueError, match="at least one row; use fewer clients or a larger alpha"):
        partition_indices(3, 3, "dirichlet:0.001", labels=np.zeros(3))


@pytest.mark.parametrize("num_clients", [0, 11])
def test_num_clients_is_validated(num_clients):
    with pytest.raises(ValueError, match="num_clients must be between 1 and the number of rows"):
        partition_indices(10, num_clients, "iid")


def test_one_client_per_row():
    assert_partition(partition_indices(4, 4, "iid"), 4, 4)


# -- write_partitions ---------------------------------------------------------


def test_write_partitions_files_and_manifest(tmp_path, s1):
    parts = partition_indices(5000, 4, "iid", seed=0)
    out = tmp_path / "parts"
    paths = write_partitions(s1.X, parts, out, split="iid", seed=0, dataset="s1")
    assert [p.name for p in paths] == [f"client_00{i}.npy" for i in range(4)]
    for p, rows in zip(paths, parts):
        assert np.array_equal(read_points(p), s1.X[rows])
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["dataset"] == "s1" and manifest["split"] == "iid" and manifest["seed"] == 0
    assert manifest["dimension"] == 2 and manifest["n_points"] == 5000
    assert manifest["clients"] == [{"file": p.name, "rows": len(r)} for p, r in zip(paths, parts)]


def test_write_partitions_csv_with_labels(tmp_path, s1):
    parts = partition_indices(5000, 3, "dirichlet:0.5", labels=s1.labels, seed=2)
    paths = write_partitions(
        s1.X, parts, tmp_path / "o", labels=s1.labels, fmt="csv", split=Split("dirichlet", 0.5)
    )
    X, y = read_labelled(paths[2])
    assert np.array_equal(X, s1.X[parts[2]]) and np.array_equal(y, s1.labels[parts[2]])
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
