"""No raw row leaves a client, in any message, for any method and start.

A recording mod (:mod:`harness.privacy_probe`) sits in the real ClientApp of a real
Flower simulation (Ray, Flower's node ids) and keeps every reply of every
client; the checks then look for data rows and for centroids of fewer than p
rows in them. The same probe over the in-process executor with the privacy
floor switched off finds the leaks of the code before the floor, so the probe
can fail. With secure aggregation on, a probe on the server's side (every
answer the ServerApp receives) finds only protocol payloads, never a sum, a
count or a row number of one client.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import save_parts

from fedcluster.client.app import build_client_app
from fedcluster.config import RunConfig
from fedcluster.data import load_dataset, write_partitions
from fedcluster.server.flower import FlowerFederation
from fedcluster.client.memory import InMemoryFederation
from fedcluster.config import build_strategy
from fedcluster.methods import METHODS
from fedcluster.simulation import set_offline_env
from fedcluster.strategies import RunFailed
from harness.inprocess import InProcessGrid
from harness.privacy_probe import extreme_values, leaks, recorded, recorder

P = 2
#: (name, settings): every method, and every start of the round-based family.
RUNS = [
    *[(f"dwf-{init}", {"algorithm": "dwf", "init": init}) for init in ("local-kmeans", "kfed", "random")],
    ("dwf-file", {"algorithm": "dwf", "init": "START"}),
    # DeepFeCA (torch, images) has its own probe below.
    *[(name, {"algorithm": name}) for name in METHODS if name != "dwf" and not METHODS[name].extra],
    ("fedkmeans-random", {"algorithm": "fedkmeans", "init": "random"}),
    # Privacy options (fedcluster/privacy/): the data below lies in [0, 1000]^2.
    ("dwf-secure-aggregation", {"algorithm": "dwf", "init": "random", "data-bounds": "0:1000",
                                "secure-aggregation": True}),
    ("dwf-distributed-dp", {"algorithm": "dwf", "init": "random", "data-bounds": "0:1000",
                            "secure-aggregation": True, "dp": "distributed", "dp-epsilon": 5.0}),
    ("fedkmeans-central-dp", {"algorithm": "fedkmeans", "init": "random", "data-bounds": "0:1000",
                              "secure-aggregation": True, "dp": "central", "dp-epsilon": 5.0}),
    ("ffcm-avg1-secure-aggregation", {"algorithm": "ffcm-avg1", "init": "random",
                                      "data-bounds": "0:1000", "secure-aggregation": True}),
    ("ffcm-avg1-central-dp", {"algorithm": "ffcm-avg1", "init": "random", "data-bounds": "0:1000",
                              "secure-aggregation": True, "dp": "central", "dp-epsilon": 5.0}),
]
#: Runs whose server must see nothing but protocol payloads (secure aggregation).
#: (DP of either kind runs over secure aggregation.)
SECURE = {name for name, settings in RUNS if settings.get("secure-aggregation")}


class ServerView:
    """The server's side of the probe: every answer the strategy receives."""

    def __init__(self, federation) -> None:
        self.federation = federation
        self.answers: list = []

    def node_ids(self):
        return self.federation.node_ids()

    def ask(self, request, node_ids, timeout):
        answers = self.federation.ask(request, node_ids, timeout)
        self.answers.extend(answers)
        return answers


def federation_data():
    """S1 in float units (no integer coincidences), over 4 large clients and 3 small ones.

    The client of 31 rows has k = 15 clusters of about two rows (the floor's
    edge); the client of 3 rows, fewer than p x k, sends what clusters of p
    rows it has and withholds the rest; the client of 20 rows holds ten rows
    twice each, so a cluster of two identical rows goes out as their value
    (p identical rows are p rows). Returns every client's rows pooled (the
    duplicates twice, so that :func:`leaks` counts them) and the parts.
    """
    X = load_dataset("s1").X / 1000.0
    X = X + np.random.default_rng(0).uniform(-1e-3, 1e-3, X.shape)
    order = np.random.default_rng(1).permutation(len(X))
    tiny, rest = np.split(order, [34])
    large = np.array_split(rest[10:], 4)
    parts = [X[np.sort(p)] for p in (*large, tiny[:31], tiny[31:])]
    parts.append(np.repeat(X[np.sort(rest[:10])], 2, axis=0))
    return np.concatenate(parts), parts


def settings(name: str, base: dict, start_file: str, out: str) -> dict:
    # min-nodes: Flower starts the ServerApp while it still registers the simulated nodes.
    config = {"k": 15, "num-server-rounds": 3, "tol": 0.0, "seed": 3, "min-cluster-size": P,
              "min-nodes": 7, "out-dir": out, **base}
    if config.get("init") == "START":
        config["init"] = start_file
    return config


def probe_simulation(server, parts, tmp_path, probe) -> None:
    """Run ``server`` over one simulated client per part, every reply recorded in ``probe``."""
    from flwr.simulation import run_simulation

    write_partitions(np.concatenate(parts), np.split(np.arange(sum(map(len, parts))),
                                                     np.cumsum([len(p) for p in parts])[:-1]),
                     tmp_path / "parts")
    run_simulation(server_app=server,
                   client_app=build_client_app({"partitions-dir": str(tmp_path / "parts")},
                                               mods=[recorder(probe)]),
                   num_supernodes=len(parts),
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                   "init_args": {"log_to_driver": False}})


