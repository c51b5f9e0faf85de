"""The ClientApp: where it finds its data, what it answers, how it refuses."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import LLOYD_CONFIG, ask_client_app

from fedcluster.client.app import build_client_app
from fedcluster.local.floor import private_bounds
from fedcluster.client.respond import BAD_INPUT
from fedcluster.data import load_dataset, partition_indices, write_partitions
from fedcluster.messages import BOUNDS, EVALUATE, LOCAL_KMEANS
from fedcluster.methods.dwf.client import LLOYD
from fedcluster.protocol import read_reply


@pytest.fixture
def points():
    rng = np.random.default_rng(0)
    return np.concatenate([rng.normal(0, 0.1, (30, 2)), rng.normal(5, 0.1, (20, 2))])


@pytest.mark.parametrize("suffix", ["npy", "npz", "csv"])
def test_reads_data_path_in_every_format(tmp_path, points, suffix):
    from fedcluster.data import write_points

    path = write_points(tmp_path / f"local.{suffix}", points)
    reply = ask_client_app({"data-path": str(path)}, LLOYD, LLOYD_CONFIG, np.array([[0.0, 0.0], [5.0, 5.0]]))
    summary = read_reply(reply.content, k=2, dim=2, expect=("centroids", "counts", "sse"))
    assert summary.n == 50
    np.testing.assert_array_equal(summary.counts, [30, 20])
    np.testing.assert_allclose(summary.centroids, [points[:30].mean(0), points[30:].mean(0)], rtol=1e-12)
    expected = ((points[:30]) ** 2).sum() + ((points[30:] - 5) ** 2).sum()
    assert summary.sse == pytest.approx(expected, rel=1e-12)


def test_evaluate_bounds_and_local_kmeans(tmp_path, points):
    np.save(tmp_path / "p.npy", points)
    node = {"data-path": str(tmp_path / "p.npy")}
    ev = read_reply(ask_client_app(node, EVALUATE, {"chunk-size": 7}, np.array([[0.0, 0.0], [5.0, 5.0]])).content,
                    k=2, expect=("counts", "sse"))
    np.testing.assert_array_equal(ev.counts, [30, 20])
    bounds = read_reply(ask_client_app(node, BOUNDS, {}).content, expect=("bounds",))
    # Not the minima and maxima (coordinates of rows): the means of the two
    # extreme values of each feature, rounded outward to two significant digits.
    ordered = np.sort(points, axis=0)
    low, high = ordered[:2].mean(0), ordered[-2:].mean(0)
    assert np.all(np.abs(low) < 1) and np.all((np.abs(high) >= 1) & (np.abs(high) < 10))
    np.testing.assert_allclose(bounds.low, np.floor(low * 100) / 100, rtol=0, atol=1e-12)
    np.testing.assert_allclose(bounds.high, np.ceil(high * 10) / 10, rtol=0, atol=1e-12)
    assert not np.isin(bounds.low, points).any() and not np.isin(bounds.high, points).any()
    config = {"k": 2, "seed": 3, "max-iter": 50, "tol": 0.0, "chunk-size": 16}
    km = read_reply(ask_client_app(node, LOCAL_KMEANS, config).content, expect=("centroids", "counts"))
    assert sorted(km.counts) == [20, 30]


def test_local_kmeans_never_sends_a_row_or_a_small_cluster(tmp_path):
    config = {"k": 5, "seed": 0, "max-iter": 10, "tol": 0.0, "chunk-size": 16}
    # Three rows for five clusters: k is capped at the 2 distinct rows; the two
    # identical rows are a cluster of p = 2 rows (sent, though its centroid is
    # their value), the lone row a cluster of one (withheld).
    np.save(tmp_path / "few.npy", np.array([[1.0, 1.0], [1.0, 1.0], [2.0, 2.0]]))
    few = read_reply(ask_client_app({"data-path": str(tmp_path / "few.npy")}, LOCAL_KMEANS,
                                    config).content, expect=("centroids", "counts"))
    np.testing.assert_array_equal(few.centroids, [[1.0, 1.0]])
    np.testing.assert_array_equal(few.counts, [2])
    # One row: nothing can be sent.
    np.save(tmp_path / "one.npy", np.array([[1.0, 1.0]]))
    one = ask_client_app({"data-path": str(tmp_path / "one.npy")}, LOCAL_KMEANS, config)
    assert "this client has 1 rows, fewer than min-cluster-size 2" in error_of(one)


def error_of(reply) -> str:
    assert reply.has_error(), reply.content
    assert reply.error.code == BAD_INPUT
    return reply.error.reason


def test_bad_data_and_bad_requests_get_error_replies_that_name_the_problem(tmp_path, points):
    centroids = np.zeros((2, 2))
    bad = points.copy()
    bad[7, 1] = np.nan
    np.save(tmp_path / "nan.npy", bad)
    np.save(tmp_path / "wide.npy", np.ones((5, 3)))
    np.save(tmp_path / "good.npy", points)
    (tmp_path / "text.csv").write_text("a,b\n1,x\n")
    cases = [
        ({"data-path": str(tmp_path / "nan.npy")}, LLOYD_CONFIG, centroids, "1 non-finite value"),
        ({"data-path": str(tmp_path / "wide.npy")}, LLOYD_CONFIG, centroids,
         "client data has dimension 3, the global model 2"),
        ({"data-path": str(tmp_path / "missing.npy")}, LLOYD_CONFIG, centroids, "missing.npy"),
        ({"data-path": str(tmp_path / "text.csv")}, LLOYD_CONFIG, centroids, "'b'"),
        ({}, LLOYD_CONFIG, centroids, "no local data: set node_config 'data-path'"),
        ({"data-path": str(tmp_path / "good.npy")}, {}, centroids, "request config lacks 'local-steps'"),
        ({"data-path": str(tmp_path / "good.npy")}, {**LLOYD_CONFIG, "local-steps": 0}, centroids,
         "request config 'local-steps' has an invalid value 0"),
        ({"data-path": str(tmp_path / "good.npy")}, {**LLOYD_CONFIG, "tol": "x"}, centroids,
         "request config 'tol' has an invalid value 'x' (Input should be a valid number)"),
        ({"data-path": str(tmp_path / "good.npy")}, LLOYD_CONFIG, None, "request carries no global centroids"),
        ({"data-path": str(tmp_path / "good.npy")}, LLOYD_CONFIG, np.full((2, 2), np.inf),
         "request centroids has non-finite values"),
    ]
    for node, config, sent, expected in cases:
        assert expected in error_of(ask_client_app(node, LLOYD, config, sent)), expected


def test_simulation_partitions_from_a_partitions_dir(tmp_path, points):
    files = write_partitions(points, [np.arange(0, 10), np.arange(10, 50)], tmp_path / "parts")
    assert json.loads((tmp_path / "parts" / "manifest.json").read_text())["clients"][1]["rows"] == 40
    for pid, rows in ((0, 10), (1, 40)):
        reply = ask_client_app({"partition-id": pid, "num-partitions": 2}, BOUNDS, {},
                    run_config={"partitions-dir": str(tmp_path / "parts")})
        assert read_reply(reply.content, expect=("bounds",)).n == rows
    reply = ask_client_app({"partition-id": 2, "num-partitions": 3}, BOUNDS, {},
                run_config={"partitions-dir": str(tmp_path / "parts")})
    assert "partition-id 2 is out of range" in error_of(reply)
    assert len(files) == 2


def test_simulation_partitions_a_named_dataset_like_every_other_client():
    data = load_dataset("s2")
    parts = partition_indices(len(data.X), 4, "dirichlet:0.5", labels=data.labels, seed=9)
    run_config = {"dataset": "s2", "split": "dirichlet:0.5", "seed": 9}
    for pid in range(4):
        reply = ask_client_app({"partition-id": pid, "num-partitions": 4}, BOUNDS, {}, run_config=run_config)
        summary = read_reply(reply.content, expect=("bounds",))
        assert summary.n == len(parts[pid])
        np.testing.assert_array_equal(summary.low, private_bounds(data.X[parts[pid]], 2)[0])


def test_bound_defaults_yield_to_the_run_config(tmp_path, points):
    np.save(tmp_path / "a.npy", points[:5])
    write_partitions(points, [np.arange(50)], tmp_path / "parts")
    app = build_client_app({"partitions-dir": "/nowhere"})
    reply = ask_client_app({"partition-id": 0, "num-partitions": 1}, BOUNDS, {},
                run_config={"partitions-dir": str(tmp_path / "parts")}, app=app)
    assert read_reply(reply.content, expect=("bounds",)).n == 50
