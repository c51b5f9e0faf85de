"""Secure aggregation and differential privacy (fedcluster/privacy/).

Secure aggregation: a probe on the server's side (every answer the server
process receives) never holds one client's sums or counts, the total equals
the plain sum within the fixed-point precision, and a client that drops out
mid-round leaves a correct total of the others. SecAgg+ (``secagg-neighbours``):
the same with each client's keys, shares and masks among its neighbours only,
and a client refuses a neighbourhood or a threshold it cannot accept; the default degree and
threshold follow from the number of participants (SecAgg below 20), a user-set degree wins. DP: the accountant matches a
hand-computed composition of Gaussian mechanisms, the budget stops a run
cleanly, noise 0 gives the plain method; the noise (OpenDP's discrete Gaussian) is fresh in
every run, of the calibrated spread, on the fixed-point grid, and cannot be regenerated from
the seed the model file records. A data owner's own floor (node config) refuses a run below it,
and a client never sends a distributed share with less noise than it computes itself.
``ffcm-avg1`` (fuzzy sums and supports) is held to the same as ``dwf``.
"""

from __future__ import annotations

import json
import logging
import math
import re

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from helpers import save_parts
from fedcluster.client.app import build_client_app
from fedcluster.client.respond import respond
from fedcluster.config import ConfigError, RunConfig
from fedcluster.data import load_dataset, partition_indices
from fedcluster.federation.base import RunFailed
from fedcluster.server.flower import FlowerFederation
from fedcluster.client.memory import InMemoryFederation
from fedcluster.messages import ProtocolError, Request
from fedcluster.config import build_strategy
from fedcluster.privacy import secagg, secagg_names
from fedcluster.privacy.checks import TotalCheck
from fedcluster.privacy.accountant import calibrate, epsilon_spent
from fedcluster.methods.ffcm.client import FUZZY_SUMS
from fedcluster.privacy.kinds import SUMS
from fedcluster.privacy.mechanism import (Clipping, add_noise, centroids_from_totals,
                                         client_noise_scale, parse_bounds)
from fedcluster.strategies.private import SecureSum
from fedcluster.server.artifacts import read_model, write_run
from harness.inprocess import InProcessGrid

K = 15
BOUNDS = "0:1e6"


def check(fields: tuple[str, ...]) -> TotalCheck:
    """The exact totals' check of S1's sums in the clear (no DP: no radius)."""
    return TotalCheck(fields, K, 2, secagg_names.DEFAULT_FRACTION_BITS)


def s1_parts(clients: int = 6, split: str = "iid"):
    X = load_dataset("s1").X
    return X, [X[i] for i in partition_indices(len(X), clients, split, seed=0)]


def config(**settings) -> RunConfig:
    return RunConfig.from_mapping({"k": K, "seed": 1, "init": "random", "data-bounds": BOUNDS,
                                   **settings})


class Probe:
    """A federation wrapper that records every answer the server receives (the server's view)."""

    def __init__(self, federation, drop: dict[int, str] | None = None) -> None:
        self.federation = federation
        self.drop = dict(drop or {})  # node -> the stage from which it sends nothing
        self.seen: list = []
        self.asked: list = []  # every request, as sent

    def node_ids(self):
        return self.federation.node_ids()

    def ask(self, request, node_ids, timeout):
        kind = (request[node_ids[0]] if isinstance(request, dict) else request).kind
        order = list(secagg.STAGES)
        alive = [n for n in node_ids if not (n in self.drop and kind in order
                                              and order.index(kind) >= order.index(self.drop[n]))]
        self.asked.append(request)
        answers = self.federation.ask(request, alive, timeout)
        self.seen.extend(answers)
        return answers


