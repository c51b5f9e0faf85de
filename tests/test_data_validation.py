"""Values too large to compute with: refused where data enters (fedcluster.data.validation)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from helpers import LLOYD_CONFIG, ask_client_app

from fedcluster.data import DataError, load_dataset, read_points, validate_points, write_points
from fedcluster.data.validation import MAX_ABS_VALUE


def points(n: int = 40, d: int = 2, scale: float = 1.0) -> np.ndarray:
    return np.random.default_rng(0).uniform(-1, 1, (n, d)) * scale


def test_one_huge_value_names_file_column_row_and_bound(tmp_path):
    X = points()
    X[12, 0] = 1e300
    path = tmp_path / "points.npy"
    np.save(path, X)
    expected = (f"{path}: value 1e+300 in column 0 (row 12) is too large: squared distances and "
                f"their sums could overflow float64 (|x| must be <= 1e+100; rescale the data)")
    with pytest.raises(DataError) as info:
        read_points(path)
    assert str(info.value) == expected


def test_the_first_huge_value_is_named_and_the_others_counted():
    X = points()
    X[30, 1] = -1e300
    X[5, 1] = -2e101
    X[5, 0] = 1e100  # at the bound: accepted
    with pytest.raises(DataError, match=re.escape(
            "client data p.csv: value -2e+101 in column 1 (row 5) is too large") + ".*"
            + re.escape("(|x| must be <= 1e+100; 2 values exceed it; rescale the data)")):
        validate_points(X, source="client data p.csv")


def test_values_just_within_the_bound_are_accepted():
    assert MAX_ABS_VALUE == 1e100
    X = points(scale=MAX_ABS_VALUE)
    X[0] = [MAX_ABS_VALUE, -MAX_ABS_VALUE]
    assert validate_points(X) is X
    X[1, 1] = np.nextafter(MAX_ABS_VALUE, np.inf)
    with pytest.raises(DataError, match=r"column 1 \(row 1\) is too large"):
        validate_points(X)


def test_integers_and_float32_are_checked_after_conversion():
    assert validate_points(np.array([[2**63 - 1, -(2**63)]])).dtype == np.float64
    big = np.array([[1.0, 3e38]], dtype=np.float32)  # fits float32, far below the bound
    assert validate_points(big)[0, 1] == pytest.approx(3e38)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_keep_their_message_and_come_first(bad):
    X = points()
    X[3, 0] = 1e300
    X[17, 1] = bad
    with pytest.raises(DataError, match=r"^src: 1 non-finite values \(first in row 17\)$"):
        validate_points(X, source="src")


def test_csv_and_txt_files_are_checked(tmp_path):
    (tmp_path / "p.csv").write_text("a,b,label\n1,2,0\n3,-1e300,1\n")
    with pytest.raises(DataError, match=r"p\.csv: value -1e\+300 in column 1 \(row 1\) is too large"):
        read_points(tmp_path / "p.csv")
    (tmp_path / "p.txt").write_text("1 2\n3 4\n1e150 0\n")
    with pytest.raises(DataError, match=r"p\.txt: value 1e\+150 in column 0 \(row 2\) is too large"):
        load_dataset(str(tmp_path / "p.txt"))


def test_writing_refuses_huge_values_before_touching_the_file(tmp_path):
    X = points()
    X[0, 0] = 1e200
    with pytest.raises(DataError, match="too large"):
        write_points(tmp_path / "p.npy", X)
    assert not (tmp_path / "p.npy").exists()


def test_the_bound_is_the_protocol_bound():
    from fedcluster.messages import MAX_MAGNITUDE

    assert MAX_ABS_VALUE == MAX_MAGNITUDE


def test_sums_over_data_at_the_bound_stay_finite():
    """Why the bound: k-means, its sums and SSE on data at +-1e100 are finite; at 1e300 they are not."""
    from fedcluster.numerics import cluster_stats, kmeans

    X = points(n=300, d=4, scale=MAX_ABS_VALUE)
    X[0], X[1] = MAX_ABS_VALUE, -MAX_ABS_VALUE
    result = kmeans(validate_points(X), 5, rng=np.random.default_rng(1))
    stats = cluster_stats(X, result.centroids)
    assert np.isfinite(result.centroids).all() and np.abs(result.centroids).max() <= MAX_ABS_VALUE
    assert np.isfinite(stats.sums).all() and math.isfinite(stats.inertia) and stats.inertia > 0
    with np.errstate(over="ignore", invalid="ignore"):
        assert not math.isfinite(float(np.sum((X * 1e200) ** 2)))  # what 1e300 would do


def test_a_client_refuses_a_file_with_a_huge_value_and_answers_at_the_bound(tmp_path):
    from fedcluster.client.respond import BAD_INPUT
    from fedcluster.methods.dwf.client import LLOYD
    from fedcluster.protocol import read_reply

    def ask(path, centroids):
        return ask_client_app({"data-path": str(path)}, LLOYD, LLOYD_CONFIG, centroids)

    X = points(scale=MAX_ABS_VALUE)
    X[0] = [MAX_ABS_VALUE, -MAX_ABS_VALUE]
    np.save(tmp_path / "ok.npy", X)
    centroids = np.array([[-0.5e100, 0.0], [0.5e100, 0.0]])
    summary = read_reply(ask(tmp_path / "ok.npy", centroids).content, k=2, dim=2,
                         expect=("centroids", "counts", "sse"))
    assert math.isfinite(summary.sse) and summary.counts.sum() == len(X)

    X[12, 0] = 1e300
    np.save(tmp_path / "points.npy", X)
    reply = ask(tmp_path / "points.npy", centroids)
    assert reply.has_error() and reply.error.code == BAD_INPUT
    assert f"{tmp_path / 'points.npy'}: value 1e+300 in column 0 (row 12) is too large" in reply.error.reason
