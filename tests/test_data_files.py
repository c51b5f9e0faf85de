"""Point validation and point files (fedcluster.data.validation, .files)."""

from __future__ import annotations

import numpy as np
import pytest

from fedcluster.data import DataError, read_labelled, read_points, validate_points, write_points

# Values whose text or binary form is easy to get subtly wrong.
AWKWARD = np.array(
    [[0.1, -2.5e-308], [1e100, 123456789.123456789], [np.nextafter(1.0, 2.0), -0.0]]
)


# -- validate_points ----------------------------------------------------------


def test_validate_returns_contiguous_float64_and_avoids_needless_copies():
    X = np.arange(6, dtype=np.float64).reshape(3, 2)
    assert validate_points(X) is X
    out = validate_points(np.arange(6, dtype=np.int32).reshape(2, 3)[:, ::2])
    assert out.dtype == np.float64 and out.flags.c_contiguous and out.shape == (2, 2)


def test_validate_rejects_1d_naming_the_shape():
    with pytest.raises(DataError, match=r"^client data: .*2-D.*shape \(5,\)"):
        validate_points(np.zeros(5), source="client data")


@pytest.mark.parametrize(
    "bad",
    [np.array([[True, False]]), np.array([["1", "2"]]), np.array([[1, None]], dtype=object)],
)
def test_validate_rejects_non_numeric_dtypes(bad):
    with pytest.raises(DataError, match="expected numeric values"):
        validate_points(bad)


def test_validate_rejects_ragged_input():
    with pytest.raises(DataError, match="rectangular"):
        validate_points([[1.0, 2.0], [3.0]])


@pytest.mark.parametrize("shape", [(0, 2), (3, 0)])
def test_validate_rejects_empty(shape):
    with pytest.raises(DataError, match="no data"):
        validate_points(np.zeros(shape))


def test_validate_counts_non_finite_values_and_names_the_first_row():
    X = np.zeros((20, 2))
    X[17, 0] = np.nan
    X[17, 1] = np.inf
    X[19, 1] = -np.inf
    expected = r"^client data /data/p0.csv: 3 non-finite values \(first in row 17\)$"
    with pytest.raises(DataError, match=expected):
        validate_points(X, source="client data /data/p0.csv")


def test_validate_checks_the_dimension():
    with pytest.raises(DataError, match="expected 3 features per point, got 2"):
        validate_points(np.zeros((4, 2)), expected_dim=3)


# -- reading ------------------------------------------------------------------


def test_unknown_extension_names_the_path(tmp_path):
    path = tmp_path / "points.json"
    path.write_text("[]")
    with pytest.raises(DataError, match=r"points\.json: unsupported file type \.json"):
        read_points(path)


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(DataError, match=r"nothere\.csv: no such file"):
        read_points(tmp_path / "nothere.csv")


