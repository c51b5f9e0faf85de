"""Every reply is untrusted input: a faulty or hostile client is rejected by name,
and no honest client is rejected because of it (issue "Careless and hostile clients")."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Array
from flwr.clientapp import ClientApp

from conftest import messages, save_parts
from fedcluster.client.app import build_client_app
from fedcluster.metrics import centre_distance
from fedcluster.protocol import METRICS_KEY, ProtocolError, RESULT_KEY, read_reply
from fedcluster.server.inprocess import InProcessGrid
from fedcluster.strategies import WeightedFederatedKMeans


def damage(reply, mode: str):
    """Alter a real reply the way a faulty or hostile client would."""
    arrays = reply.content[RESULT_KEY]
    metrics = reply.content[METRICS_KEY]
    if mode == "fractional":
        counts = arrays["counts"].numpy().copy()
        counts[0] += 0.5
        counts[1] -= 0.5
        arrays["counts"] = Array(counts)
    elif mode == "complex":
        arrays["centroids"] = Array(arrays["centroids"].numpy().astype(np.complex128) + 1j)
    elif mode == "huge":
        arrays["centroids"] = Array(np.full_like(arrays["centroids"].numpy(), 1e308))
    elif mode == "huge-bounds" and "low" in arrays:
        arrays["low"] = Array(np.full_like(arrays["low"].numpy(), -1e308))
        arrays["high"] = Array(np.full_like(arrays["high"].numpy(), 1e308))
    elif mode == "more-rows-later" and "counts" in arrays and "centroids" in arrays:
        metrics["num-examples"] = int(metrics["num-examples"]) + 7
        counts = arrays["counts"].numpy().copy()
        counts[0] += 7
        arrays["counts"] = Array(counts)
    elif mode == "uncounted-score" and "centroids" not in arrays:
        counts = arrays["counts"].numpy().copy()
        counts[0] -= 1
        arrays["counts"] = Array(counts)
    return reply


def hostile_app() -> ClientApp:
    """The real ClientApp, whose replies node_config['hostile'] damages."""
    real = build_client_app()
    app = ClientApp()

    def serve(msg, context):
        return damage(real(msg, context), context.node_config.get("hostile", ""))

    app.train()(serve)
    app.evaluate()(serve)
    app.query("bounds")(serve)
    app.query("local_kmeans")(serve)
    return app


def federation(tmp_path, s1, mode: str, clients: int = 5):
    order = np.random.default_rng(0).permutation(len(s1))
    configs = save_parts(tmp_path / "parts", [s1[p] for p in np.array_split(order, clients)])
    configs[0]["hostile"] = mode
    return InProcessGrid(hostile_app(), configs)


@pytest.mark.parametrize(("mode", "init", "reason"), [
    ("fractional", "local-kmeans", "'counts' are not whole numbers"),
    ("complex", "local-kmeans", "'centroids' is not real-valued (dtype complex128)"),
    ("huge", "local-kmeans", "'centroids' has values beyond +-1e+100 (largest 1e+308)"),
    ("huge-bounds", "random", "'low' has values beyond +-1e+100"),
    ("uncounted-score", "local-kmeans", "'counts' add up to 999, not to the 1000 points"),
])
def test_a_bad_reply_is_rejected_by_name_and_honest_clients_go_on(tmp_path, s1, s1_centres, flwr_log,
                                                                   mode, init, reason):
    grid = federation(tmp_path, s1, mode)
    result = WeightedFederatedKMeans(15, init=init, num_rounds=20, seed=1).fit(grid)
    hostile = grid.node_ids[0]
    log = messages(flwr_log)
    assert f"rejected node {hostile}: malformed reply: {reason}" in log
    rejected_nodes = {r.getMessage().split("rejected node ")[1].split(":")[0]
                      for r in flwr_log if "rejected node" in r.getMessage()}
    assert rejected_nodes == {str(hostile)}
    assert np.all((result.centroids >= s1.min(axis=0)) & (result.centroids <= s1.max(axis=0)))
    assert np.isfinite(result.score)
    if init != "random":  # a random start ends where it ends; the others find S1's clusters
        assert centre_distance(result.centroids, s1_centres) < 6e4


def test_a_client_whose_row_count_changes_is_rejected(tmp_path, s1, flwr_log):
    grid = federation(tmp_path, s1, "more-rows-later")
    # Its first reply (the initialisation) declares 1000 rows and is accepted ...
    grid._contexts[grid.node_ids[0]].node_config["hostile"] = ""
    strategy = WeightedFederatedKMeans(15, num_rounds=2, tol=0.0, seed=1)
    strategy.wait_for_nodes(grid)
    strategy.initialise(grid)
    # ... its later replies declare 1007.
    grid._contexts[grid.node_ids[0]].node_config["hostile"] = "more-rows-later"
    result = strategy.fit(grid)
    assert (f"rejected node {grid.node_ids[0]}: inconsistent reply: 1007 local points, 1000 in its "
            "earlier replies of this run") in messages(flwr_log)
    train = [r for r in result.history if r.phase == "train"]
    assert all(r.clients_answered == 4 and r.clients_rejected == 1 for r in train)


def test_one_huge_value_in_a_client_file_is_refused_there(tmp_path, s1, s1_centres, flwr_log):
    order = np.random.default_rng(0).permutation(len(s1))
    parts = [s1[p] for p in np.array_split(order, 5)]
    parts[2] = parts[2].copy()
    parts[2][12, 0] = 1e300
    grid = InProcessGrid(build_client_app(), save_parts(tmp_path / "parts", parts))
    result = WeightedFederatedKMeans(15, seed=1).fit(grid)
    assert "value 1e+300 in column 0 (row 12) is too large" in messages(flwr_log)
    assert np.all(np.abs(result.centroids) < 1e7)
    assert result.n_points == 4000
    assert centre_distance(result.centroids, s1_centres) < 6e4


def test_read_reply_rejects_what_a_client_cannot_honestly_send():
    from flwr.app import ArrayRecord, MetricRecord, RecordDict

    def content(counts, n=10, centroids=((0.0, 0.0), (1.0, 1.0))):
        return RecordDict({
            RESULT_KEY: ArrayRecord({"centroids": Array(np.array(centroids)),
                                     "counts": Array(np.array(counts, dtype=np.float64))}),
            METRICS_KEY: MetricRecord({"num-examples": n, "sse": 1.0})})

    read_reply(content([4.0, 6.0]), k=2, dim=2, all_counted=True)
    read_reply(content([4.0, 5.0]), k=2, dim=2)  # a withheld cluster: less is allowed
    with pytest.raises(ProtocolError, match="add up to 9, not to the 10 points"):
        read_reply(content([4.0, 5.0]), k=2, dim=2, all_counted=True)
    with pytest.raises(ProtocolError, match="add up to 11, more than the 10 points"):
        read_reply(content([5.0, 6.0]), k=2, dim=2)
    with pytest.raises(ProtocolError, match="not whole numbers"):
        read_reply(content([4.5, 5.5]), k=2, dim=2)
    with pytest.raises(ProtocolError, match="beyond"):
        read_reply(content([4.0, 6.0], centroids=((0.0, 1e101), (1.0, 1.0))), k=2, dim=2)