@pytest.mark.slow
def test_no_message_of_any_method_holds_a_row_in_a_flower_simulation(tmp_path):
    set_offline_env()
    from flwr.serverapp import ServerApp

    X, parts = federation_data()
    start = tmp_path / "start.npy"
    np.save(start, np.random.default_rng(2).uniform(X.min(0), X.max(0), (15, 2)))
    probe = tmp_path / "probe"
    probe.mkdir()
    configs = {name: settings(name, base, str(start), str(tmp_path / name)) for name, base in RUNS}

    server = ServerApp()
    seen_by_server: dict[str, list] = {}

    @server.main()
    def main(grid, context):
        federation = FlowerFederation(grid)
        for name, config in configs.items():
            view = ServerView(federation)
            result = build_strategy(RunConfig.from_mapping(config)).fit(view)
            seen_by_server[name] = view.answers
            (tmp_path / f"{name}.json").write_text(json.dumps(result.centroids.tolist()))

    probe_simulation(server, parts, tmp_path, probe)

    replies = recorded(probe)
    kinds = {str(r["message_type"]) for r in replies}
    assert {"train", "evaluate", "query.bounds", "query.local_kmeans", "query.garst_init",
            "train.garst", "train.fuzzy", "query.feca", "train.minibatch", "query.dimension",
            "query.secagg_setup", "query.secagg_share", "query.secagg_masked",
            "query.secagg_unmask"} <= kinds
    # The sum forms (no floor per cluster under DP) travel only inside masked stages.
    assert not kinds & {"train.sums", "train.fuzzy_sums"}, kinds
    for name in SECURE:  # the server received keys, shares and masked words, no statistic
        answers = [a for a in seen_by_server[name] if a.summary is not None]
        assert answers and all(a.summary.n == 0 and a.summary.payload is not None
                               and a.summary.sums is None and a.summary.counts is None
                               for a in answers), name
    assert leaks(replies, X, P) == []
    assert extreme_values(replies, parts) == []
    assert any("result.centroids" in r and len(r["result.centroids"]) for r in replies)
    for name, _ in RUNS:  # nor does any final model
        centroids = np.array(json.loads((tmp_path / f"{name}.json").read_text()))
        assert leaks([{"message_type": np.asarray(name), "model": centroids}], X, P) == []


@pytest.mark.slow
def test_no_deepfeca_message_holds_a_row_or_the_features_of_a_row(tmp_path):
    """DeepFeCA's replies: feature centroids under the floor, weights of the sent network.

    Digits over 3 clients, one round, in a Flower simulation: the replies hold
    no data row, no centroid of fewer than p rows, no centroid equal to the
    features of one row (under the network the server sent first, and the
    final one), and the training replies hold exactly the network's weights.
    """
    pytest.importorskip("torch", reason="DeepFeCA needs PyTorch: pip install 'fedcluster[deep]'")
    set_offline_env()
    from flwr.serverapp import ServerApp
    from flwr.simulation import run_simulation

    from fedcluster.methods.deepfeca.evaluation import network_features, network_spec_of

    X = load_dataset("digits").X
    parts = np.array_split(np.random.default_rng(0).permutation(len(X)), 3)
    write_partitions(X, parts, tmp_path / "parts")
    probe = tmp_path / "probe"
    probe.mkdir()
    config = RunConfig.from_mapping({"algorithm": "deepfeca", "k": 10, "num-server-rounds": 1,
                                     "image-shape": "1,8,8", "seed": 1, "min-cluster-size": P,
                                     "min-nodes": 3, "out-dir": str(tmp_path / "out")})
    strategy = build_strategy(config)
    results = []

    server = ServerApp()

    @server.main()
    def main(grid, context):
        results.append(strategy.fit(FlowerFederation(grid)))

    run_simulation(server_app=server,
                   client_app=build_client_app({"partitions-dir": str(tmp_path / "parts")},
                                               mods=[recorder(probe)]),
                   num_supernodes=3,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                   "init_args": {"log_to_driver": False}})
    [result] = results
    replies = recorded(probe)
    assert {str(r["message_type"]) for r in replies} == {"query.deep_features", "train.deepfeca"}
    spec = network_spec_of(result.settings)
    first = strategy.initial_weights(int(np.random.default_rng([1, 0]).integers(2**31)))
    for weights in (first, result.arrays):
        assert leaks(replies, network_features(weights, spec, X, normalise=True), P) == []
    assert leaks(replies, X, P) == []
    trained = [r for r in replies if str(r["message_type"]) == "train.deepfeca"]
    assert len(trained) == 3
    for reply in trained:
        assert {k.removeprefix("arrays.") for k in reply if k.startswith("arrays.")} == \
            set(result.arrays)
        assert int(reply["metrics.num-examples"]) >= P
    assert leaks([{"message_type": np.asarray("deepfeca"), "model": result.centroids}],
                 network_features(result.arrays, spec, X, normalise=True), P) == []


