"""Every owner counts (issue 25): a client of fewer than p x k rows, or with duplicate rows,
answers with the clusters the privacy floor allows instead of being refused whole."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ask_client_app, messages, save_parts

from fedcluster.client.app import build_client_app
from fedcluster.local.floor import PrivacyFloorError, check_reply, exposed
from fedcluster.client.memory import InMemoryFederation
from fedcluster.config import RunConfig, build_strategy
from fedcluster.data import write_partitions
from fedcluster.messages import LOCAL_KMEANS, ClientSummary
from fedcluster.methods import METHODS
from fedcluster.server.flower import FlowerFederation
from fedcluster.methods.dwf.client import LLOYD
from fedcluster.protocol import read_reply
from fedcluster.simulation import set_offline_env
from harness.inprocess import InProcessGrid
from harness.privacy_probe import leaks, recorded, recorder

P, K = 2, 15


def test_a_centroid_may_equal_a_value_only_when_p_local_rows_hold_it():
    X = np.array([[1.0, 1.0], [1.0, 1.0], [2.0, 2.0], [0.0, 0.0], [4.0, 4.0]])
    # [1, 1] is held by two rows (a cluster of p identical rows), [2, 2] by one
    # (the mean of {0, 2, 4} coincides with it), [3, 3] by none.
    centroids = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    np.testing.assert_array_equal(exposed(X, centroids, 2), [False, True, False])
    np.testing.assert_array_equal(exposed(X, centroids, 3), [True, True, False])
    np.testing.assert_array_equal(exposed(X, -0.0 * centroids[:1] + [[1.0, 1.0]], 2), [False])
    check_reply(X, ClientSummary(n=5, centroids=centroids[[0, 2]], counts=np.array([2.0, 3.0])),
                2, None)
    with pytest.raises(PrivacyFloorError, match="centroid 1 equals local row 2 exactly, a value 1 "
                       "local row\\(s\\) hold, fewer than min-cluster-size 2"):
        check_reply(X, ClientSummary(n=5, centroids=centroids[:2], counts=np.array([2.0, 3.0])),
                    2, None)
    with pytest.raises(PrivacyFloorError, match="centroid 0 equals local row 0 exactly, a value 2"):
        check_reply(X, ClientSummary(n=5, centroids=centroids[:1], counts=np.array([3.0])), 3, None)


def test_a_client_of_fewer_than_p_x_k_rows_sends_its_large_clusters_and_withholds_the_rest(
        tmp_path):
    # 12 rows for 7 global centroids: two tight pairs, two triples (the second's
    # mean is its middle row, which one row holds: withheld), two lone rows.
    rows = np.array([[0.0, 0.1], [0.0, -0.1], [10.0, 0.1], [10.0, -0.1], [20.0, 0.1], [20.0, 0.2],
                     [20.0, 0.6], [30.0, 0.0], [30.0, 0.2], [30.0, -0.2], [40.0, 0.0],
                     [50.0, 0.0]])
    np.save(tmp_path / "few.npy", rows)
    given = np.column_stack([np.arange(7) * 10.0, np.full(7, 5.0)])
    reply = ask_client_app({"data-path": str(tmp_path / "few.npy")}, LLOYD,
                           {"local-steps": 1, "tol": 0.0, "chunk-size": 4}, given)
    summary = read_reply(reply.content, k=7, dim=2, expect=("centroids", "counts", "sse"))
    np.testing.assert_array_equal(summary.counts, [2, 2, 3, 0, 0, 0, 0])
    np.testing.assert_allclose(summary.centroids[:3], [[0, 0], [10, 0], [20, 0.3]], atol=1e-12)
    np.testing.assert_array_equal(summary.centroids[3:], given[3:])
    assert summary.n == 12


def test_a_cluster_of_p_identical_rows_is_sent_and_a_lone_row_withheld(tmp_path):
    # Two values five times each and one lone value: k is capped at the 3
    # distinct rows, and each cluster's centroid is a row.
    np.save(tmp_path / "copies.npy", np.vstack([np.repeat([[1.0, 1.0], [2.0, 2.0]], 5, axis=0),
                                                [[9.0, 9.0]]]))
    config = {"k": 5, "seed": 0, "max-iter": 10, "tol": 0.0, "chunk-size": 16}
    node = {"data-path": str(tmp_path / "copies.npy")}
    summary = read_reply(ask_client_app(node, LOCAL_KMEANS, config).content,
                         expect=("centroids", "counts"))
    order = np.argsort(summary.centroids[:, 0])
    np.testing.assert_array_equal(summary.centroids[order], [[1.0, 1.0], [2.0, 2.0]])
    np.testing.assert_array_equal(summary.counts[order], [5, 5])
    # A node that raises p to 6 sends none of them, and still answers.
    summary = read_reply(ask_client_app({**node, "min-cluster-size": 6}, LOCAL_KMEANS,
                                        config).content, expect=("centroids", "counts"))
    assert summary.centroids.shape == (0, 2) and summary.n == 11


def small_and_duplicate_clients(s1: np.ndarray) -> list[np.ndarray]:
    """S1 over 5 clients: 20 rows (< p x k = 30), 3 rows, twelve rows twice, and the rest."""
    order = np.random.default_rng(0).permutation(len(s1))
    parts = [s1[np.sort(p)] for p in np.split(order, [20, 23, 47, 2500])]
    parts[2] = np.repeat(parts[2][:12], 2, axis=0)
    return parts


@pytest.mark.parametrize("algorithm", ["dwf", "ffcm-avg1", "fkm", "kfed", "feca", "mavg"])
def test_small_and_duplicate_clients_answer_through_flower_messages(tmp_path, s1, flwr_log,
                                                                   algorithm):
    parts = small_and_duplicate_clients(s1)
    probe = tmp_path / "probe"
    probe.mkdir()
    grid = InProcessGrid(build_client_app(mods=[recorder(probe)]),
                         save_parts(tmp_path / "parts", parts))
    settings = {"algorithm": algorithm, "k": K, "seed": 1, "num-server-rounds": 3,
                "min-cluster-size": P}
    result = build_strategy(RunConfig.from_mapping(settings)).fit(FlowerFederation(grid))
    assert "rejected node" not in messages(flwr_log)
    assert all(r.clients_rejected == 0 and r.clients_answered == 5 for r in result.history)
    assert result.n_points == 5000
    # What the two clients sent is under the floor (values of 2 identical rows are allowed).
    assert leaks(recorded(probe), np.concatenate(parts), P) == []


@pytest.mark.slow
def test_a_small_and_a_duplicate_client_count_in_a_ray_simulation(tmp_path, s1):
    """Through a Ray simulation (the real ClientApp, Flower's node ids), dwf from the
    local-kmeans start and fkm from its k-means++ start: the clients of 20 and 3 rows (fewer
    than p x k = 30) and the one of twelve rows held twice answer every request, none is
    rejected, their rows count in the model, and each sends clusters of its own (counts of
    p or more) in the start and in the rounds."""
    set_offline_env()
    from flwr.serverapp import ServerApp
    from flwr.simulation import run_simulation

    parts = small_and_duplicate_clients(s1)
    write_partitions(np.concatenate(parts), np.split(np.arange(5000), np.cumsum(
        [len(p) for p in parts])[:-1]), tmp_path / "parts")
    probe = tmp_path / "probe"
    probe.mkdir()
    runs = {"dwf": ("query.local_kmeans", "train"), "fkm": ("query.garst_init", "train.garst")}
    results = {}
    server = ServerApp()

    @server.main()
    def main(grid, context):
        for algorithm in runs:
            config = RunConfig.from_mapping({"algorithm": algorithm, "k": K, "seed": 1,
                                             "num-server-rounds": 3, "min-cluster-size": P,
                                             "min-nodes": 5, "out-dir": str(tmp_path)})
            results[algorithm] = build_strategy(config).fit(FlowerFederation(grid))

    run_simulation(server_app=server,
                   client_app=build_client_app({"partitions-dir": str(tmp_path / "parts")},
                                               mods=[recorder(probe)]),
                   num_supernodes=5,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                   "init_args": {"log_to_driver": False}})

    assert set(results) == set(runs)
    for result in results.values():
        assert all(r.clients_rejected == 0 and r.clients_answered == 5 for r in result.history)
        assert result.n_points == 5000
    replies = recorded(probe)
    for kind in (kind for kinds in runs.values() for kind in kinds):
        # Each small client, told apart by the rows it declares. The 3-row one answers, mostly
        # with every cluster withheld (its rows seldom share one); the 20-row one has, of 15
        # clusters, one of 2 rows at least, and every cluster of the duplicates is 2 rows or more.
        for rows in (20, 3, 24):
            counts = [r["result.counts"] for r in replies if str(r["message_type"]) == kind
                      and int(r["metrics.num-examples"]) == rows]
            assert counts, (kind, rows)
            assert rows == 3 or all(c.size and c.max() >= P for c in counts), (kind, rows, counts)
    assert leaks(replies, np.concatenate(parts), P) == []


class RecordingFederation(InMemoryFederation):
    """In-memory clients whose every answer is kept, with the node that sent it."""

    def __init__(self, parts) -> None:
        super().__init__(parts)
        self.answers = []

    def ask(self, request, node_ids, timeout):
        answers = super().ask(request, node_ids, timeout)
        self.answers.extend(answers)
        return answers


def test_on_integer_rows_every_client_answers_every_method_and_no_cluster_breaks_the_floor():
    # Rows on a 4 x 4 grid: most clients hold duplicates (clusters of identical rows, lone
    # values beside them). Clients of 2 to 11 rows, k = 5: most hold fewer than p x k.
    rng = np.random.default_rng(0)
    parts = [rng.integers(0, 4, (int(rng.integers(2, 12)), 2)).astype(float) for _ in range(12)]
    for algorithm in (name for name in METHODS if not METHODS[name].extra):
        federation = RecordingFederation(parts)
        result = build_strategy(RunConfig.from_mapping(
            {"algorithm": algorithm, "k": 5, "seed": 0, "num-server-rounds": 3,
             "min-cluster-size": P})).fit(federation)
        assert all(r.clients_rejected == 0 for r in result.history), algorithm
        assert result.n_points == sum(map(len, parts)), algorithm
        assert any(a.summary.counts is not None and a.summary.centroids is not None
                   and (a.summary.counts > 0).any() for a in federation.answers), algorithm
        for answer in federation.answers:
            assert answer.error is None, (algorithm, answer.error)
            summary = answer.summary
            if summary.centroids is None or summary.counts is None:
                continue
            # Counted per client, independently of the client's own check: each sent cluster
            # holds p rows or more, and its centroid is no value that 1 to p - 1 of them hold.
            values, holders = np.unique(parts[answer.node], axis=0, return_counts=True)
            rare = {tuple(v) for v in values[holders < P]}
            sent = summary.counts > 0
            assert np.all(summary.counts[sent] >= P), (algorithm, summary.counts)
            assert not rare & {tuple(c) for c in summary.centroids[sent]}, algorithm
