"""Every reply is untrusted input: a faulty or hostile client is rejected by name,
and no honest client is rejected because of it (issue "Careless and hostile clients")."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from flwr.app import Array
from flwr.clientapp import ClientApp
from helpers import iid_parts, messages, save_parts

from fedcluster.client.app import build_client_app
from fedcluster.client.respond import respond
from fedcluster.data import DataError
from fedcluster.server.flower import FlowerFederation
from fedcluster.client.memory import InMemoryFederation
from fedcluster.messages import ClientSummary, ProtocolError
from fedcluster.methods.dwf.strategy import WeightedFederatedKMeans
from fedcluster.metrics import centre_distance
from fedcluster.protocol import METRICS_KEY, RESULT_KEY, read_reply
from harness.inprocess import InProcessGrid


def damage(summary: ClientSummary, mode: str) -> ClientSummary:
    """Alter a real reply the way a faulty or hostile client would."""
    change = {}
    if mode == "fractional" and summary.counts is not None:
        counts = summary.counts.copy()
        counts[0] += 0.5
        counts[1] -= 0.5
        change["counts"] = counts
    elif mode == "complex" and summary.centroids is not None:
        change["centroids"] = summary.centroids.astype(np.complex128) + 1j
    elif mode == "huge" and summary.centroids is not None:
        change["centroids"] = np.full_like(summary.centroids, 1e308)
    elif mode == "huge-bounds" and summary.low is not None:
        change["low"] = np.full_like(summary.low, -1e308)
        change["high"] = np.full_like(summary.high, 1e308)
    elif mode == "more-rows-later" and summary.counts is not None and summary.centroids is not None:
        counts = summary.counts.copy()
        counts[0] += 7
        change.update(n=summary.n + 7, counts=counts)
    elif mode == "uncounted-score" and summary.centroids is None and summary.counts is not None:
        counts = summary.counts.copy()
        counts[0] -= 1
        change["counts"] = counts
    return dataclasses.replace(summary, **change)


def hostile(X, request, node_config) -> ClientSummary:
    """The real answer, which node_config['hostile'] damages."""
    return damage(respond(X, request, node_config), node_config.get("hostile", ""))


def federation(s1, mode: str, clients: int = 5) -> InMemoryFederation:
    """S1 over ``clients`` clients; client 0 (node 0) answers through :func:`hostile`."""
    configs = [{"hostile": mode}] + [{} for _ in range(clients - 1)]
    return InMemoryFederation(iid_parts(s1, clients), node_configs=configs, responders={0: hostile})


def rejected_nodes(records) -> set[str]:
    return {r.getMessage().split("rejected node ")[1].split(":")[0]
            for r in records if "rejected node" in r.getMessage()}


@pytest.mark.parametrize(("mode", "init", "reason"), [
    ("fractional", "local-kmeans", "'counts' are not whole numbers"),
    ("complex", "local-kmeans", "'centroids' is not real-valued (dtype complex128)"),
    ("huge", "local-kmeans", "'centroids' has values beyond +-1e+100 (largest 1e+308)"),
    ("huge-bounds", "random", "'low' has values beyond +-1e+100"),
    ("uncounted-score", "local-kmeans", "'counts' add up to 999, not to the 1000 points"),
])
def test_a_bad_reply_is_rejected_by_name_and_honest_clients_go_on(s1, s1_centres, flwr_log,
                                                                   mode, init, reason):
    result = WeightedFederatedKMeans(15, init=init, num_server_rounds=20, seed=1).fit(federation(s1, mode))
    log = messages(flwr_log)
    assert f"rejected node 0: malformed reply: {reason}" in log
    assert rejected_nodes(flwr_log) == {"0"}
    assert np.all((result.centroids >= s1.min(axis=0)) & (result.centroids <= s1.max(axis=0)))
    assert np.isfinite(result.score)
    if init != "random":  # a random start ends where it ends; the others find S1's clusters
        assert centre_distance(result.centroids, s1_centres) < 6e4


def test_a_client_whose_row_count_changes_is_rejected(s1, flwr_log):
    fed = federation(s1, "more-rows-later")
    # Its first reply (the initialisation) declares 1000 rows and is accepted ...
    fed.node_configs[0]["hostile"] = ""
    strategy = WeightedFederatedKMeans(15, num_server_rounds=2, tol=0.0, seed=1)
    strategy.wait_for_nodes(fed)
    strategy.initialise(fed)
    # ... its later replies declare 1007.
    fed.node_configs[0]["hostile"] = "more-rows-later"
    result = strategy.fit(fed)
    assert ("rejected node 0: inconsistent reply: 1007 local points, 1000 in its "
            "earlier replies of this run") in messages(flwr_log)
    train = [r for r in result.history if r.phase == "train"]
    assert all(r.clients_answered == 4 and r.clients_rejected == 1 for r in train)


def test_one_huge_value_in_a_client_file_is_refused_there(tmp_path, s1, s1_centres, flwr_log):
    # The ClientApp reads the file on the node: it refuses the file there, with an
    # error reply the server logs, and the run goes on with the other clients.
    parts = iid_parts(s1, 5)
    parts[2] = parts[2].copy()
    parts[2][12, 0] = 1e300
    grid = InProcessGrid(build_client_app(), save_parts(tmp_path / "parts", parts))
    result = WeightedFederatedKMeans(15, seed=1).fit(FlowerFederation(grid))
    assert (f"rejected node {grid.node_ids[2]}: error reply (code 400): "
            in messages(flwr_log))
    assert "value 1e+300 in column 0 (row 12) is too large" in messages(flwr_log)
    assert np.all(np.abs(result.centroids) < 1e7)
    assert result.n_points == 4000
    assert centre_distance(result.centroids, s1_centres) < 6e4


def test_an_in_memory_federation_refuses_a_huge_value_when_built(s1):
    parts = iid_parts(s1, 5)
    parts[2] = parts[2].copy()
    parts[2][12, 0] = 1e300
    with pytest.raises(DataError, match=r"client 2: value 1e\+300 in column 0 \(row 12\) is too large"):
        InMemoryFederation(parts)


def complex_centroids_app() -> ClientApp:
    """The real ClientApp; where node_config['hostile'] is set, its replies' centroids are complex."""
    real = build_client_app()
    app = ClientApp()

    def serve(msg, context):
        reply = real(msg, context)
        if context.node_config.get("hostile") and not reply.has_error():
            arrays = reply.content[RESULT_KEY]
            if "centroids" in arrays:
                arrays["centroids"] = Array(arrays["centroids"].numpy().astype(np.complex128) + 1j)
        return reply

    app.train()(serve)
    app.evaluate()(serve)
    app.query("bounds")(serve)
    app.query("local_kmeans")(serve)
    return app


def test_a_bad_flower_message_is_rejected_by_name_and_honest_clients_go_on(tmp_path, s1, flwr_log):
    configs = save_parts(tmp_path / "parts", iid_parts(s1, 5))
    configs[0]["hostile"] = "complex"
    grid = InProcessGrid(complex_centroids_app(), configs)
    result = WeightedFederatedKMeans(15, num_server_rounds=5, seed=1).fit(FlowerFederation(grid))
    hostile_node = grid.node_ids[0]
    assert (f"rejected node {hostile_node}: malformed reply: 'centroids' is not real-valued "
            "(dtype complex128)") in messages(flwr_log)
    assert rejected_nodes(flwr_log) == {str(hostile_node)}
    train = [r for r in result.history if r.phase == "train"]
    assert train and all(r.clients_answered == 4 and r.clients_rejected == 1 for r in train)
    assert np.isfinite(result.score)


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