def test_the_probe_finds_the_leaks_of_clients_without_the_floor(tmp_path, monkeypatch):
    """Without the floor (its functions replaced by pass-throughs) rows leave, as before."""
    from fedcluster.client import respond
    from fedcluster.local import steps
    from fedcluster.methods.dwf import client as dwf_client

    monkeypatch.setattr(respond, "check_reply", lambda *args: None)
    for module in (steps, dwf_client):
        monkeypatch.setattr(module, "check_rows", lambda *args: None)
    monkeypatch.setattr(steps, "keep_large",
                        lambda X, centroids, counts, p: np.ones(len(counts), dtype=bool))
    monkeypatch.setattr(steps, "private_bounds", lambda X, p: (X.min(axis=0), X.max(axis=0)))
    monkeypatch.setattr(dwf_client, "withhold_small",
                        lambda X, centroids, counts, sizes, p, given, *more: (centroids, counts,
                                                                              *more))
    X, parts = federation_data()
    probe = tmp_path / "probe"
    probe.mkdir()
    federation = FlowerFederation(InProcessGrid(build_client_app(mods=[recorder(probe)]),
                                                save_parts(tmp_path / "parts", parts)))
    for init in ("local-kmeans", "random"):
        build_strategy(RunConfig.from_mapping(
            settings("dwf", {"algorithm": "dwf", "init": init}, "", str(tmp_path)))).fit(federation)
    replies = recorded(probe)
    found = leaks(replies, X, P)
    assert any("query.local_kmeans: result.centroids row(s)" in line for line in found), found
    assert any("< 2" in line for line in found), found
    assert extreme_values(replies, parts)


def test_the_probe_finds_a_radius_that_is_one_rows_distance():
    # FeCA's paper radius for the rows 1, 1, 4 (the lone row withheld, then counted in the
    # kept cluster): 3, the distance to the row 4. Radius 0 is the distance of 2 rows.
    X = np.array([[1.0], [1.0], [4.0]])
    reply = {"message_type": np.asarray("query.feca"), "result.centroids": np.array([[1.0]]),
             "result.counts": np.array([2.0])}
    assert leaks([{**reply, "result.radii": np.array([3.0])}], X, 2) == [
        "query.feca: radius(es) of centroid(s) [0] are the distance of fewer than 2 rows"]
    assert leaks([{**reply, "result.radii": np.array([0.0])}], X, 2) == []
    assert leaks([{**reply, "result.radii": np.array([1.5])}], X, 2) == []


def test_a_k_as_large_as_the_data_fails_instead_of_sending_the_data():
    # Before the floor, k = 5000 over 2 clients of S1 put every row into model.pb.
    # Now each client answers, but every local cluster is one row: it sends none.
    # (300 rows each: a local k-means of 5000 rows into 2500 clusters takes a minute.)
    X = load_dataset("s1").X
    federation = InMemoryFederation([X[:300], X[300:600]])
    with pytest.raises(RunFailed, match="the clients sent 0 non-empty local centroids, fewer than "
                       "k = 600"):
        build_strategy(RunConfig.from_mapping({"k": 600})).fit(federation)


@pytest.mark.slow
def test_standardisation_and_k_selection_send_no_row_in_a_flower_simulation(tmp_path):
    """The moments and silhouette replies (README's table) hold no row, nor any later reply."""
    set_offline_env()
    from flwr.serverapp import ServerApp

    from fedcluster.numerics.moments import standardize
    from fedcluster.selection import select_over

    X, parts = federation_data()
    probe = tmp_path / "probe"
    probe.mkdir()
    config = RunConfig.from_mapping({**settings("dwf", {"algorithm": "dwf"}, "", str(tmp_path)),
                                     "standardize": True})
    server = ServerApp()

    @server.main()
    def main(grid, context):
        selection = select_over(FlowerFederation(grid), config, [14, 15])
        (tmp_path / "transform.json").write_text(json.dumps(
            [selection.result.shift.tolist(), selection.result.scale.tolist()]))

    probe_simulation(server, parts, tmp_path, probe)
    replies = recorded(probe)
    kinds = {str(r["message_type"]) for r in replies}
    assert {"query.moments", "query.silhouette", "train", "evaluate"} <= kinds, kinds
    shift, scale = (np.array(v) for v in json.loads((tmp_path / "transform.json").read_text()))
    Z = standardize(X, shift, scale)
    assert leaks(replies, X, P) == [] and leaks(replies, Z, P) == []
    for reply in replies:
        kind = str(reply["message_type"])
        arrays = {key for key in reply if key.startswith("result.")}
        if kind == "query.moments":  # n >= 3 rows' mean and std, nothing else
            assert arrays == {"result.mean", "result.std"} and reply["metrics.num-examples"] >= 3
        if kind == "query.silhouette":  # two sums and a count
            assert arrays == set() and abs(reply["metrics.silhouette"]) <= reply["metrics.num-examples"]