def values_seen(answers) -> list[np.ndarray]:
    """Every array and every payload value of the answers, as float vectors and raw words."""
    found = []
    for answer in answers:
        summary = answer.summary
        if summary is None:
            continue
        for name in ("centroids", "counts", "sums", "weights"):
            if getattr(summary, name) is not None:
                found.append(np.ravel(getattr(summary, name)).astype(np.float64))
        for value in (summary.payload or {}).values():
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, bytes) and len(item) % 8 == 0:
                    words = np.frombuffer(item, dtype="<u8")
                    found.append(words.view(np.int64).astype(np.float64))
                    found.append(secagg.decode(words[:len(words) // 3 * 3], 24))
    return found


def contains(haystack: np.ndarray, needle: np.ndarray) -> bool:
    needle = np.ravel(needle)
    if needle.size == 0 or haystack.size < needle.size:
        return False
    windows = np.lib.stride_tricks.sliding_window_view(haystack, needle.size)
    return bool(np.any(np.all(np.isclose(windows, needle, rtol=1e-9, atol=1e-6), axis=1)))


# -- the primitives ---------------------------------------------------------------------
def test_fixed_point_totals_are_exact_to_the_stated_precision():
    rng = np.random.default_rng(0)
    vectors = [rng.normal(0, 1e6, 50) * rng.choice([1e-6, 1, 1e6], 50) for _ in range(7)]
    bits = 24
    total = np.zeros(secagg.LIMBS * 50, dtype=np.uint64)
    for v in vectors:
        total = total + secagg.encode(v, bits)
    error = np.abs(secagg.decode(total, bits) - np.sum(vectors, axis=0))
    assert np.all(error <= len(vectors) * 2.0 ** -(bits + 1) + 1e-12 * np.abs(np.sum(vectors, axis=0)))
    with pytest.raises(ProtocolError, match="does not fit the fixed-point encoding"):
        secagg.encode(np.array([1e30]), bits)


def test_shamir_shares_rebuild_the_secret_from_any_threshold_of_them():
    secret = bytes(range(48))
    shares = secagg.split_secret(secret, 3, 5)
    assert secagg.combine_secret([shares[4], shares[0], shares[2]]) == secret
    assert secagg.combine_secret(shares[1:3] + shares[3:4]) == secret
    assert secagg.combine_secret(shares[:2]) != secret


def test_pairwise_masks_agree_on_both_sides():
    a, b = secagg.new_private_key(), secagg.new_private_key()
    one = secagg.agreed_key(secagg.private_bytes(a), secagg.public_bytes(b))
    other = secagg.agreed_key(secagg.private_bytes(b), secagg.public_bytes(a))
    assert one == other and np.array_equal(secagg.mask(one, 9), secagg.mask(other, 9))


# -- secure aggregation -------------------------------------------------------------------
def plain_sums(parts, centroids):
    request = Request(SUMS, {"chunk-size": 4096, "data-bounds": "", "dp-clip": 0.0,
                             "dp-client-noise": 0.0, "min-cluster-size": 2}, centroids)
    return [respond(X, request, {}) for X in parts]


def test_the_server_sees_only_the_total_of_the_sums_and_counts():
    X, parts = s1_parts()
    centroids = X[np.random.default_rng(3).choice(len(X), K, replace=False)] + 0.5
    probe = Probe(InMemoryFederation(parts))
    strategy = build_strategy(config(**{"secure-aggregation": True}))
    request = Request(SUMS, {"chunk-size": 4096, "data-bounds": "", "dp-clip": 0.0,
                             "dp-client-noise": 0.0, "min-cluster-size": 2}, centroids)
    size = K * 2 + K + 2
    total, exchange = SecureSum(strategy, probe, list(range(len(parts))), request,
                                ("sums", "counts", "sse", "n"), size, what="test",
                                verify=check(("sums", "counts", "sse", "n"))).run()
    own = plain_sums(parts, centroids)
    expected = np.concatenate([np.sum([s.sums for s in own], 0).ravel(),
                               np.sum([s.counts for s in own], 0), [sum(s.sse for s in own)],
                               [sum(s.n for s in own)]])
    assert np.all(np.abs(total - expected) <= len(parts) * 2.0 ** -25 * 4 + 1e-15 * np.abs(expected))
    assert np.array_equal(total[K * 2:K * 3], expected[K * 2:K * 3])  # counts exactly
    assert sorted(exchange.accepted) == list(range(len(parts))) and not exchange.rejected
    seen = values_seen(probe.seen)
    assert seen, "the probe saw nothing"
    for summary in own:  # no client's sums or counts in anything the server received
        for secret in (summary.sums.ravel(), summary.counts):
            assert not any(contains(v, secret) for v in seen)


def test_a_client_that_drops_out_mid_round_leaves_the_total_of_the_others():
    X, parts = s1_parts(clients=7)
    centroids = X[:K] + 0.25
    probe = Probe(InMemoryFederation(parts), drop={2: secagg.MASKED, 5: secagg.MASKED})
    strategy = build_strategy(config(**{"secure-aggregation": True, "secagg-threshold": 0.7}))
    inner = Request(SUMS, {"chunk-size": 4096, "data-bounds": "", "dp-clip": 0.0,
                           "dp-client-noise": 0.0, "min-cluster-size": 2}, centroids)
    total, exchange = SecureSum(strategy, probe, list(range(7)), inner, ("counts", "n"), K + 1,
                                what="round 1", verify=check(("counts", "n"))).run()
    others = [p for i, p in enumerate(parts) if i not in (2, 5)]
    own = plain_sums(others, centroids)
    assert np.array_equal(total, np.concatenate([np.sum([s.counts for s in own], 0),
                                                 [sum(len(p) for p in others)]]))
    assert sorted(exchange.rejected) == [2, 5] and "dropped out" in exchange.rejected[2]
    # One more drop goes below the threshold (5 of 7): the round fails loudly.
    probe = Probe(InMemoryFederation(parts), drop={1: secagg.MASKED, 2: secagg.MASKED,
                                                   5: secagg.MASKED})
    with pytest.raises(RunFailed, match="secure aggregation: 4 of 7 clients left at the masked "
                                        "inputs, 5 needed"):
        SecureSum(strategy, probe, list(range(7)), inner, ("counts", "n"), K + 1, what="round 1",
                  verify=check(("counts", "n"))).run()


def stage_asks(probe: Probe, kind: str) -> list[dict]:
    """Every per-node request dict of the probe's stages of ``kind``, one per try."""
    return [asked for asked in probe.asked
            if isinstance(asked, dict) and next(iter(asked.values())).kind == kind]


def test_distributed_dp_restarts_without_a_dropout_and_sizes_the_noise_for_all_left(flwr_log):
    """Under distributed DP the default threshold is every participant (6 of 6), so each
    client's share totals central's noise. A client lost after the key exchange stops the try
    before any unmasking request goes out; the aggregation starts again without it, every
    client is asked for sigma / sqrt(5), and the budget counts the one round once."""
    _, parts = s1_parts(clients=6)
    probe = Probe(InMemoryFederation(parts), drop={3: secagg.MASKED})
    result = build_strategy(config(**{"dp": "distributed", "secure-aggregation": True,
                                      "num-server-rounds": 1})).fit(probe)
    assert result.rounds == 1 and result.history[-1].epsilon == pytest.approx(1.0, abs=2e-3)
    shares, masked = stage_asks(probe, secagg.SHARE), stage_asks(probe, secagg.MASKED)
    assert [sorted(s) for s in shares] == [list(range(6)), [0, 1, 2, 4, 5]]
    assert [{r.config["threshold"] for r in s.values()} for s in shares] == [{6}, {5}]
    clipping = Clipping.declared(BOUNDS, 0.0, 2)
    for attempt, t in zip(masked, (6, 5)):
        z = next(iter(attempt.values())).config["dp-noise-multiplier"]
        assert [r.config["dp-client-noise"] for r in attempt.values()] == \
            pytest.approx([client_noise_scale(z, clipping, t)] * len(attempt), rel=1e-12)
    # Nothing of the lost try is unmasked: the one unmasking is the second try's, of all five.
    unmask = stage_asks(probe, secagg.UNMASK)
    assert len(unmask) == 1 and sorted(unmask[0]) == [0, 1, 2, 4, 5]
    # Each try's five answered with their masked vector: none refused its share.
    assert sum("masked" in (a.summary.payload or {}) for a in probe.seen if a.summary) == 10
    lines = [r.getMessage() for r in flwr_log]
    assert any(line.startswith("round 1: secure aggregation starts again without node(s) 3 "
                               "(participants lost at the masked inputs under a threshold of "
                               "all 6") for line in lines), lines
    assert "round 1: rejected node 3: the masked inputs: dropped out" in lines


class DropEachTry(Probe):
    """Drops, at each try's masked stage, the lowest node not dropped yet."""

    def ask(self, request, node_ids, timeout):
        if isinstance(request, dict) and request[node_ids[0]].kind == secagg.MASKED:
            self.drop[min(set(node_ids) - set(self.drop))] = secagg.MASKED
        return super().ask(request, node_ids, timeout)


def test_dropouts_that_go_on_or_a_lost_quorum_fail_the_round_in_one_line():
    _, parts = s1_parts(clients=6)
    inner = Request(SUMS, {"chunk-size": 4096, "data-bounds": "", "dp-clip": 0.0,
                           "dp-client-noise": 0.0, "min-cluster-size": 2}, parts[0][:K])
    strategy = build_strategy(config(**{"dp": "distributed", "secure-aggregation": True}))
    with pytest.raises(RunFailed, match=r"^round 1: secure aggregation: participants lost at the "
                                        r"masked inputs under a threshold of all 4 of each "
                                        r"neighbourhood, still after 2 restarts: node 2: "
                                        r"dropped out$"):
        SecureSum(strategy, DropEachTry(InMemoryFederation(parts)), list(range(6)), inner,
                  ("counts", "n"), K + 1, what="round 1", verify=check(("counts", "n"))).run()
    # Restarts never go below the quorum (min-answer-fraction 0.8: 5 of 6).
    strategy = build_strategy(config(**{"dp": "distributed", "secure-aggregation": True,
                                        "min-answer-fraction": 0.8}))
    probe = Probe(InMemoryFederation(parts), drop={1: secagg.MASKED, 4: secagg.MASKED})
    with pytest.raises(RunFailed, match="secure aggregation: 4 of 6 clients left at the masked "
                                        "inputs, 5 needed"):
        SecureSum(strategy, probe, list(range(6)), inner, ("counts", "n"), K + 1,
                  what="round 1", verify=check(("counts", "n"))).run()


def test_a_set_threshold_tolerates_a_dropout_without_a_restart():
    """--secagg-threshold 0.6 is the user's: 3 of 5, so one client lost leaves the round going
    in the same try, each share sized for 3 (more noise than central's)."""
    _, parts = s1_parts(clients=5)
    probe = Probe(InMemoryFederation(parts), drop={2: secagg.MASKED})
    result = build_strategy(config(**{"dp": "distributed", "secure-aggregation": True,
                                      "secagg-threshold": 0.6, "num-server-rounds": 1})).fit(probe)
    assert result.rounds == 1
    assert len(stage_asks(probe, secagg.SETUP)) == 1
    (share,), (masked,) = stage_asks(probe, secagg.SHARE), stage_asks(probe, secagg.MASKED)
    assert {r.config["threshold"] for r in share.values()} == {3}
    z = masked[0].config["dp-noise-multiplier"]
    assert masked[0].config["dp-client-noise"] == pytest.approx(
        client_noise_scale(z, Clipping.declared(BOUNDS, 0.0, 2), 3), rel=1e-12)
    assert sorted(stage_asks(probe, secagg.UNMASK)[0]) == [0, 1, 3, 4]


def test_under_a_threshold_of_all_no_server_gets_the_total_of_fewer():
    """The default under distributed DP on the complete graph: t = m. A server that holds all
    four masked vectors and claims node 3 dropped is refused by every survivor; the shares it
    can have without node 3 (all four named survivors) are three of each seed, which rebuild
    none: neither the total of the other three nor anyone's vector can be unmasked."""
    assert secagg.graph_rule(secagg.AUTO, 4, 0.5, all_on_complete=True) == (3, 4)
    assert secagg.graph_rule(secagg.AUTO, 40, 0.5, all_on_complete=True) == \
        secagg.auto_graph(40, 0.5)  # SecAgg+: a neighbourhood's majority stays
    _, parts = s1_parts(clients=4)
    federation = InMemoryFederation(parts)
    sessions, nodes, base = federation.sessions, list(range(4)), {secagg.ID_KEY: "a"}
    keys = {n: respond(parts[n], Request(secagg.SETUP, base), {}, sessions[n], n).payload
            for n in nodes}
    shares = {n: respond(parts[n], Request(secagg.SHARE, {
        **base, "nodes": secagg.node_bytes(nodes), "threshold": 4, "neighbours": 0,
        "participants": 4, "pk1": [keys[m]["pk1"] for m in nodes],
        "pk2": [keys[m]["pk2"] for m in nodes]}), {}, sessions[n], n).payload for n in nodes}
    for n in nodes:
        sources = [m for m in nodes if m != n]
        respond(parts[n], Request(secagg.MASKED, {
            "chunk-size": 4096, "data-bounds": "", "dp-clip": 0.0, "dp-client-noise": 0.0,
            "min-cluster-size": 2, **base, secagg.INNER_KIND_KEY: SUMS,
            secagg.FIELDS_KEY: "counts", secagg.BITS_KEY: 24, "src": secagg.node_bytes(sources),
            "ct": [shares[m]["ct"][secagg.node_list(shares[m]["dst"]).index(n)] for m in sources]},
            parts[0][:K]), {}, sessions[n], n)
    seeds = {n: bytes.fromhex(secagg._load(sessions[n])["seed"]) for n in nodes}
    lying = Request(secagg.UNMASK, {**base, "survivors": secagg.node_bytes([0, 1, 2]),
                                    "dropped": secagg.node_bytes([3])})
    for n in (0, 1, 2):
        with pytest.raises(ProtocolError, match="3 survivors, fewer than the threshold 4"):
            respond(parts[n], lying, {}, sessions[n], n)
    honest = Request(secagg.UNMASK, {**base, "survivors": secagg.node_bytes(nodes),
                                     "dropped": secagg.node_bytes([])})
    got = {n: respond(parts[n], honest, {}, sessions[n], n).payload["shares"] for n in (0, 1, 2)}
    for owner in nodes:
        held = [(n, got[n][owner]) for n in (0, 1, 2)]
        with pytest.raises(ProtocolError, match="3 shares, 4 needed"):
            secagg.rebuild_secret(held, 4)
        assert secagg.combine_secret([share for _, share in held]) != seeds[owner]


def test_a_client_never_sends_both_shares_of_one_node():
    X, parts = s1_parts(clients=3)
    federation = InMemoryFederation(parts)
    session, base = federation.sessions[0], {secagg.ID_KEY: "a"}
    keys = {n: respond(parts[n], Request(secagg.SETUP, base), {}, federation.sessions[n], n).payload
            for n in range(3)}
    share = {**base, "nodes": secagg.node_bytes([0, 1, 2]), "threshold": 2, "neighbours": 0,
             "participants": 3,
             "pk1": [keys[n]["pk1"] for n in range(3)], "pk2": [keys[n]["pk2"] for n in range(3)]}
    for n in range(3):
        respond(parts[n], Request(secagg.SHARE, share), {}, federation.sessions[n], n)
    with pytest.raises(ProtocolError, match="after stage 'share', expected after 'masked'"):
        respond(parts[0], Request(secagg.UNMASK, {**base, "survivors": secagg.node_bytes([0, 1]),
                                                   "dropped": secagg.node_bytes([1, 2])}),
                {}, session, 0)
    with pytest.raises(ProtocolError, match="threshold 1 for 3 participants"):
        respond(parts[0], Request(secagg.SETUP, base), {}, session, 0)
        respond(parts[0], Request(secagg.SHARE, {**share, "pk1": [keys[n]["pk1"] for n in range(3)],
                                                 "threshold": 1}), {}, session, 0)


# -- SecAgg+: a sparse neighbour graph ---------------------------------------------------------
def test_the_neighbour_graph_is_a_symmetric_ring_of_the_asked_degree():
    nodes = [5, 17, 3, 40, 8, 11, 23, 2, 9, 31]
    for setting, degree in ((4, 4), (3, 4), (1, 2), (0, 9), (8, 8), (9, 9), (50, 9)):
        graph = secagg.neighbour_graph("a", nodes, setting)
        assert sorted(graph) == sorted(nodes) and secagg.graph_degree(setting, 10) == degree
        for node, near in graph.items():
            assert len(near) == degree and node not in near
            assert all(node in graph[other] for other in near)
    assert secagg.neighbour_graph("a", nodes, 4) != secagg.neighbour_graph("b", nodes, 4)


def stage_requests(probe: Probe, kind: str) -> dict:
    """The per-node requests of the probe's first stage of ``kind``."""
    return next(asked for asked in probe.asked
                if isinstance(asked, dict) and next(iter(asked.values())).kind == kind)


class NeighbourDrop(Probe):
    """Drops, from the masked stage on, the first ``count`` neighbours of node 0 (read from its
    share request: the graph is new each aggregation)."""

    def __init__(self, federation, count: int) -> None:
        super().__init__(federation)
        self.count = count

    def ask(self, request, node_ids, timeout):
        if isinstance(request, dict) and request[node_ids[0]].kind == secagg.SHARE:
            near = [n for n in secagg.node_list(request[0].config["nodes"]) if n != 0]
            self.drop = {n: secagg.MASKED for n in near[:self.count]}
        return super().ask(request, node_ids, timeout)


def test_secagg_plus_sums_exactly_with_ciphertexts_to_neighbours_only():
    X, parts = s1_parts(clients=10)
    centroids = X[np.random.default_rng(3).choice(len(X), K, replace=False)] + 0.5
    probe = Probe(InMemoryFederation(parts))
    strategy = build_strategy(config(**{"secure-aggregation": True, "secagg-neighbours": 4}))
    request = Request(SUMS, {"chunk-size": 4096, "data-bounds": "", "dp-clip": 0.0,
                             "dp-client-noise": 0.0, "min-cluster-size": 2}, centroids)
    total, exchange = SecureSum(strategy, probe, list(range(10)), request, ("sums", "counts", "n"),
                                K * 3 + 1, what="test", verify=check(("sums", "counts", "n"))).run()
    own = plain_sums(parts, centroids)
    expected = np.concatenate([np.sum([s.sums for s in own], 0).ravel(),
                               np.sum([s.counts for s in own], 0), [sum(s.n for s in own)]])
    assert np.all(np.abs(total - expected) <= 10 * 2.0 ** -25 + 1e-15 * np.abs(expected))
    assert np.array_equal(total[K * 2:], expected[K * 2:]) and not exchange.rejected
    shares = stage_requests(probe, secagg.SHARE)
    near = {n: set(secagg.node_list(r.config["nodes"])) - {n} for n, r in shares.items()}
    assert all(r.config["threshold"] == 3 and len(r.config["pk1"]) == 5 for r in shares.values())
    sent = {a.node: secagg.node_list(a.summary.payload["dst"]) for a in probe.seen
            if a.summary is not None and "dst" in (a.summary.payload or {})}
    assert sorted(sent) == list(range(10)) and sum(len(d) for d in sent.values()) == 10 * 4
    for node, destinations in sent.items():  # 4 ciphertexts, each to a neighbour, symmetric
        assert len(destinations) == 4 and set(destinations) == near[node]
        assert all(node in near[other] for other in destinations)
    masked = stage_requests(probe, secagg.MASKED)
    assert all(set(secagg.node_list(r.config["src"])) == near[n] for n, r in masked.items())
    seen = values_seen(probe.seen)
    for summary in own:
        assert not any(contains(v, summary.counts) for v in seen)


def test_secagg_plus_survives_dropouts_within_a_neighbourhoods_threshold():
    """Two of node 0's four neighbours drop (its neighbourhood keeps 3 = t of 5): the
    total of the others is exact; a third leaves 2 and the round fails, naming it."""
    X, parts = s1_parts(clients=10)
    centroids = X[:K] + 0.25
    strategy = build_strategy(config(**{"secure-aggregation": True, "secagg-neighbours": 4}))
    inner = Request(SUMS, {"chunk-size": 4096, "data-bounds": "", "dp-clip": 0.0,
                           "dp-client-noise": 0.0, "min-cluster-size": 2}, centroids)
    probe = NeighbourDrop(InMemoryFederation(parts), 2)
    total, exchange = SecureSum(strategy, probe, list(range(10)), inner, ("counts", "n"), K + 1,
                                what="round 1", verify=check(("counts", "n"))).run()
    gone = sorted(probe.drop)
    others = [p for i, p in enumerate(parts) if i not in gone]
    own = plain_sums(others, centroids)
    assert np.array_equal(total, np.concatenate([np.sum([s.counts for s in own], 0),
                                                 [sum(len(p) for p in others)]]))
    assert sorted(exchange.rejected) == gone and "dropped out" in exchange.rejected[gone[0]]
    near = {n: set(secagg.node_list(r.config["nodes"]))
            for n, r in stage_requests(probe, secagg.SHARE).items()}
    unmask = stage_requests(probe, secagg.UNMASK)
    assert sorted(unmask) == sorted(set(range(10)) - set(gone))
    for node, request in unmask.items():  # a survivor hears of its own neighbourhood only
        alive = set(secagg.node_list(request.config["survivors"]))
        dropped = set(secagg.node_list(request.config["dropped"]))
        assert alive | dropped == near[node] and dropped == near[node] & set(gone)
    with pytest.raises(RunFailed, match=r"2 of node \d+'s neighbourhood of 5 left at the masked "
                                        r"inputs, 3 needed"):
        SecureSum(strategy, NeighbourDrop(InMemoryFederation(parts), 3), list(range(10)), inner,
                  ("counts", "n"), K + 1, what="round 1", verify=check(("counts", "n"))).run()


def test_the_default_degree_follows_the_number_of_participants():
    """SecAgg's complete graph below 20 participants, then O(log m) neighbours with the threshold
    Bell et al.'s conditions give (5 % corrupt, 5 % dropped, 2^-40); a user-set count wins."""
    for m in (2, 5, 10, 19):
        assert secagg.graph_rule(secagg.AUTO, m, 0.5) == (m - 1, secagg.threshold_for(0.5, m))
    expected = {20: (4, 3), 50: (6, 4), 100: (12, 7), 200: (22, 12), 1000: (34, 18),
                10_000: (38, 21)}
    for m, rule in expected.items():
        assert secagg.graph_rule(secagg.AUTO, m, 0.5) == rule
    # At 20: one corrupt and one dropped client; 4 neighbours cannot be split by 2 losses, and
    # t = 3 (a majority of 5) exceeds 1 corrupt neighbour and is met by 3 survivors of 4.
    # O(log m): at most 6 ln m from 20 to 3000 participants (not monotone: floor(0.05 m) steps).
    sizes = range(20, 3000, 7)
    assert all(secagg.auto_graph(m, 0.5)[0] <= 6 * math.log(m) for m in sizes)
    # A higher secagg-threshold raises t, and the degree with it where survivors must meet it.
    assert secagg.graph_rule(secagg.AUTO, 1000, 0.8)[1] >= 0.8 * (secagg.auto_graph(1000, 0.8)[0] + 1)
    assert secagg.graph_rule(secagg.AUTO, 1000, 1.0) == (999, 1000)  # no sparse graph meets it
    for setting, m, rule in ((4, 1000, (4, 3)), (3, 1000, (4, 3)), (0, 50, (49, 26)),
                             (60, 50, (49, 26))):
        assert secagg.graph_rule(setting, m, 0.5) == rule


def test_the_default_is_sparse_above_twenty_and_sums_exactly_even_with_a_dropout():
    X, parts = s1_parts(clients=40)
    centroids = X[np.random.default_rng(4).choice(len(X), K, replace=False)] + 0.5
    strategy = build_strategy(config(**{"secure-aggregation": True}))
    assert strategy.options.secagg_neighbours == secagg.AUTO
    inner = Request(SUMS, {"chunk-size": 4096, "data-bounds": "", "dp-clip": 0.0,
                           "dp-client-noise": 0.0, "min-cluster-size": 2}, centroids)
    fields = ("sums", "counts", "n")
    degree, threshold = secagg.auto_graph(40, 0.5)
    assert degree < 39
    for drop in (0, 1):
        probe = NeighbourDrop(InMemoryFederation(parts), drop)
        total, exchange = SecureSum(strategy, probe, list(range(40)), inner, fields, K * 3 + 1,
                                    what="test", verify=check(fields)).run()
        others = [p for i, p in enumerate(parts) if i not in probe.drop]
        own = plain_sums(others, centroids)
        expected = np.concatenate([np.sum([s.sums for s in own], 0).ravel(),
                                   np.sum([s.counts for s in own], 0), [sum(s.n for s in own)]])
        assert np.all(np.abs(total - expected) <= 40 * 2.0 ** -25 + 1e-15 * np.abs(expected))
        assert np.array_equal(total[K * 2:], expected[K * 2:])
        assert sorted(exchange.rejected) == sorted(probe.drop) and len(probe.drop) == drop
        shares = stage_requests(probe, secagg.SHARE)
        assert all(r.config["neighbours"] == degree and r.config["threshold"] == threshold
                   and len(r.config["pk1"]) == degree + 1 for r in shares.values())


def test_a_user_set_degree_wins_and_one_below_the_default_is_logged(flwr_log):
    X, parts = s1_parts(clients=40)
    inner = Request(SUMS, {"chunk-size": 4096, "data-bounds": "", "dp-clip": 0.0,
                           "dp-client-noise": 0.0, "min-cluster-size": 2}, X[:K] + 0.25)
    strategy = build_strategy(config(**{"secure-aggregation": True, "secagg-neighbours": 2}))
    probe = Probe(InMemoryFederation(parts))
    SecureSum(strategy, probe, list(range(40)), inner, ("counts", "n"), K + 1, what="round 1",
              verify=check(("counts", "n"))).run()
    assert all(r.config["neighbours"] == 2 and r.config["threshold"] == 2
               for r in stage_requests(probe, secagg.SHARE).values())
    lines = [r.getMessage() for r in flwr_log]
    assert "round 1: secure aggregation among 40 participants: 2 neighbours each (SecAgg+), " \
           "threshold 2" in lines
    degree = secagg.auto_graph(40, 0.5)[0]
    assert any(line.startswith(f"round 1: secagg-neighbours 2 is below the {degree} neighbours "
                               "that 40 participants need for 5 % corrupt") for line in lines)


def test_a_client_refuses_a_neighbourhood_or_threshold_it_cannot_accept():
    X, parts = s1_parts(clients=10)
    federation = InMemoryFederation(parts)
    session, base = federation.sessions[0], {secagg.ID_KEY: "a"}
    keys = {n: respond(parts[n], Request(secagg.SETUP, base), {}, federation.sessions[n], n).payload
            for n in range(10)}
    keys[0] = respond(parts[0], Request(secagg.SETUP, base), {}, session, 0).payload

    def share(hood, **changes):
        config_ = {**base, "nodes": secagg.node_bytes(hood), "threshold": 3, "neighbours": 4,
                   "participants": 10, "pk1": [keys[n]["pk1"] for n in hood],
                   "pk2": [keys[n]["pk2"] for n in hood], **changes}
        return respond(parts[0], Request(secagg.SHARE, config_), {}, session, 0)

    for hood, changes, message in (
            ([0, 1, 2, 8, 9], {"threshold": 2}, "threshold 2 for 5 participants; this client "
                                                "needs between 3 and 5"),
            ([0, 1, 2, 3, 8, 9], {}, "5 neighbours, but secagg-neighbours 4 among 10 "
                                     "participants gives 4"),
            ([0, 1, 2, 8, 9], {"participants": 3}, "4 neighbours, but secagg-neighbours 4 among 3"),
            ([0, 1, 2, 8], {"neighbours": 0}, "3 neighbours, but secagg-neighbours 0 among 10 "
                                              "participants gives 9"),
            ([1, 2, 3, 8, 9], {}, "leaves this node out"),
            ([0, 1, 1, 8, 9], {}, "inconsistent")):
        with pytest.raises(ProtocolError, match=message):
            share(hood, **changes)
    reply = share([0, 1, 2, 8, 9])
    assert secagg.node_list(reply.payload["dst"]) == [1, 2, 8, 9] and len(reply.payload["ct"]) == 4
    # Key shares forwarded from a client outside the neighbourhood are refused.
    with pytest.raises(ProtocolError, match="forwarded key shares do not match the participants"):
        respond(parts[0], Request(secagg.MASKED, {**base, "src": secagg.node_bytes([1, 2, 5]),
                                                  "ct": [b"x", b"y", b"z"]}), {}, session, 0)


@pytest.mark.parametrize(("algorithm", "rtol", "neighbours"),
                         [("dwf", 1e-9, 0), ("ffcm-avg1", 1e-7, 0), ("dwf", 1e-9, 2)])
def test_secure_aggregation_over_flower_messages_equals_the_plain_run(tmp_path, algorithm, rtol,
                                                                      neighbours):
    """The ClientApp keeps its state between stages in Flower's context; node ids are uint64.

    ``neighbours`` 2 of the 4 clients: SecAgg+ on a ring, the requests per client.

    dwf's counts are whole, so only its sums are rounded; ffcm-avg1's supports
    are rounded too, which moves a centre by up to m 2^-25 (1 + |c|) / W a
    round (:func:`test_secure_ffcm_avg1_is_the_plain_one_within_the_fixed_point_precision`).
    """
    X, parts = s1_parts(clients=4)
    start = tmp_path / "start.npy"
    np.save(start, X[np.random.default_rng(5).choice(len(X), K, replace=False)] + 0.5)
    common = {"algorithm": algorithm, "init": str(start), "num-server-rounds": 4, "tol": 0.0}
    probe = Probe(FlowerFederation(InProcessGrid(build_client_app(),
                                                 save_parts(tmp_path / "parts", parts))))
    secure = build_strategy(config(**common, **{"secure-aggregation": True,
                                                "secagg-neighbours": neighbours})).fit(probe)
    plain = build_strategy(config(**common)).fit(InMemoryFederation(parts))
    np.testing.assert_allclose(secure.centroids, plain.centroids, rtol=rtol, atol=1e-5)
    assert math.isclose(secure.score, plain.score, rel_tol=rtol)
    assert np.array_equal(secure.counts, plain.counts)
    assert all(a.summary.n == 0 for a in probe.seen if a.summary is not None)
    hoods = {len(r.config["pk1"]) for asked in probe.asked if isinstance(asked, dict)
             for r in asked.values() if r.kind == secagg.SHARE}
    assert hoods == {neighbours + 1 if neighbours else len(parts)}


@pytest.mark.parametrize("algorithm", ["dwf", "ffcm-avg1"])
def test_secure_aggregation_unmasks_no_cluster_of_one_client_row(tmp_path, algorithm):
    """The server's attack: a start with one centroid beside a row that only one client holds.

    Without DP the masked sums obey the floor per cluster: that client withholds
    its one-row cluster (sums and count 0), so the totals the server unmasks
    hold no cluster of fewer than p rows and the released centroid stays where
    it was (before, the unmasked total of that cluster was the row itself, in
    the model). The secure run still equals the plain one, which withholds alike.
    """
    X, parts = s1_parts(clients=4)
    lonely = np.array([[2.0e6, 2.0e6]])
    parts[2] = np.vstack([parts[2], lonely])
    rng = np.random.default_rng(5)
    start = np.vstack([X[rng.choice(len(X), K - 1, replace=False)] + 0.5, lonely + 1.0e3])
    np.save(tmp_path / "start.npy", start)
    common = {"algorithm": algorithm, "init": str(tmp_path / "start.npy"), "tol": 0.0,
              "num-server-rounds": 1, "data-bounds": ""}
    probe = Probe(FlowerFederation(InProcessGrid(build_client_app(),
                                                 save_parts(tmp_path / "parts", parts))))
    strategy = build_strategy(config(**common, **{"secure-aggregation": True}))
    secure = strategy.fit(probe)
    totals = strategy.private.last_counts
    assert totals[-1] == 0 and not np.any((totals > 0) & (totals < 2))
    np.testing.assert_array_equal(secure.centroids[-1], start[-1])
    plain = build_strategy(config(**common)).fit(InMemoryFederation(parts))
    np.testing.assert_allclose(secure.centroids, plain.centroids, rtol=1e-7, atol=1e-5)


def test_secure_ffcm_avg1_is_the_plain_one_within_the_fixed_point_precision(tmp_path):
    """One round: each total is within m 2^-(f+1) of the exact one, supports included.

    A centre ``S / W`` then moves by at most ``m 2^-(f+1) (1 + |c|) / W`` per
    coordinate (float rounding aside); over rounds the runs stay together.
    """
    X, parts = s1_parts(clients=4)
    start = tmp_path / "start.npy"
    np.save(start, X[np.random.default_rng(5).choice(len(X), K, replace=False)] + 0.5)
    common = {"algorithm": "ffcm-avg1", "init": str(start), "tol": 0.0}
    secure_strategy = build_strategy(config(**common, **{"secure-aggregation": True,
                                                        "num-server-rounds": 1}))
    secure = secure_strategy.fit(InMemoryFederation(parts))
    plain = build_strategy(config(**common, **{"num-server-rounds": 1})).fit(
        InMemoryFederation(parts))
    supports = secure_strategy.private.last_counts
    bound = len(parts) * 2.0 ** -25 * (1 + np.abs(plain.centroids)) / supports[:, None]
    error = np.abs(secure.centroids - plain.centroids)
    assert np.all(error <= bound + 1e-12 * np.abs(plain.centroids))
    assert np.any(supports != np.floor(supports))  # fuzzy supports, not row counts
    secure = build_strategy(config(**common, **{"secure-aggregation": True,
                                               "num-server-rounds": 4})).fit(
        InMemoryFederation(parts))
    plain = build_strategy(config(**common, **{"num-server-rounds": 4})).fit(
        InMemoryFederation(parts))
    np.testing.assert_allclose(secure.centroids, plain.centroids, rtol=1e-7)
    assert np.array_equal(secure.counts, plain.counts)  # the final score's crisp counts, exact


def test_one_row_moves_the_fuzzy_sums_no_more_than_the_sensitivity():
    """The DP bound of ffcm-avg1's sum form: (sums, w supports) move by at most Delta per row."""
    rng = np.random.default_rng(4)
    X = np.vstack([rng.uniform(-0.5, 1.5, (200, 3)), [[0.5, 0.5, 0.5]], [[9.0, -9.0, 9.0]]])
    centres = rng.uniform(0, 1, (6, 3))
    config_ = {"chunk-size": 64, "data-bounds": "0:1", "dp-clip": 0.0, "dp-client-noise": 0.0,
               "min-cluster-size": 2, "fuzzifier": 1.2}
    clipping = Clipping.declared("0:1", 0.0, 3)
    full = respond(X, Request(FUZZY_SUMS, config_, centres), {})
    assert np.all(full.counts != np.floor(full.counts)) and full.counts.sum() <= len(X)
    for row in (0, 200, 201):  # an inner row, one on the box's centre, one far outside it
        less = respond(np.delete(X, row, axis=0), Request(FUZZY_SUMS, config_, centres), {})
        change = np.concatenate([(full.sums - less.sums).ravel(),
                                 clipping.count_weight * (full.counts - less.counts)])
        assert np.linalg.norm(change) <= clipping.sensitivity * (1 + 1e-12)


# -- differential privacy ------------------------------------------------------------------
def analytic_epsilon(z: float, rounds: int, delta: float) -> float:
    """T Gaussian mechanisms of multiplier z are one of z / sqrt(T) (Balle & Wang 2018, Thm 8)."""
    mu = math.sqrt(rounds) / z

    def delta_of(eps):
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)

    return brentq(lambda eps: delta_of(eps) - delta, 0.0, 100.0)


@pytest.mark.parametrize(("z", "rounds"), [(2.0, 10), (5.0, 1), (1.0, 3)])
def test_the_accountant_matches_the_composition_of_gaussian_mechanisms(z, rounds):
    assert epsilon_spent(z, rounds, 1e-5) == pytest.approx(analytic_epsilon(z, rounds, 1e-5), abs=1e-4)
    assert epsilon_spent(z, rounds, 1e-5) >= analytic_epsilon(z, rounds, 1e-5) - 1e-9


def test_calibration_spends_the_budget_over_the_rounds():
    z = calibrate(1.0, 1e-5, 20)
    assert 0.999 <= epsilon_spent(z, 20, 1e-5) <= 1.0
    assert epsilon_spent(z * 0.99, 20, 1e-5) > 1.0


def test_the_budget_stops_a_run_cleanly_and_the_model_file_records_it(tmp_path):
    _, parts = s1_parts()
    z = 3.0  # epsilon after 1, 2, 3 rounds: about 1.6, 2.3, 2.9
    budget = epsilon_spent(z, 2, 1e-5) + 0.01
    result = build_strategy(config(**{"dp": "central", "secure-aggregation": True,
                                      "dp-epsilon": budget,
                                      "dp-noise-multiplier": z, "num-server-rounds": 10,
                                      "tol": 0.0})).fit(InMemoryFederation(parts))
    assert result.rounds == 2 and not result.converged
    assert "privacy budget spent: 2 round(s) used epsilon" in result.stop_reason
    spent = [r.epsilon for r in result.history]
    assert spent == pytest.approx([epsilon_spent(z, 1, 1e-5), epsilon_spent(z, 2, 1e-5)])
    assert math.isnan(result.score) and all(math.isnan(r.score) for r in result.history)
    read = read_model(write_run(result, tmp_path)["model"])
    assert read.stop_reason == result.stop_reason
    assert [r.epsilon for r in read.history] == spent
    assert "epsilon" in (tmp_path / "history.csv").read_text().splitlines()[0]


def test_dp_with_no_noise_is_the_plain_step_of_dwf_fedkmeans_and_ffcm_avg1(tmp_path, monkeypatch):
    """ffcm-avg1 starts where no client has a crisp cluster of one row: the plain client
    would withhold that centre (the floor), the sum form does not. DP runs over secure
    aggregation, so the totals are the plain ones within the fixed-point precision (fuzzy
    supports are rounded too: rtol 1e-7 for ffcm-avg1, as over Flower messages). The
    server's noise is left out, not the request's multiplier: the clients would refuse a
    request of multiplier 0."""
    monkeypatch.setattr("fedcluster.strategies.private.add_noise", lambda sums, counts, *_: (sums, counts))
    X, parts = s1_parts()
    for algorithm, extra, seed, rtol in (("dwf", {"lr": 0.7, "momentum": 0.2}, 1, 1e-9),
                                         ("fedkmeans", {"client-lr": 0.5, "reseed-fraction": 0.0},
                                          1, 1e-9),
                                         ("ffcm-avg1", {"fuzzifier": 1.5}, 5, 1e-7)):
        start = tmp_path / f"start-{seed}.npy"
        np.save(start, X[np.random.default_rng(seed).choice(len(X), K, replace=False)] + 0.5)
        common = {"algorithm": algorithm, "init": str(start), "num-server-rounds": 5, "tol": 0.0,
                  **extra}
        private = build_strategy(config(**common, **{"dp": "central", "secure-aggregation": True}))
        dp = private.fit(InMemoryFederation(parts))
        plain = build_strategy(config(**common)).fit(InMemoryFederation(parts))
        np.testing.assert_allclose(dp.centroids, plain.centroids, rtol=rtol, atol=1e-6)


@pytest.mark.parametrize(("algorithm", "dp"), [("dwf", "central"), ("dwf", "distributed"),
                                              ("ffcm-avg1", "central")])
def test_dp_noise_is_fresh_in_every_run_while_a_run_without_noise_repeats(algorithm, dp):
    _, parts = s1_parts(clients=4)
    settings = {"algorithm": algorithm, "secure-aggregation": True, "num-server-rounds": 3}
    a, b = (build_strategy(config(**settings, **{"dp": dp, "dp-epsilon": 1.0})
                           ).fit(InMemoryFederation(parts)) for _ in range(2))
    assert not np.array_equal(a.centroids, b.centroids) and not np.array_equal(a.counts, b.counts)
    assert a.rounds == 3 and a.history[-1].epsilon == pytest.approx(1.0, abs=1e-3)
    plain = [build_strategy(config(**settings)).fit(InMemoryFederation(parts)) for _ in range(2)]
    assert np.array_equal(plain[0].centroids, plain[1].centroids)


def test_the_seed_in_the_model_file_does_not_give_the_central_noise_away(tmp_path):
    """The attack on the old noise: it came from default_rng([seed, 0xD9]), whose seed the
    model file records. Regenerate that noise, subtract it from the released noisy counts:
    what is left differs from the true counts by noise of the calibrated size, not by 0."""
    X, parts = s1_parts()
    start = tmp_path / "start.npy"
    np.save(start, X[np.random.default_rng(3).choice(len(X), K, replace=False)])
    result = build_strategy(config(**{"dp": "central", "secure-aggregation": True,
                                      "init": str(start), "num-server-rounds": 1, "tol": 0.0})
                            ).fit(InMemoryFederation(parts))
    model = read_model(write_run(result, tmp_path)["model"])
    seed, epsilon, delta = (model.settings[key] for key in ("seed", "dp-epsilon", "dp-delta"))
    clipping = Clipping.declared(model.settings["data-bounds"], model.settings["dp-clip"], 2)
    sigma = calibrate(epsilon, delta, 1) * clipping.sensitivity
    rng = np.random.default_rng([seed, 0xD9])
    rng.normal(0.0, sigma, size=(K, 2))  # the old noise of the sums came first
    regenerated = rng.normal(0.0, sigma / clipping.count_weight, size=K)
    true_counts = np.bincount(np.argmin(((X[:, None] - np.load(start)[None]) ** 2).sum(-1), axis=1),
                              minlength=K)
    assert np.all(true_counts > 20) and np.all(model.counts > 0)  # no count clipped at 0
    residual = model.counts - regenerated - true_counts
    spread = sigma / clipping.count_weight  # the released noise minus an independent draw
    assert np.sqrt(np.mean(residual ** 2)) > 0.4 * spread and np.abs(residual).max() > 1


def test_the_noise_has_the_calibrated_spread_and_lies_on_the_fixed_point_grid():
    sigma, weight, bits = 3.0, 0.25, 24
    sums, counts = add_noise(np.zeros((10_000, 2)), np.zeros(20_000), sigma, weight, bits)
    assert np.std(sums) == pytest.approx(sigma, rel=0.03)
    assert np.std(counts) == pytest.approx(sigma / weight, rel=0.03)
    for noisy in (sums, counts):
        assert np.array_equal(noisy * 2.0 ** bits, np.round(noisy * 2.0 ** bits))
    # Whatever the input, the output is on the grid: a client's share is a fixed-point number.
    shifted, _ = add_noise(np.full((4, 2), 0.1), np.zeros(4), 1e-3, 1.0, 8)
    assert np.array_equal(shifted * 256, np.round(shifted * 256))


@pytest.mark.parametrize("algorithm", ["dwf", "ffcm-avg1"])
def test_distributed_dp_runs_under_secure_aggregation(algorithm):
    _, parts = s1_parts(clients=4)
    result = build_strategy(config(**{"algorithm": algorithm, "dp": "distributed",
                                      "secure-aggregation": True, "num-server-rounds": 3,
                                      "dp-epsilon": 2.0})
                            ).fit(InMemoryFederation(parts))
    assert result.rounds == 3 and math.isnan(result.score)
    assert result.history[-1].epsilon == pytest.approx(2.0, abs=2e-3)
    low, high = parse_bounds(BOUNDS)
    assert np.all(result.centroids >= low) and np.all(result.centroids <= high)


def test_clipping_bounds_a_rows_contribution():
    clipping = Clipping.declared("0,0:4,2", 0.0, 2)
    assert clipping.radius == pytest.approx(math.hypot(2, 1))
    rows = clipping.clip(np.array([[100.0, -50.0], [2.0, 1.0], [3.0, 1.5]]))
    assert np.all(np.linalg.norm(rows, axis=1) <= clipping.radius + 1e-12)
    assert np.allclose(rows[1], 0.0) and np.allclose(rows[0], [2.0, -1.0])
    assert clipping.sensitivity == pytest.approx(math.hypot(clipping.radius, clipping.count_weight))
    # Noisy counts below 1 keep the current centroid; the others are projected into the box.
    new = centroids_from_totals(np.array([[10.0, 0.0], [1.0, 1.0]]), np.array([2.0, 0.4]),
                                np.array([[1.0, 1.0], [3.0, 1.0]]), clipping)
    assert np.allclose(new, [[4.0, 1.0], [3.0, 1.0]])


@pytest.mark.parametrize("algorithm", ["fkm", "feca", "mavg", "kfed", "ffcm-avg2"])
def test_methods_that_need_each_clients_centroids_refuse_the_options(algorithm):
    from fedcluster.methods import METHODS, SUM_FORMS

    # The methods whose declaration names a sum form (Method.sum_form), named in the refusal.
    assert algorithm not in SUM_FORMS and "fedkmeans" in SUM_FORMS
    for settings in ({"dp": "central"}, {"secure-aggregation": True}):
        refusal = (f"not available for {algorithm}: its server needs each client's own "
                   f"centroids, .* use one of {', '.join(SUM_FORMS)}$")
        with pytest.raises(ConfigError, match=refusal):
            RunConfig.from_mapping({"algorithm": algorithm, "init": "random",
                                    "data-bounds": BOUNDS, **settings})
        # A strategy built in Python checks its settings the same way.
        with pytest.raises(ConfigError, match=refusal):
            METHODS[algorithm].strategy(algorithm=algorithm, data_bounds=BOUNDS,
                                        **{key.replace("-", "_"): value for key, value in settings.items()})


@pytest.mark.parametrize(("settings", "message"), [
    ({"dp": "central", "init": "local-kmeans"}, "init = local-kmeans sends each client's local"),
    ({"secure-aggregation": True, "data-bounds": ""}, "needs data-bounds"),
    ({"dp": "central", "data-bounds": "5:1"}, "every low value must be below its high value"),
    ({"dp": "distributed"}, "dp = distributed needs secure-aggregation = true"),
    # Without masks a client's sum over a cluster of one row would be that row.
    ({"dp": "central"}, "dp = central needs secure-aggregation = true: .* would be that row"),
    ({"dp": "central", "local-steps": 3}, "needs local-steps = 1"),
    ({"dp": "central", "n-init": 2}, "needs n-init = 1"),
    ({"secure-aggregation": True, "aggregation": "median"}, "needs aggregation = mean"),
    ({"dp-epsilon": 0.0}, "invalid value for 'dp-epsilon': 0.0"),
])
def test_invalid_privacy_settings_are_refused_with_the_reason(settings, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig.from_mapping({"init": "random", "data-bounds": BOUNDS, **settings})


def privacy_benchmark():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "privacy.py"
    spec = importlib.util.spec_from_file_location("privacy_benchmark", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_central_dp_lloyd_is_at_least_as_good_as_diffprivlib_at_epsilon_1():
    """The reference: diffprivlib's KMeans (central DP) at the same epsilon and bounds (S1, 3 seeds)."""
    bench = privacy_benchmark()
    X, parts = s1_parts(clients=10)
    ours = np.mean([bench.score(X, bench.fedcluster_run(parts, K, BOUNDS, 1.0, s, 5, "central"))
                    for s in range(3)])
    KMeans = bench._diffprivlib_kmeans()
    theirs = np.mean([bench.score(X, KMeans(n_clusters=K, epsilon=1.0, bounds=(0.0, 1e6),
                                            random_state=s).fit(X).cluster_centers_)
                      for s in range(3)])
    assert ours <= 1.1 * theirs, (ours, theirs)


def test_privacy_benchmark_saves_every_seed_and_prints_the_table_again(tmp_path, capsys):
    """``--json`` keeps each seed's ratio; ``--table`` prints the same rows from the file."""
    bench = privacy_benchmark()
    out = tmp_path / "{data}.json"
    bench.main(["--datasets", "g2-2-30", "--splits", "iid", "--epsilons", "1,inf", "--seeds", "2",
                "--distributed-datasets", "g2-2-30", "--distributed-seeds", "1",
                "--json", str(out)])
    ran = capsys.readouterr().out
    # It silences logging while it runs, not for the tests that follow (they read the logs).
    assert logging.root.manager.disable == logging.NOTSET
    saved = json.loads((tmp_path / "g2-2-30.json").read_text())
    assert saved["meta"]["k"] == 2 and saved["meta"]["bounds"] == "0:1100"
    assert [row["epsilon"] for row in saved["rows"]] == ["1", "inf"]
    assert [len(saved["rows"][0][key]) for key in ("central", "distributed", "reference")] == [2, 1, 2]
    assert saved["rows"][1]["distributed"] == []
    assert all(np.isfinite(v) and v >= 1 - 1e-9 for row in saved["rows"]
               for key in ("central", "distributed", "reference") for v in row[key])
    bench.main(["--table", str(tmp_path / "*.json")])
    table = capsys.readouterr().out
    rows = [line for line in ran.splitlines() if line.startswith("| g2-2-30 | iid |")]
    assert len(rows) == 2 and rows == [line for line in table.splitlines()
                                       if line.startswith("| g2-2-30 | iid |")]


def test_saved_privacy_results_render_to_a_table(capsys):
    """The committed runs behind BENCHMARKS.md's DP table are readable by ``--table``."""
    from pathlib import Path

    saved = sorted((Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "privacy")
                   .glob("*.json"))
    if not saved:
        pytest.skip("no saved privacy results")
    privacy_benchmark().main(["--table", *map(str, saved)])
    table = capsys.readouterr().out
    assert "nan" not in table.lower()
    assert sum(line.startswith("| ") for line in table.splitlines()) > len(saved)


# -- a data owner's own floor ---------------------------------------------------------------------
def test_a_data_owner_refuses_a_run_beyond_its_floor_over_flower_messages(tmp_path):
    """Node 0 accepts epsilon 0.5 at most, node 1 only distributed DP: both refuse a central
    run of epsilon 1 with their reason; the other three go on (the threshold of 5 is 3)."""
    _, parts = s1_parts(clients=5)
    nodes = save_parts(tmp_path / "parts", parts)
    nodes[0]["dp-max-epsilon"] = 0.5
    nodes[1]["dp-require"] = "distributed"
    probe = Probe(FlowerFederation(InProcessGrid(build_client_app(), nodes)))
    result = build_strategy(config(**{"dp": "central", "secure-aggregation": True,
                                      "dp-epsilon": 1.0, "num-server-rounds": 2, "tol": 0.0})
                            ).fit(probe)
    assert result.rounds == 2 and result.history[-1].clients_answered == 3
    errors = {a.error for a in probe.seen if a.error}
    assert any("dp-epsilon 1 is above this client's floor: node config dp-max-epsilon = 0.5" in e
               for e in errors)
    assert any("this client answers only dp = distributed (node config dp-require = "
               "distributed); this request has dp = central" in e for e in errors)


def test_a_client_that_requires_dp_refuses_a_request_without_it():
    _, parts = s1_parts(clients=2)
    request = Request(SUMS, {"data-bounds": "", "dp-clip": 0.0, "dp-client-noise": 0.0,
                             "chunk-size": 4096, "device": "cpu"}, np.zeros((K, 2)))
    with pytest.raises(ProtocolError, match="answers only requests under differential privacy "
                                            r"\(node config dp-require = any\); this one has dp = off"):
        respond(parts[0], request, {"dp-require": "any"})


def masked_request(parts, inner_config: dict, threshold: int = 2) -> tuple:
    """Three clients through setup and share (``threshold``); node 0's masked request of
    ``inner_config``."""
    federation = InMemoryFederation(parts)
    base = {secagg.ID_KEY: "a"}
    keys = {n: respond(parts[n], Request(secagg.SETUP, base), {}, federation.sessions[n], n).payload
            for n in range(3)}
    shares = {n: respond(parts[n], Request(secagg.SHARE, {
        **base, "nodes": secagg.node_bytes([0, 1, 2]), "threshold": threshold, "neighbours": 0,
        "participants": 3, "pk1": [keys[m]["pk1"] for m in range(3)],
        "pk2": [keys[m]["pk2"] for m in range(3)]}), {}, federation.sessions[n], n).payload
        for n in range(3)}
    sources = [1, 2]
    cts = [shares[n]["ct"][secagg.node_list(shares[n]["dst"]).index(0)] for n in sources]
    request = Request(secagg.MASKED, {
        **inner_config, **base, secagg.INNER_KIND_KEY: SUMS, secagg.FIELDS_KEY: "sums,counts",
        secagg.BITS_KEY: 24, "src": secagg.node_bytes(sources), "ct": cts}, np.full((K, 2), 5e5))
    return request, federation.sessions[0]


def test_a_client_never_sends_a_distributed_share_with_less_noise_than_its_own():
    """Its own share is z Delta / sqrt(t), t the threshold it accepted at the share stage (2, then 3):
    noise 0, or a hair below, is refused naming both; exactly its own is answered. The same
    request outside secure aggregation is refused whatever its noise."""
    _, parts = s1_parts(clients=3)
    z = calibrate(1.0, 1e-5, 3)
    own = z * Clipping.declared(BOUNDS, 0.0, 2).sensitivity / math.sqrt(2)
    inner = {"data-bounds": BOUNDS, "dp-clip": 0.0, "chunk-size": 4096, "device": "cpu",
             "min-cluster-size": 2, "dp": "distributed", "dp-epsilon": 1.0, "dp-delta": 1e-5,
             "dp-noise-multiplier": z, "dp-rounds": 3}
    for noise in (0.0, own * (1 - 1e-9)):
        request, session = masked_request(parts, {**inner, "dp-client-noise": noise})
        with pytest.raises(ProtocolError, match=re.escape(f"dp-client-noise {noise:g} is below "
                                                          f"this client's own share {own:g}")):
            respond(parts[0], request, {}, session, 0)
    request, session = masked_request(parts, {**inner, "dp-client-noise": own})
    assert "masked" in respond(parts[0], request, {}, session, 0).payload
    # The threshold of all three (distributed DP's default): accepted, its share z Delta / sqrt(3).
    all_three = client_noise_scale(z, Clipping.declared(BOUNDS, 0.0, 2), 3)
    assert all_three == pytest.approx(own * math.sqrt(2 / 3), rel=1e-12)
    request, session = masked_request(parts, {**inner, "dp-client-noise": all_three * (1 - 1e-9)}, 3)
    with pytest.raises(ProtocolError, match=r"below this client's own share .* / sqrt\(threshold 3\)"):
        respond(parts[0], request, {}, session, 0)
    request, session = masked_request(parts, {**inner, "dp-client-noise": all_three}, 3)
    assert "masked" in respond(parts[0], request, {}, session, 0).payload
    # Too few rounds for the multiplier's epsilon, or a floor above the request's: refused.
    request, session = masked_request(parts, {**inner, "dp-client-noise": own, "dp-rounds": 30})
    with pytest.raises(ProtocolError, match="over 30 round"):
        respond(parts[0], request, {}, session, 0)
    request, session = masked_request(parts, {**inner, "dp-client-noise": own})
    with pytest.raises(ProtocolError, match="below this client's floor: node config "
                                            "dp-min-noise-multiplier = 10"):
        respond(parts[0], request, {"dp-min-noise-multiplier": 10}, session, 0)
    with pytest.raises(ProtocolError, match="sends its sums only masked"):
        respond(parts[0], Request(SUMS, {**inner, "dp-client-noise": own}, np.full((K, 2), 5e5)), {})


def test_the_estimator_refuses_a_delta_of_a_row_or_more_before_it_starts():
    from fedcluster.estimator import FederatedKMeans

    parts = [np.random.default_rng(i).random((150, 2)) for i in range(2)]
    model = FederatedKMeans(n_clusters=2, dp="central", secure_aggregation=True, data_bounds="0:1",
                            init="random", dp_delta=0.005)
    with pytest.raises(ConfigError, match=re.escape("dp-delta 0.005 is not below 1 / rows = "
                                                    "0.00333 (300 rows in all)")):
        model.fit(parts)
