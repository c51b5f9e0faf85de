"""Red team: one dishonest participant of secure aggregation (issue 22).

Each attack goes through the real protocol: the real ClientApp answers real
Flower messages (``InProcessGrid``, Flower-like uint64 node ids; one test in a
Ray simulation), and a client mod lets the node whose ``node_config`` says
``hostile`` tamper with its own replies after the app made them. Each test
asserts whom the log names, that no honest client is rejected, and the
outcome: the run fails with one line naming the failure, or its result is
the honest run's without the liar. Never a finished run with a garbage model.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from flwr.app import ConfigRecord
from helpers import messages, save_parts

from fedcluster.client.app import build_client_app
from fedcluster.config import RunConfig
from fedcluster.data import load_dataset, partition_indices, write_partitions
from fedcluster.federation.base import RunFailed
from fedcluster.server.flower import FlowerFederation
from fedcluster.client.memory import InMemoryFederation
from fedcluster.config import build_strategy
from fedcluster.messages import ProtocolError
from fedcluster.privacy import secagg
from fedcluster.privacy.checks import TotalCheck
from fedcluster.protocol import CONFIG_KEY, PAYLOAD_KEY
from fedcluster.simulation import set_offline_env
from harness.inprocess import InProcessGrid, flower_like_node_ids

CLIENTS = 5
BOUNDS = "0:1e6"


def tamper(mode: str, payload: dict, seen: dict) -> dict:
    """The reply payload of a hostile client in ``mode``; ``seen`` keeps the last honest key."""
    payload = dict(payload)
    if mode == "masked-random" and "masked" in payload:
        payload["masked"] = os.urandom(len(payload["masked"]))
    elif mode == "masked-zeros" and "masked" in payload:
        payload["masked"] = bytes(len(payload["masked"]))
    elif mode == "shares-random" and "shares" in payload:
        # Each share keeps its index byte (the server checks it): only its polynomial is wrong.
        payload["shares"] = [s[:1] + os.urandom(len(s) - 1) for s in payload["shares"]]
    elif mode == "ct-garbage" and "ct" in payload:
        payload["ct"] = [os.urandom(len(c)) for c in payload["ct"]]
    elif mode == "pk-copy" and "pk1" in payload and "pk1" in seen:
        payload["pk1"] = seen["pk1"]
    return payload


def hostile_mod(seen: dict | None = None, mode_file: str | None = None):
    """A client mod: the node whose node_config names a ``hostile`` mode tampers with its replies.

    In a Ray simulation (no ``hostile`` in the node config) the node of
    ``partition-id`` 0 is hostile in the mode written in ``mode_file`` (read
    at each message, so a server can change it between runs; Ray's workers
    share this machine's files). ``seen`` keeps the last honest public key
    (in this process) for ``pk-copy``.
    """
    seen = {} if seen is None else seen

    def mod(msg, context, call_next):
        reply = call_next(msg, context)
        mode = context.node_config.get("hostile", "")
        if not mode and mode_file and context.node_config.get("partition-id") == 0:
            mode = Path(mode_file).read_text()
        if reply.has_error() or PAYLOAD_KEY not in reply.content.config_records:
            return reply
        payload = dict(reply.content.config_records[PAYLOAD_KEY])
        if not mode:
            if "pk1" in payload:
                seen["pk1"] = payload["pk1"]
            return reply
        if mode.startswith("accuse") and "masked" in payload:
            # Claim unreadable shares instead of sending the vector: all senders, or one.
            sources = secagg.node_list(msg.content.config_records[CONFIG_KEY]["src"])
            named = sources if mode == "accuse-all" else sources[:1]
            payload = {secagg.UNREADABLE: secagg.node_bytes(named)}
        reply.content[PAYLOAD_KEY] = ConfigRecord(tamper(mode, payload, seen))
        return reply

    return mod


@pytest.fixture(scope="module")
def s1_five(tmp_path_factory):
    """S1 split in 5 (IID), the parts and their node configs (.npy files), and a start."""
    X = load_dataset("s1").X
    parts = [X[i] for i in partition_indices(len(X), CLIENTS, "iid", seed=0)]
    configs = save_parts(tmp_path_factory.mktemp("parts"), parts)
    start = tmp_path_factory.mktemp("start") / "start.npy"
    np.save(start, X[np.random.default_rng(5).choice(len(X), 15, replace=False)] + 0.5)
    return parts, configs, str(start)


def settings(start: str, **extra) -> RunConfig:
    """dwf, k 15, 3 rounds, tol 0; DP runs start uniformly in the bounds (no data used)."""
    init = {"init": "random"} if "dp" in extra else {"init": start}
    return RunConfig.from_mapping({"algorithm": "dwf", "k": 15, "seed": 1, "data-bounds": BOUNDS,
                                   "num-server-rounds": 3, "tol": 0.0, "secure-aggregation": True,
                                   **init, **extra})


def hostile_grid(configs, mode: str, last: bool = False) -> tuple[InProcessGrid, int]:
    """An in-process grid of the real ClientApp with one hostile node: the first, or the one
    of the largest id (asked last, so it can copy a key sent before its own)."""
    ids = flower_like_node_ids(len(configs), 0)  # the ids InProcessGrid draws (seed 0)
    which = int(np.argmax(ids)) if last else 0
    configs = [{**c, "hostile": mode} if i == which else dict(c) for i, c in enumerate(configs)]
    grid = InProcessGrid(build_client_app(mods=[hostile_mod()]), configs)
    assert grid.node_ids == ids
    return grid, ids[which]


def rejected(records) -> dict[str, str]:
    """Node -> reason of every 'rejected node' line of the log."""
    found = {}
    for r in records:
        text = r.getMessage()
        if "rejected node " in text:
            node, reason = text.split("rejected node ", 1)[1].split(": ", 1)
            found[node] = reason
    return found


def honest(parts, start, keep):
    """The plain run (in memory, no secure aggregation) over the parts ``keep``."""
    mapping = {"algorithm": "dwf", "k": 15, "seed": 1, "data-bounds": BOUNDS, "num-server-rounds": 3,
               "tol": 0.0, "init": start}
    return build_strategy(RunConfig.from_mapping(mapping)).fit(
        InMemoryFederation([parts[i] for i in keep]))


# -- a garbage masked vector: the total's check stops the round -------------------------------
@pytest.mark.parametrize("dp", ["off", "central", "distributed"])
@pytest.mark.parametrize("mode", ["masked-random", "masked-zeros"])
def test_a_garbage_masked_vector_fails_the_round_by_its_total(s1_five, flwr_log, mode, dp):
    parts, configs, start = s1_five
    grid, liar = hostile_grid(configs, mode)
    extra = {} if dp == "off" else {"dp": dp, "dp-epsilon": 1.0}
    with pytest.raises(RunFailed) as failure:
        build_strategy(settings(start, **extra)).fit(FlowerFederation(grid))
    text = str(failure.value)
    assert "\n" not in text
    assert text.startswith("round 1: secure aggregation: the secure total failed its check: ")
    assert "secure aggregation cannot tell whose" in text
    assert f"participants: node(s) {', '.join(map(str, sorted(grid.node_ids)))})" in text
    assert str(liar) in text
    assert rejected(flwr_log) == {}  # no one named in the clear: it cannot be told who


# -- random unmasking shares: outvoted by the others, named, the total right -------------------
@pytest.mark.parametrize("dp", ["off", "central", "distributed"])
def test_random_unmasking_shares_are_outvoted_and_their_sender_named(s1_five, flwr_log, dp):
    """5 clients, threshold 3: each secret has 5 shares, 4 of them honest (more than
    (5 + 3 - 1) / 2): the majority's polynomial is used and the liar is named. Its own
    vector is honest here, so the total is every client's. (Distributed DP's default
    threshold is all 5, which leaves no share to outvote with: the next test; 0.6 is set.)"""
    parts, configs, start = s1_five
    grid, liar = hostile_grid(configs, "shares-random")
    extra = {} if dp == "off" else {"dp": dp, "dp-epsilon": 1.0}
    if dp == "distributed":
        extra["secagg-threshold"] = 0.6
    result = build_strategy(settings(start, **extra)).fit(FlowerFederation(grid))
    named = rejected(flwr_log)
    assert set(named) == {str(liar)}
    assert named[str(liar)] == ("query.secagg_unmask: sent unmasking shares that disagree with "
                                "the others' (its own masked vector stays in the total)")
    assert np.all((result.centroids >= 0) & (result.centroids <= 1e6))
    if dp == "off":
        plain = honest(parts, start, range(CLIENTS))
        np.testing.assert_allclose(result.centroids, plain.centroids, rtol=1e-9, atol=1e-5)
        assert result.n_points == 5000 and np.array_equal(result.counts, plain.counts)
    else:  # fresh noise (never the same twice): the noisy counts add up to about the 5000 rows
        assert abs(result.n_points - 5000) < 300


def test_under_a_threshold_of_all_random_shares_fail_the_round_by_the_totals_check(
        s1_five, flwr_log):
    """Distributed DP's default threshold is every participant (5 of 5): each secret has
    exactly 5 shares, so a wrong one cannot be told from the others; the wrong masks make the
    total garbage, which its check refuses. The round fails in one line naming every
    participant (whose shares were wrong cannot be told): never a model from that total, and
    nothing unmasked but the total of all five."""
    _, configs, start = s1_five
    grid, _ = hostile_grid(configs, "shares-random")
    with pytest.raises(RunFailed, match=r"^round 1: secure aggregation: the secure total failed "
                                        r"its check: .* participants: node\(s\) \d+, \d+, \d+, "
                                        r"\d+, \d+\)$"):
        build_strategy(settings(start, dp="distributed", **{"dp-epsilon": 1.0})
                       ).fit(FlowerFederation(grid))
    assert rejected(flwr_log) == {}


def test_random_shares_without_a_majority_to_outvote_them_fail_the_round(s1_five, flwr_log):
    """4 clients, threshold 3: 4 shares of each secret, 3 honest, not more than (4 + 3 - 1) / 2:
    the disagreement is seen but cannot be settled, and the round fails saying so."""
    parts, configs, start = s1_five
    grid, _ = hostile_grid(configs[:4], "shares-random")
    with pytest.raises(RunFailed, match=r"^round 1: secure aggregation: could not remove the "
                                        r"masks: node \d+'s mask seed: the 4 shares disagree and "
                                        r"no polynomial holds more than 3 of them$"):
        build_strategy(settings(start)).fit(FlowerFederation(grid))
    assert rejected(flwr_log) == {}


# -- unreadable key shares: the receivers name the sender, the rest go on ----------------------
def test_garbage_key_share_ciphertexts_get_their_sender_named_and_left_out(s1_five, flwr_log):
    parts, configs, start = s1_five
    grid, liar = hostile_grid(configs, "ct-garbage")
    result = build_strategy(settings(start)).fit(FlowerFederation(grid))
    log = messages(flwr_log)
    assert set(rejected(flwr_log)) == {str(liar)}
    assert f"node {liar}: its encrypted key shares could not be read by 4 receiver(s)" in log
    # Each aggregation (3 rounds and the score) starts once again without it.
    assert log.count(f"secure aggregation starts again without node(s) {liar}") == 4
    plain = honest(parts, start, [i for i, n in enumerate(grid.node_ids) if n != liar])
    np.testing.assert_allclose(result.centroids, plain.centroids, rtol=1e-9, atol=1e-5)
    assert result.n_points == 4000 and np.array_equal(result.counts, plain.counts)


# -- a copied public key: both senders left out, the rest go on --------------------------------
def test_a_copied_public_key_leaves_both_its_senders_out(s1_five, flwr_log):
    parts, configs, start = s1_five
    grid, liar = hostile_grid(configs, "pk-copy", last=True)
    victim = sorted(grid.node_ids)[-2]  # asked just before the liar: the key it copies
    result = build_strategy(settings(start)).fit(FlowerFederation(grid))
    named = rejected(flwr_log)
    assert set(named) == {str(liar), str(victim)}
    assert named[str(liar)] == (f"query.secagg_setup: sent a public key that node(s) {victim} "
                                "also sent; every sender of a clashing key is left out of this "
                                "aggregation")
    keep = [i for i, n in enumerate(grid.node_ids) if n not in (liar, victim)]
    plain = honest(parts, start, keep)
    np.testing.assert_allclose(result.centroids, plain.centroids, rtol=1e-9, atol=1e-5)
    assert result.n_points == 3000


# -- false accusations: a liar accusing many is the suspect; one accusation costs its target ----
def test_a_receiver_accusing_more_than_half_its_neighbours_is_taken_for_the_suspect(s1_five,
                                                                                    flwr_log):
    parts, configs, start = s1_five
    grid, liar = hostile_grid(configs, "accuse-all")
    result = build_strategy(settings(start)).fit(FlowerFederation(grid))
    named = rejected(flwr_log)
    assert set(named) == {str(liar)}
    assert named[str(liar)].startswith("query.secagg_masked: accused 4 of its 4 neighbours")
    assert named[str(liar)].endswith("more than half, so it is taken for the suspect")
    plain = honest(parts, start, [i for i, n in enumerate(grid.node_ids) if n != liar])
    np.testing.assert_allclose(result.centroids, plain.centroids, rtol=1e-9, atol=1e-5)
    assert result.n_points == 4000


def test_false_accusations_cost_the_accused_and_the_log_names_the_accuser_each_time(
        s1_five, flwr_log):
    """The server cannot tell who lies without revealing keys: each accused honest client is
    left out of the try it is accused in, and the log names both sides. A receiver that
    accuses one new neighbour in every try (never more than half of them) makes the round
    fail after the 2 restarts, with its name in every accusation."""
    parts, configs, start = s1_five
    grid, liar = hostile_grid(configs, "accuse-one")
    with pytest.raises(RunFailed, match=r"^round 1: secure aggregation: key shares "
                                        r"unreadable, still after 2 restarts: node \d+: its encrypted "
                                        rf"key shares could not be read by 1 receiver\(s\) "
                                        rf"\(node\(s\) {liar}; "):
        build_strategy(settings(start)).fit(FlowerFederation(grid))
    named = rejected(flwr_log)
    assert str(liar) not in named and len(named) == 3
    for reason in named.values():
        assert reason == (f"query.secagg_masked: its encrypted key shares could not be read by 1 "
                          f"receiver(s) (node(s) {liar}; the server cannot tell which side lies)")


# -- the pieces: Shamir decoding, the total's rules -------------------------------------------
def test_every_share_is_checked_and_a_majority_polynomial_outvotes_wrong_ones():
    secret = os.urandom(32)
    shares = list(enumerate(secagg.split_secret(secret, 3, 5), start=100))
    wrong = [(s, b[:1] + os.urandom(len(b) - 1)) if s == 100 else (s, b) for s, b in shares]
    assert secagg.rebuild_secret(shares, 3) == (secret, [])
    assert secagg.rebuild_secret(wrong, 3) == (secret, [100])  # in the first subset tried
    assert secagg.rebuild_secret(wrong[1:] + wrong[:1], 3) == (secret, [100])
    two_wrong = [(s, b[:1] + os.urandom(len(b) - 1)) if s < 102 else (s, b) for s, b in shares]
    with pytest.raises(ProtocolError, match="no polynomial holds more than 3.5"):
        secagg.rebuild_secret(two_wrong, 3)
    assert secagg.rebuild_secret(wrong[:3], 3)[0] != secret  # t shares: nothing to check against


def test_the_total_check_names_what_an_honest_total_cannot_be():
    exact = TotalCheck(("sums", "counts", "sse", "n"), 2, 2, 24, radius=10.0)
    ok = np.array([3.0, 4.0, 0.0, 0.0, 1.0, 0.0, 7.5, 1.0])
    assert exact(ok, 3, 2) == ""
    cases = {
        "a value of magnitude 1e+31 lies beyond": np.r_[ok[:7], 1e31],
        "the row count is 1.5, not a whole number >= 0": np.r_[ok[:6], 7.5, 1.5],
        "the squared distances add up to -1 < 0": np.r_[ok[:6], -1.0, 1.0],
        "a count is 0.5, not a whole number >= 0": np.r_[ok[:4], 0.5, 0.5, 7.5, 1.0],
        "counts add up to 2, more than the 1 rows declared": np.r_[ok[:4], 1.0, 1.0, 7.5, 1.0],
        "cluster 0's sum has norm 50, beyond its count 1 times the radius 10": np.r_[30.0, 40.0,
                                                                                  ok[2:]],
    }
    for reason, values in cases.items():
        assert exact(values, 3, 2).startswith(reason), reason
    assert exact(np.r_[0.0, 0.0, ok[2:4], 0.0, 0.0, 7.5, 1.0], 3, 2) == ""  # a row withheld
    fuzzy = TotalCheck(("counts", "n"), 2, 0, 24, fuzzy=True)
    assert fuzzy(np.array([0.3, 0.25, 1.0]), 3, 2) == ""
    assert fuzzy(np.array([0.8, 0.25, 1.0]), 3, 2).startswith("the fuzzy supports add up to 1.05")
    noisy = TotalCheck(("sums", "counts"), 1, 4, 24, radius=1.0, sigma=2.0, count_weight=0.5)
    # 3 survivors of threshold 2: count sd 4 sqrt(1.5) = 4.9, floor -39.2; sum sd 2.45.
    assert noisy(np.array([1.0, 1.0, 1.0, 1.0, -39.0]), 3, 2) == ""
    assert noisy(np.array([0.0, 0.0, 0.0, 0.0, -40.0]), 3, 2).startswith("a noisy count is -40")
    # limit (0 + 8 x 4.9) x 1 + 8 x 2.45 x 2 = 78.4: a sum of norm 80 is beyond.
    assert noisy(np.array([40.0, 40.0, 40.0, 40.0, -1.0]), 3, 2).startswith("cluster 0's sum")


# -- the same in a Ray simulation --------------------------------------------------------------
@pytest.mark.slow
def test_attacks_in_a_ray_simulation_name_the_liar_or_fail_the_round(tmp_path, flwr_log):
    """Flower's ``run_simulation`` (Ray), 5 simulated clients; the client of partition 0 is
    hostile through a client mod: garbage key-share ciphertexts (named by its 4 receivers,
    the 4 others' run goes on), random unmasking shares (outvoted, named, every row counted),
    then its masked vector random bytes under central DP and zeros under distributed DP (the
    round fails by its total)."""
    set_offline_env()
    from flwr.serverapp import ServerApp
    from flwr.simulation import run_simulation

    X = load_dataset("s1").X
    write_partitions(X, partition_indices(len(X), CLIENTS, "iid", seed=0), tmp_path / "parts")
    mode = tmp_path / "mode"
    base = {"algorithm": "dwf", "k": 15, "seed": 1, "init": "random", "data-bounds": BOUNDS,
            "num-server-rounds": 3, "tol": 0.0, "secure-aggregation": True, "min-nodes": CLIENTS}
    outcome = {}
    server = ServerApp()

    @server.main()
    def main(grid, context):
        federation = FlowerFederation(grid)
        mode.write_text("ct-garbage")
        strategy = build_strategy(RunConfig.from_mapping(base))
        outcome["ct-garbage"] = strategy.fit(federation)
        outcome["liar"] = next(n for n, key in strategy.sampling_keys.items() if key == 0)
        mode.write_text("shares-random")
        outcome["shares-random"] = build_strategy(RunConfig.from_mapping(base)).fit(federation)
        for attack, dp in (("masked-random", "central"), ("masked-zeros", "distributed")):
            mode.write_text(attack)
            try:
                build_strategy(RunConfig.from_mapping({**base, "dp": dp,
                                                       "dp-epsilon": 1.0})).fit(federation)
            except RunFailed as exc:
                outcome[attack] = str(exc)

    run_simulation(server_app=server,
                   client_app=build_client_app({"partitions-dir": str(tmp_path / "parts")},
                                               mods=[hostile_mod(mode_file=str(mode))]),
                   num_supernodes=CLIENTS,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                   "init_args": {"log_to_driver": False}})
    liar = outcome["liar"]
    log = messages(flwr_log)
    assert f"node {liar}: its encrypted key shares could not be read by 4 receiver(s)" in log
    assert f"round 1: rejected node {liar}: query.secagg_masked: its encrypted key shares" in log
    assert outcome["ct-garbage"].n_points == 4000
    assert set(rejected(flwr_log)) == {str(liar)}
    assert (f"rejected node {liar}: query.secagg_unmask: sent unmasking shares that disagree "
            "with the others'") in log
    assert outcome["shares-random"].n_points == 5000
    for attack in ("masked-random", "masked-zeros"):
        assert outcome[attack].startswith(
            "round 1: secure aggregation: the secure total failed its check: "), outcome
        assert str(liar) in outcome[attack]