def test_csv_with_strings_names_column_and_line(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("a,b\n1,2\n3,4\n5,oops\n")
    with pytest.raises(DataError, match=r"p\.csv: column 'b' is not numeric \(line 4: 'oops'\)"):
        read_points(path)


def test_csv_without_header_is_rejected(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("1,2\n3,4\n")
    with pytest.raises(DataError, match="header row"):
        read_points(path)


def test_csv_with_ragged_row_names_the_line(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("a,b\n1,2\n3\n")
    with pytest.raises(DataError, match="line 3 has 1 fields, the header has 2"):
        read_points(path)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.csv", "", "empty file"),
        ("header_only.csv", "a,b\n", "no data"),
        ("empty.txt", "", "no data"),
        ("empty.npy", "", "cannot read .npy"),
    ],
)
def test_empty_files_are_rejected(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(DataError, match=message) as info:
        read_points(path)
    assert name in str(info.value)


def test_nan_in_csv_is_reported_with_the_path(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("a,b\n1,2\nnan,4\n")
    with pytest.raises(DataError, match=r"p\.csv: 1 non-finite values \(first in row 1\)"):
        read_points(path)


def test_1d_npy_is_rejected_not_reshaped(tmp_path):
    path = tmp_path / "p.npy"
    np.save(path, np.arange(4.0))
    with pytest.raises(DataError, match=r"p\.npy: expected a 2-D array.*shape \(4,\)"):
        read_points(path)


def test_corrupt_npz_is_rejected(tmp_path):
    path = tmp_path / "p.npz"
    path.write_bytes(b"definitely not a zip archive")
    with pytest.raises(DataError, match=r"p\.npz: cannot read \.npz"):
        read_points(path)


def test_object_npy_is_refused_without_unpickling(tmp_path):
    path = tmp_path / "p.npy"
    np.save(path, np.array([[1, "a"]], dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match=r"p\.npy: cannot read"):
        read_points(path)


def test_txt_reads_whitespace_separated_numbers(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("    664159    550946\r\n 1 2\r\n")
    assert np.array_equal(read_points(path), [[664159.0, 550946.0], [1.0, 2.0]])


def test_npz_uses_x_else_the_only_non_label_array(tmp_path):
    X = np.ones((3, 2))
    np.savez(tmp_path / "named.npz", X=X, other=np.zeros((2, 2)))
    np.savez(tmp_path / "single.npz", points=X, labels=np.arange(3))
    np.savez(tmp_path / "ambiguous.npz", a=X, b=X)
    assert np.array_equal(read_points(tmp_path / "named.npz"), X)
    assert np.array_equal(read_points(tmp_path / "single.npz"), X)
    expected = r"ambiguous\.npz: no array named 'X' and 2 other arrays \(a, b\)"
    with pytest.raises(DataError, match=expected):
        read_points(tmp_path / "ambiguous.npz")


def test_read_labelled_npz(tmp_path):
    np.savez(tmp_path / "p.npz", X=np.ones((3, 2)), y=np.array([1, 2, 3]))
    X, y = read_labelled(tmp_path / "p.npz")
    assert X.shape == (3, 2) and y.dtype == np.int64 and list(y) == [1, 2, 3]


def test_read_labelled_csv_named_column_and_default_label_column(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("cls,f1,f2\n1,0.5,0.25\n2,1.5,2.5\n")
    X, y = read_labelled(path, label_column="cls")
    assert np.array_equal(X, [[0.5, 0.25], [1.5, 2.5]]) and list(y) == [1, 2]
    # Without label_column, only a column named "label" is taken as labels.
    X, y = read_labelled(path)
    assert X.shape == (2, 3) and y is None
    with pytest.raises(DataError, match=r"p\.csv: no column 'nope' \(columns: cls, f1, f2\)"):
        read_labelled(path, label_column="nope")


def test_read_labelled_rejects_fractional_labels(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("x0,label\n1,0.5\n")
    with pytest.raises(DataError, match="labels must be integers"):
        read_labelled(path)


def test_read_points_ignores_the_label_column(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("x0,label,x1\n1,7,2\n")
    assert np.array_equal(read_points(path), [[1.0, 2.0]])


# -- writing and round trips --------------------------------------------------


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".csv"])
def test_round_trip_is_exact(tmp_path, suffix):
    path = write_points(tmp_path / f"p{suffix}", AWKWARD)
    back = read_points(path)
    assert back.tobytes() == AWKWARD.tobytes()  # bit-exact, including -0.0


@pytest.mark.parametrize("suffix", [".npz", ".csv"])
def test_labelled_round_trip(tmp_path, suffix):
    labels = np.array([-1, 0, 14])
    write_points(tmp_path / f"p{suffix}", AWKWARD, labels)
    X, y = read_labelled(tmp_path / f"p{suffix}")
    assert X.tobytes() == AWKWARD.tobytes()
    assert y.dtype == np.int64 and np.array_equal(y, labels)


def test_csv_header(tmp_path):
    write_points(tmp_path / "p.csv", np.ones((1, 3)), [4])
    assert (tmp_path / "p.csv").read_text().splitlines()[0] == "x0,x1,x2,label"


def test_write_refuses_labels_in_npy_and_unknown_extensions(tmp_path):
    with pytest.raises(DataError, match=r"p\.npy: .npy holds points only"):
        write_points(tmp_path / "p.npy", np.ones((2, 2)), [1, 2])
    with pytest.raises(DataError, match=r"p\.parquet: cannot write \.parquet"):
        write_points(tmp_path / "p.parquet", np.ones((2, 2)))
    assert list(tmp_path.iterdir()) == []


def test_write_validates_before_touching_the_file(tmp_path):
    path = tmp_path / "p.npy"
    write_points(path, np.ones((2, 2)))
    before = path.read_bytes()
    with pytest.raises(DataError, match="non-finite"):
        write_points(path, np.array([[1.0, np.nan]]))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["p.npy"]


# -- label columns and true centres (read_file) ---------------------------------


def test_csv_class_column_must_be_named_or_declined(tmp_path):
    from fedcluster.data.files import read_file

    path = tmp_path / "p.csv"
    path.write_text("f1,f2,class\n0.5,0.25,1\n1.5,2.5,2\n")
    # Not named: an error that says how to choose, never a silent feature.
    with pytest.raises(DataError, match=r"p\.csv: column 'class' looks like labels, but no label "
                       r"column was named.*label_column='class'.*--label-column class"):
        read_file(path)
    with pytest.raises(DataError, match="looks like labels"):
        read_points(path)  # the clients' reader too
    data = read_file(path, label_column="class")
    np.testing.assert_array_equal(data.X, [[0.5, 0.25], [1.5, 2.5]])
    assert data.labels.dtype == np.int64 and list(data.labels) == [1, 2] and data.centers is None
    np.testing.assert_array_equal(read_points(path, label_column="class"), data.X)
    # "" declines: every column is a feature.
    none = read_file(path, label_column="")
    assert none.X.shape == (2, 3) and none.labels is None


@pytest.mark.parametrize("header", ["x0,x1,target", "x0,x1,labels", "x0,x1,Label", "a,b,y",
                                    "x0,label,Class"])
def test_label_like_columns_are_refused_without_a_named_label_column(tmp_path, header):
    path = tmp_path / "p.csv"
    path.write_text(f"{header}\n1,2,3\n")
    name = header.split(",")[-1]
    with pytest.raises(DataError, match=f"column '{name}' looks like labels"):
        read_labelled(path)
    X, y = read_labelled(path, label_column=name)
    assert X.shape == (1, 2) and list(y) == [3]


def test_y_beside_x_is_a_coordinate(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("x,y\n1,2\n3,4\n")
    X, y = read_labelled(path)
    np.testing.assert_array_equal(X, [[1, 2], [3, 4]])
    assert y is None


def test_unknown_label_column_lists_the_header(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("f1,f2,species\n1,2,3\n")
    with pytest.raises(DataError, match=r"data\.csv: no column 'kind' \(columns: f1, f2, species\); "
                       r"the label column must be one of the header's columns"):
        read_labelled(path, label_column="kind")


def test_text_labels_are_coded_in_sorted_order(tmp_path):
    path = tmp_path / "iris.csv"
    path.write_text("sepal,petal,species\n1,2,versicolor\n3,4, setosa\n5,6,versicolor\n")
    X, y = read_labelled(path, label_column="species")
    assert X.shape == (3, 2) and list(y) == [1, 0, 1]
    path.write_text("sepal,petal,species\n1,2,versicolor\n3,4,\n")
    with pytest.raises(DataError, match=r"label column 'species' has an empty cell \(line 3\)"):
        read_labelled(path, label_column="species")


def test_a_non_numeric_feature_says_how_to_name_the_label_column(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("f1,kind\n1,cat\n")
    with pytest.raises(DataError, match=r"p\.csv: column 'kind' is not numeric \(line 2: 'cat'\); "
                       r".*if 'kind' holds labels, name it as the label column "
                       r"\(label_column='kind'; on the command line --label-column kind\)"):
        read_points(path)
    X, y = read_labelled(path, label_column="kind")
    assert X.tolist() == [[1.0]] and list(y) == [0]


def test_npz_with_labels_and_true_centres(tmp_path):
    from fedcluster.data.files import read_file

    X = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0]])
    centers = np.array([[0.05, 0.0], [5.0, 5.0]])
    np.savez(tmp_path / "p.npz", X=X, y=np.array([0, 0, 1]), centers=centers)
    data = read_file(tmp_path / "p.npz")
    np.testing.assert_array_equal(data.X, X)
    assert list(data.labels) == [0, 0, 1]
    assert data.centers.dtype == np.float64
    np.testing.assert_array_equal(data.centers, centers)
    # Centres are not taken for the points when 'X' is missing.
    np.savez(tmp_path / "q.npz", points=X, centres=centers)
    np.testing.assert_array_equal(read_file(tmp_path / "q.npz").centers, centers)
    np.testing.assert_array_equal(read_points(tmp_path / "q.npz"), X)


@pytest.mark.parametrize(("centers", "message"), [
    (np.zeros((2, 3)), r"true centres must have shape \(k, 2\).*got shape \(2, 3\)"),
    (np.zeros(2), r"true centres must have shape \(k, 2\).*got shape \(2,\)"),
    (np.array([[0.0, np.nan]]), r"p\.npz: true centres: 1 non-finite values"),
])
def test_npz_centres_are_checked(tmp_path, centers, message):
    from fedcluster.data.files import read_file

    np.savez(tmp_path / "p.npz", X=np.zeros((3, 2)), centers=centers)
    with pytest.raises(DataError, match=message):
        read_file(tmp_path / "p.npz")


def test_label_column_is_for_csv_only(tmp_path):
    np.savez(tmp_path / "p.npz", X=np.zeros((3, 2)))
    with pytest.raises(DataError, match=r"p\.npz: label_column \('y'\) applies to \.csv files "
                       r"only; an \.npz file holds its labels in an array 'y'"):
        read_labelled(tmp_path / "p.npz", label_column="y")
