"""Checkpoints in memory: a run interrupted and resumed gives the uninterrupted run's result.

Every method runs over :class:`~fedcluster.client.memory.InMemoryFederation`
three times: uninterrupted; interrupted right after a given checkpoint was
written (the checkpoint function raises); and resumed, by a new strategy,
from the ``checkpoint.json`` the interrupted run left. The resumed result
must equal the uninterrupted one bit for bit, history included. Damaged
checkpoints and checkpoints of other settings are refused by name.
"""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

import fedcluster
from fedcluster.config import RunConfig
from fedcluster.client.memory import InMemoryFederation
from fedcluster.config import build_strategy
from fedcluster.methods import METHODS
from fedcluster.server.checkpoint import (CHECKPOINT_FILE, CheckpointError, CheckpointWriter,
                                          read_checkpoint, resume_point)


class Interrupted(Exception):
    """The coordinator 'died' right after a checkpoint was written."""


def parts_of(s1, n=4, seed=0):
    order = np.random.default_rng(seed).permutation(len(s1))
    return [s1[np.sort(chunk)] for chunk in np.array_split(order, n)]


def config_of(algorithm, **settings) -> RunConfig:
    base = {"algorithm": algorithm, "k": 15, "seed": 7, "num-server-rounds": 6, "tol": 0.0}
    if algorithm in ("dwf", "ewf", "fedkmeans"):  # momentum: state carried from round to round
        base["momentum"] = 0.3
    if algorithm == "fedkmeans":  # small batches: several rounds of real change, re-seeding
        base.update({"batch-size": 64, "reseed-patience": 2, "reseed-fraction": 0.05})
    return RunConfig.from_mapping({**base, **settings})


def run(config, parts, *, out=None, stop_after=None, resume=False):
    """One run over ``parts``; checkpoints into ``out``; raise Interrupted after the
    ``stop_after``-th checkpoint (1-based); with ``resume`` continue from ``out``."""
    strategy = build_strategy(config)
    writes = []
    if out is None:
        writer = None
    else:
        inner = CheckpointWriter(out, strategy.settings, config.to_flower())

        def writer(progress):
            inner(progress)
            writes.append((progress.restart, progress.round))
            if stop_after is not None and len(writes) == stop_after:
                raise Interrupted(writes[-1])

    point = resume_point(out, strategy, config.to_flower()) if resume else None
    return strategy.fit(InMemoryFederation(parts), resume=point, checkpoint=writer), writes


def assert_same_result(resumed, whole):
    np.testing.assert_array_equal(resumed.centroids, whole.centroids)
    np.testing.assert_array_equal(resumed.counts, whole.counts)
    assert resumed.score == whole.score or (math.isnan(resumed.score) and math.isnan(whole.score))
    assert (resumed.rounds, resumed.converged, resumed.best_restart) == \
        (whole.rounds, whole.converged, whole.best_restart)
    assert (resumed.settings, resumed.stop_reason) == (whole.settings, whole.stop_reason)
    assert len(resumed.history) == len(whole.history)
    for mine, theirs in zip(resumed.history, whole.history):
        assert (mine.restart, mine.round, mine.phase, mine.participants) == \
            (theirs.restart, theirs.round, theirs.phase, theirs.participants)
        for name in ("movement", "score", "epsilon"):
            a, b = getattr(mine, name), getattr(theirs, name)
            assert a == b or (math.isnan(a) and math.isnan(b)), (mine, theirs)


def interrupted_and_resumed(config, parts, tmp_path, stop_after):
    whole, writes = run(config, parts, out=tmp_path / "whole")
    assert stop_after < len(writes), writes
    with pytest.raises(Interrupted):
        run(config, parts, out=tmp_path / "cut", stop_after=stop_after)
    resumed, _ = run(config, parts, out=tmp_path / "cut", resume=True)
    return whole, resumed, writes


#: deepfeca trains a network on images: its own tests are below (digits, not S1).
RESUMABLE = sorted(set(METHODS) - {"deepfeca"})


@pytest.mark.parametrize("algorithm", RESUMABLE)
def test_resumed_run_equals_the_uninterrupted_run(algorithm, s1, tmp_path):
    """Every method: stop after round 3 of 6 (one-shot: after its round), resume, compare."""
    config = config_of(algorithm)
    parts = parts_of(s1)
    whole, writes = run(config, parts, out=tmp_path / "whole")
    # The checkpoint after round 3 (round-based) or after the one round (one-shot).
    cut = writes.index((0, 3)) + 1 if (0, 3) in writes else writes.index((0, 1)) + 1
    with pytest.raises(Interrupted):
        run(config, parts, out=tmp_path / "cut", stop_after=cut)
    _, progress = read_checkpoint(tmp_path / "cut")
    assert (progress.restart, progress.round) == writes[cut - 1]
    resumed, more = run(config, parts, out=tmp_path / "cut", resume=True)
    assert_same_result(resumed, whole)
    assert more == writes[cut:]  # it went on from there, repeating no round
    # The final checkpoint says the run is over: the restart after the last.
    _, final = read_checkpoint(tmp_path / "cut")
    assert (final.restart, final.round) == (1, None)
    np.testing.assert_array_equal(final.best.centroids, whole.centroids)


@pytest.mark.parametrize("algorithm", ["dwf", "fedkmeans", "ffcm-avg2", "fkm"])
def test_sampled_rounds_draw_the_same_clients_after_a_resume(algorithm, s1, tmp_path):
    """With 2 of 5 clients per round the resumed run samples the same clients (the generator's
    state is in the checkpoint) and ends with the same centroids."""
    config = config_of(algorithm, **{"clients-per-round": 2})
    whole, resumed, _ = interrupted_and_resumed(config, parts_of(s1, 5), tmp_path, stop_after=3)
    assert_same_result(resumed, whole)
    assert {len(r.participants) for r in whole.history if r.phase == "train"} == {2}
    assert len({r.participants for r in whole.history if r.phase == "train"}) > 1


@pytest.mark.parametrize("cut", range(1, 9))
def test_restarts_resume_at_every_checkpoint(cut, s1, tmp_path):
    """n_init = 2 with 3 rounds each: every checkpoint (mid-restart, between restarts) resumes
    to the same best restart."""
    config = config_of("dwf", **{"n-init": 2, "num-server-rounds": 3, "momentum": 0.2})
    whole, resumed, writes = interrupted_and_resumed(config, parts_of(s1), tmp_path, cut)
    assert len(writes) == 10  # (init + 3 rounds + scored) x 2
    assert_same_result(resumed, whole)


def test_checkpoint_records_what_a_run_needs(s1, tmp_path):
    config = config_of("dwf", **{"n-init": 2, "num-server-rounds": 2, "momentum": 0.5})
    with pytest.raises(Interrupted):
        run(config, parts_of(s1), out=tmp_path, stop_after=5)  # restart 1, after init
    envelope = json.loads((tmp_path / CHECKPOINT_FILE).read_text())
    body = envelope["body"]
    assert envelope["format"] == "fedcluster-checkpoint" and envelope["format-version"] == 1
    assert (body["restart"], body["round"], body["fedcluster-version"]) == \
        (1, 0, fedcluster.__version__)
    assert body["settings"]["momentum"] == 0.5 and body["data"] == {"dataset": "s1", "split": "iid", "standardize": False}
    assert set(body["state"]) == {"rng", "declared-rows", "sampling-keys", "far-reference",
                                  "previous", "spread-warned"}
    assert body["state"]["rng"]["bit_generator"] == "PCG64"
    assert body["best"] is not None and len(body["scores"]) == 1
    _, progress = read_checkpoint(tmp_path)
    assert progress.best.best_restart == 0
    assert [(r.restart, r.phase) for r in progress.history] == \
        [(0, "init"), (0, "train"), (0, "train"), (1, "init")]


# -- refusals ------------------------------------------------------------------------------------

@pytest.fixture
def written(s1, tmp_path):
    config = config_of("dwf", **{"num-server-rounds": 3})
    with pytest.raises(Interrupted):
        run(config, parts_of(s1), out=tmp_path, stop_after=2)
    return config, tmp_path / CHECKPOINT_FILE


def test_a_checkpoint_of_other_settings_is_refused_naming_them(written):
    config, path = written
    other = config_of("dwf", **{"num-server-rounds": 3, "lr": 0.5, "seed": 8})
    with pytest.raises(CheckpointError) as info:
        resume_point(path.parent, build_strategy(other), other.to_flower())
    text = str(info.value)
    assert text.startswith(str(path)) and "lr: checkpoint 1.0, this run 0.5" in text
    assert "seed: checkpoint 7, this run 8" in text and "k:" not in text


def test_other_data_or_method_is_refused(written):
    config, path = written
    split = RunConfig.from_mapping({**config.to_flower(), "split": "dirichlet:0.5"})
    with pytest.raises(CheckpointError, match=r"split: checkpoint 'iid', this run 'dirichlet:0.5'"):
        resume_point(path, build_strategy(split), split.to_flower())
    ewf = RunConfig.from_mapping({**config.to_flower(), "algorithm": "ewf"})
    with pytest.raises(CheckpointError, match="algorithm: checkpoint 'dwf', this run 'ewf'"):
        resume_point(path, build_strategy(ewf), ewf.to_flower())


def test_waiting_settings_may_change_on_resume(written):
    config, path = written
    patient = RunConfig.from_mapping({**config.to_flower(), "round-timeout": 900.0,
                                      "node-wait-timeout": 600.0, "min-nodes": 2})
    assert resume_point(path, build_strategy(patient), patient.to_flower()).round == 1


def test_another_fedcluster_version_is_refused(written, monkeypatch):
    config, path = written
    monkeypatch.setattr(fedcluster._version, "__version__", "99.0")
    with pytest.raises(CheckpointError, match=r"written by fedcluster .*, this is 99.0"):
        resume_point(path, build_strategy(config), config.to_flower())


def test_damaged_checkpoints_are_refused_naming_the_file(written):
    config, path = written
    good = path.read_text()

    def refused(text, pattern):
        path.write_text(text)
        with pytest.raises(CheckpointError, match=pattern) as info:
            resume_point(path, build_strategy(config), config.to_flower())
        assert str(info.value).startswith(str(path))

    refused(good[: len(good) // 2], "does not parse as JSON")
    refused("", "does not parse as JSON")
    refused(json.dumps({"some": "json"}), "not a fedcluster checkpoint")
    envelope = json.loads(good)
    envelope["body"]["round"] = 2  # edited by hand: the checksum no longer matches
    refused(json.dumps(envelope), "damaged checkpoint: the SHA-256")
    newer = json.loads(good)
    newer["format-version"] = 2
    refused(json.dumps(newer), "format version 2")
    path.unlink()
    with pytest.raises(CheckpointError, match="no checkpoint to resume from"):
        resume_point(path.parent, build_strategy(config), config.to_flower())


def test_a_malformed_state_entry_is_refused_by_name(written):
    """A checkpoint whose checksum matches but whose state the strategy cannot take."""
    import hashlib

    from fedcluster.server.checkpoint import _canonical

    config, path = written
    envelope = json.loads(path.read_text())
    envelope["body"]["state"]["previous"] = None
    del envelope["body"]["state"]["rng"]
    envelope["sha256"] = hashlib.sha256(_canonical(envelope["body"])).hexdigest()
    path.write_text(json.dumps(envelope))
    with pytest.raises(CheckpointError, match="strategy state has no 'rng'"):
        resume_point(path, build_strategy(config), config.to_flower())


# -- differential privacy: the spent budget ------------------------------------------------------
def dp_config(**settings) -> RunConfig:
    """DWF under central DP (over secure aggregation) from a random start in S1's box: 5 rounds
    spend epsilon 1."""
    return config_of("dwf", **{"dp": "central", "secure-aggregation": True, "init": "random",
                               "data-bounds": "0:1e6",
                               "dp-epsilon": 1.0, "num-server-rounds": 5, **settings})


def test_a_central_dp_run_resumes_to_the_same_budget_with_fresh_noise(s1, tmp_path):
    """The spent rounds come back, no noise generator does: each round's epsilon is the
    uninterrupted run's, bit for bit, the resumed rounds draw new noise, and the checkpoint
    holds the budget only."""
    config = dp_config()
    whole, resumed, writes = interrupted_and_resumed(config, parts_of(s1), tmp_path, stop_after=3)
    assert writes[:3] == [(0, 0), (0, 1), (0, 2)] and whole.rounds == resumed.rounds == 5
    assert [(r.round, r.epsilon) for r in resumed.history] == \
        [(r.round, r.epsilon) for r in whole.history]
    assert resumed.history[-1].epsilon == pytest.approx(1.0, abs=1e-3)
    assert not np.array_equal(resumed.centroids, whole.centroids)
    _, final = read_checkpoint(tmp_path / "whole")
    assert final.state["dp-rounds-spent"] == 5 and final.state["dp-epsilon-spent"] <= 1.0
    assert {key for key in final.state if key.startswith("dp-")} == {
        "dp-rounds-spent", "dp-noise-multiplier", "dp-epsilon-spent", "dp-last-counts",
        "dp-stop-reason", "dp-data-bounds", "dp-setup-released"}
    assert final.state["dp-setup-released"] == "" and final.state["dp-data-bounds"]


def test_a_resumed_dp_run_stops_where_the_budget_stops_the_uninterrupted_one(s1, tmp_path):
    """A fixed multiplier whose budget allows 3 of 10 rounds: cut after round 2, the resumed
    run counts the 2 spent rounds and stops before round 4, with the same reason."""
    from fedcluster.privacy.accountant import epsilon_spent

    z = 3.0
    config = dp_config(**{"dp-noise-multiplier": z, "num-server-rounds": 10,
                          "dp-epsilon": epsilon_spent(z, 3, 1e-5) + 0.01})
    whole, resumed, _ = interrupted_and_resumed(config, parts_of(s1), tmp_path, stop_after=3)
    assert whole.rounds == resumed.rounds == 3
    assert "privacy budget spent: 3 round(s)" in whole.stop_reason
    assert resumed.stop_reason == whole.stop_reason
    assert [r.epsilon for r in resumed.history] == [r.epsilon for r in whole.history]


def test_a_distributed_dp_run_resumes_to_the_same_budget(s1, tmp_path):
    """Each client draws its noise with OpenDP's secure generator: the
    centroids differ from run to run, the rounds and each round's epsilon do not."""
    config = dp_config(**{"dp": "distributed", "secure-aggregation": True,
                          "num-server-rounds": 4, "momentum": 0.0})
    whole, resumed, _ = interrupted_and_resumed(config, parts_of(s1), tmp_path, stop_after=3)
    assert resumed.rounds == whole.rounds == 4 and resumed.stop_reason == whole.stop_reason
    assert [(r.round, r.epsilon) for r in resumed.history] == \
        [(r.round, r.epsilon) for r in whole.history]
    assert whole.history[-1].epsilon == pytest.approx(1.0, abs=1e-3)


def rewritten(path, change) -> None:
    """Apply ``change`` to the checkpoint's body and store it with a matching checksum."""
    import hashlib

    from fedcluster.server.checkpoint import _canonical

    envelope = json.loads(path.read_text())
    change(envelope["body"])
    envelope["sha256"] = hashlib.sha256(_canonical(envelope["body"])).hexdigest()
    path.write_text(json.dumps(envelope))


def test_a_dp_checkpoint_without_its_budget_is_refused_by_name(s1, tmp_path):
    """A checkpoint that does not say what was spent (a run from before the budget was stored,
    or edited) would let the resumed run spend it again: refused, naming the entry."""
    config = dp_config()
    with pytest.raises(Interrupted):
        run(config, parts_of(s1), out=tmp_path, stop_after=3)
    path = tmp_path / CHECKPOINT_FILE
    good = path.read_text()
    for name in ("dp-rounds-spent", "dp-last-counts", "dp-stop-reason"):
        path.write_text(good)
        rewritten(path, lambda body: body["state"].pop(name))
        with pytest.raises(CheckpointError, match=f"strategy state has no '{name}'"):
            resume_point(path, build_strategy(config), config.to_flower())
    # A checkpoint written when the noise had a generator: its state is ignored.
    path.write_text(good)
    rewritten(path, lambda body: body["state"].update({"dp-noise-rng": {"state": 1}}))
    resume_point(path, build_strategy(config), config.to_flower())
    # Fewer rounds than the epsilon recorded with them: counted otherwise, refused.
    path.write_text(good)
    rewritten(path, lambda body: body["state"].update({"dp-rounds-spent": 1}))
    with pytest.raises(CheckpointError, match="'dp-epsilon-spent' is .* for 1 round"):
        resume_point(path, build_strategy(config), config.to_flower())


# -- deepfeca: the network's weights ------------------------------------------------------------
def deepfeca_config(**settings) -> RunConfig:
    """DeepFeCA's small CNN on scikit-learn's 8x8 digits, small enough for a test."""
    return RunConfig.from_mapping({"algorithm": "deepfeca", "dataset": "digits", "k": 6,
                                   "seed": 3, "num-server-rounds": 2, "local-steps": 1,
                                   "image-shape": "1,8,8", **settings})


@pytest.fixture(scope="module")
def digit_parts():
    """600 of the digits over 3 clients; skips where PyTorch is absent."""
    pytest.importorskip("torch", reason="DeepFeCA needs PyTorch: pip install 'fedcluster[deep]'")
    from fedcluster.data import load_dataset, partition_indices

    X = load_dataset("digits").X
    rows = X[np.random.default_rng(0).permutation(len(X))[:600]]
    return [rows[i] for i in partition_indices(len(rows), 3, "iid", seed=0)]


def assert_same_network(resumed, whole):
    """The same named arrays (a network's weights), bit for bit, dtypes included."""
    assert resumed.keys() == whole.keys() and whole
    for name, weights in whole.items():
        assert resumed[name].dtype == weights.dtype
        np.testing.assert_array_equal(resumed[name], weights, err_msg=name)


def test_deepfeca_resumed_after_round_1_equals_the_uninterrupted_run(digit_parts, tmp_path):
    """Cut after round 1 of 2: the same weights, centroids and history, bit for bit."""
    config = deepfeca_config()
    whole, resumed, writes = interrupted_and_resumed(config, digit_parts, tmp_path, stop_after=1)
    assert writes == [(0, 1), (0, 2), (1, None)]
    assert_same_result(resumed, whole)
    assert_same_network(resumed.arrays, whole.arrays)
    _, final = read_checkpoint(tmp_path / "cut")
    assert_same_network(final.best.arrays, whole.arrays)  # the best restart keeps its network
    # The checkpoint holds the weights as raw bytes: about 4/3 of the small CNN's, twice.
    assert (tmp_path / "cut" / CHECKPOINT_FILE).stat().st_size < 1_000_000


def test_deepfeca_resumes_between_restarts_with_the_best_network(digit_parts, tmp_path):
    """n_init = 2, cut after restart 0 is scored: its network comes back from the checkpoint
    (seed 1: restart 0 is the best, so the result's network is the checkpoint's)."""
    config = deepfeca_config(**{"n-init": 2, "num-server-rounds": 1, "seed": 1})
    whole, resumed, writes = interrupted_and_resumed(config, digit_parts, tmp_path, stop_after=2)
    assert writes == [(0, 1), (1, None), (1, 1), (2, None)] and whole.best_restart == 0
    assert_same_result(resumed, whole)
    assert_same_network(resumed.arrays, whole.arrays)


def test_a_deepfeca_checkpoint_of_another_network_is_refused(digit_parts, tmp_path):
    config = deepfeca_config()
    with pytest.raises(Interrupted):
        run(config, digit_parts, out=tmp_path, stop_after=1)
    other = deepfeca_config(**{"train-lr": 0.1})
    with pytest.raises(CheckpointError, match="train-lr: checkpoint 0.05, this run 0.1"):
        resume_point(tmp_path, build_strategy(other), other.to_flower())
    # Weights that do not fit the network are refused by name, even with a matching checksum.
    import hashlib

    from fedcluster.server.checkpoint import _canonical

    path = tmp_path / CHECKPOINT_FILE
    envelope = json.loads(path.read_text())
    weights = envelope["body"]["state"]["weights"]
    weights.pop(sorted(weights)[0])
    envelope["sha256"] = hashlib.sha256(_canonical(envelope["body"])).hexdigest()
    path.write_text(json.dumps(envelope))
    with pytest.raises(CheckpointError, match="state 'weights' does not fit network 'small-cnn'"):
        resume_point(path, build_strategy(config), config.to_flower())


class Renumbered(InMemoryFederation):
    """Clients whose node ids change with every federation (as in every new simulation), their
    sampling keys (positions) staying; ``asked`` counts the requests by kind."""

    def __init__(self, parts, seed):
        super().__init__(parts)
        from harness.inprocess import flower_like_node_ids

        self.ids = flower_like_node_ids(len(parts), seed)
        self.asked: dict[str, int] = {}

    def node_ids(self):
        return list(self.ids)

    def ask(self, request, node_ids, timeout):
        self.asked[request.kind] = self.asked.get(request.kind, 0) + 1
        answers = super().ask(request, [self.ids.index(n) for n in node_ids], timeout)
        return [type(a)(self.ids[a.node], a.summary, a.error, a.sampling_key) for a in answers]


def test_new_node_ids_learn_their_sampling_keys_again(s1, tmp_path):
    """Resumed over clients with new node ids, a sampled run asks their bounds once (their keys)
    and then samples the same partitions as the uninterrupted run."""
    from fedcluster.messages import BOUNDS
    from fedcluster.privacy.kinds import DIMENSION

    config = config_of("dwf", **{"clients-per-round": 2, "momentum": 0.3})
    parts = parts_of(s1, 5)

    def fit(seed, out, **kwargs):
        strategy = build_strategy(config)
        federation = Renumbered(parts, seed)
        writer = CheckpointWriter(out, strategy.settings, config.to_flower())
        stop = kwargs.pop("stop_after", None)
        count = []

        def checkpoint(progress):
            writer(progress)
            count.append(1)
            if len(count) == stop:
                raise Interrupted()

        result = strategy.fit(federation, checkpoint=checkpoint, **kwargs)
        return result, federation

    whole, _ = fit(1, tmp_path / "whole")
    with pytest.raises(Interrupted):
        fit(2, tmp_path / "cut", stop_after=3)
    strategy = build_strategy(config)
    point = resume_point(tmp_path / "cut", strategy, config.to_flower())
    resumed, federation = fit(3, tmp_path / "cut", resume=point)
    assert federation.asked[BOUNDS] == 1
    assert DIMENSION not in federation.asked  # no old id is listed: nobody to wait for
    np.testing.assert_array_equal(resumed.centroids, whole.centroids)
    # The same partitions took part in each round (node ids differ between the runs).
    positions = [sorted(federation.ids.index(n) for n in r.participants)
                 for r in resumed.history[3:]]
    whole_ids = Renumbered(parts, 1).ids
    assert positions == [sorted(whole_ids.index(n) for n in r.participants)
                         for r in whole.history[3:]]


# -- clients reconnecting after the coordinator's restart ------------------------------------------

class InBackOff(InMemoryFederation):
    """Clients still listed that answer errors to their first ``away[node]`` requests, as
    SuperNodes in their retry back-off do while a SuperLink restarted on its database lists them."""

    def __init__(self, parts, away):
        super().__init__(parts)
        self.away = dict(away)
        self.asked: list[tuple[str, tuple[int, ...]]] = []

    def ask(self, request, node_ids, timeout):
        from fedcluster.federation.base import Answer

        self.asked.append((request.kind, tuple(node_ids)))
        gone = [node for node in node_ids if self.away.get(node, 0) > 0]
        for node in gone:
            self.away[node] -= 1
        answers = super().ask(request, [n for n in node_ids if n not in gone], timeout)
        return answers + [Answer(node, error="error reply (code 5): node unavailable",
                                 unreachable=True) for node in gone]


def resumed_over(federation, config, out):
    strategy = build_strategy(config)
    return strategy.fit(federation, resume=resume_point(out, strategy, config.to_flower()))


@pytest.fixture
def sleeps(monkeypatch):
    """The seconds the strategies' module sleeps, recorded instead of slept."""
    from types import SimpleNamespace

    from fedcluster.strategies import base

    slept: list[float] = []
    monkeypatch.setattr(base, "time", SimpleNamespace(monotonic=time.monotonic,
                                                      sleep=slept.append))
    return slept


@pytest.mark.parametrize("away", [2, 0])
def test_a_resumed_run_waits_for_the_clients_of_the_interrupted_run(s1, tmp_path, sleeps, away):
    """A client that answers errors to the first two requests after the restart is waited for:
    it takes part in every resumed round and the result is the uninterrupted run's; as it was
    late, the run goes on no sooner than HEARTBEAT_CATCH_UP_S after its first request (its
    heartbeat may lag its messages). Where every client answers at once, nothing is waited."""
    from fedcluster.privacy.kinds import DIMENSION
    from fedcluster.strategies.base import HEARTBEAT_CATCH_UP_S

    config = config_of("dwf")
    parts = parts_of(s1)
    whole, writes = run(config, parts, out=tmp_path / "whole")
    with pytest.raises(Interrupted):
        run(config, parts, out=tmp_path / "cut", stop_after=writes.index((0, 3)) + 1)
    federation = InBackOff(parts, {2: away})
    resumed = resumed_over(federation, config, tmp_path / "cut")
    assert federation.asked[:1 + away] == [(DIMENSION, (0, 1, 2, 3))] + [(DIMENSION, (2,))] * away
    assert all(kind != DIMENSION for kind, _ in federation.asked[1 + away:])
    assert_same_result(resumed, whole)
    if away:
        # A second between the asks, then the rest of the catch-up since the first ask.
        assert sleeps[:2] == [1.0, 1.0] and len(sleeps) == 3
        assert HEARTBEAT_CATCH_UP_S - 1 < sleeps[2] <= HEARTBEAT_CATCH_UP_S
    else:
        assert sleeps == []


def test_over_flower_messages_a_node_the_superlink_answers_for_is_waited_for(s1, tmp_path,
                                                                            sleeps):
    """Flower's own Node Unavailable reply (the SuperLink's, for a lapsed heartbeat) marks the
    node unreachable, a ClientApp's error does not; the resumed run waits for the node."""
    from fedcluster.client.app import build_client_app
    from fedcluster.server.flower import FlowerFederation
    from fedcluster.messages import Request
    from fedcluster.privacy.kinds import DIMENSION
    from harness.inprocess import InProcessGrid
    from helpers import save_parts

    config = config_of("dwf")
    grid = InProcessGrid(build_client_app(), save_parts(tmp_path / "parts", parts_of(s1)))
    federation = FlowerFederation(grid)
    lapsed, other = grid.node_ids[2], grid.node_ids[0]
    grid.heartbeat_lost[lapsed] = 1
    unavailable, = federation.ask(Request(DIMENSION, {}), [lapsed], 1.0)
    assert unavailable.unreachable and "error reply (code 5)" in unavailable.error
    raised, = federation.ask(Request("query.no_such_kind", {}), [other], 1.0)
    assert raised.error and not raised.unreachable

    whole = build_strategy(config).fit(federation)
    strategy = build_strategy(config)
    writer = CheckpointWriter(tmp_path / "cut", strategy.settings, config.to_flower())
    written = []

    def checkpoint(progress):
        writer(progress)
        written.append(progress)
        if len(written) == 3:
            raise Interrupted()

    with pytest.raises(Interrupted):
        strategy.fit(federation, checkpoint=checkpoint)
    grid.heartbeat_lost[lapsed] = 2
    resumed = resumed_over(federation, config, tmp_path / "cut")
    assert grid.heartbeat_lost[lapsed] == 0
    assert_same_result(resumed, whole)


def test_a_client_that_is_back_but_fails_is_not_waited_for(s1, tmp_path, flwr_log):
    """Its own error reply shows it is back: asked once, then rejected by the round, by name."""
    from fedcluster.privacy.kinds import DIMENSION
    from helpers import messages

    def broken(X, request, node_config):
        raise OSError("data file unreadable")

    config = config_of("dwf")
    parts = parts_of(s1)
    with pytest.raises(Interrupted):
        run(config, parts, out=tmp_path, stop_after=3)
    federation = InBackOff(parts, {})
    federation.responders[2] = broken
    resumed = resumed_over(federation, config, tmp_path)
    assert [asked for asked in federation.asked if asked[0] == DIMENSION] == \
        [(DIMENSION, (0, 1, 2, 3))]
    assert "round 3: rejected node 2: error reply" in messages(flwr_log)
    after = [r for r in resumed.history if r.phase == "train" and r.round > 2]
    assert after and all(r.participants == (0, 1, 3) for r in after), resumed.history


def test_a_client_that_does_not_come_back_is_named_and_the_run_goes_on(s1, tmp_path, flwr_log):
    from helpers import messages

    config = config_of("dwf", **{"node-wait-timeout": 1.5})
    parts = parts_of(s1)
    with pytest.raises(Interrupted):
        run(config, parts, out=tmp_path, stop_after=3)
    resumed = resumed_over(InBackOff(parts, {2: 10**6}), config, tmp_path)
    assert "resume: node(s) [2] did not answer within 1.5 s; going on without them" \
        in messages(flwr_log)
    after = [r for r in resumed.history if r.phase == "train" and r.round > 2]
    assert after and all(r.participants == (0, 1, 3) for r in after), resumed.history


# -- the command lines -----------------------------------------------------------------------------

def test_simulate_resume_refuses_a_missing_checkpoint_before_ray_starts(tmp_path, capsys):
    from fedcluster.cli import main

    code = main(["simulate", "--clients", "3", "--k", "15", "--resume", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"fedcluster: error: {tmp_path / CHECKPOINT_FILE}: no checkpoint to resume "
                       "from (the run wrote none there: is this the run's out-dir?)")


def test_submit_resume_sets_resume_from_and_out_dir():
    from fedcluster.submit import SubmitError, resume_run_config

    assert resume_run_config(["k=5"], "/r") == ["k=5", 'resume-from="/r" out-dir="/r"']
    # An out-dir given stays: the resumed run writes there.
    assert resume_run_config(['k=5 out-dir="/elsewhere"'], "/r") == \
        ['k=5 out-dir="/elsewhere"', 'resume-from="/r"']
    with pytest.raises(SubmitError, match="without quotes"):
        resume_run_config([], '/r"x')


@pytest.mark.slow
def test_simulate_resume_continues_a_checkpoint_under_ray(s1, tmp_path, capsys):
    """`fedcluster simulate --resume DIR` continues (under Ray, with new node ids) a run
    interrupted after round 2 and ends with the uninterrupted run's centroids."""
    from fedcluster.cli import main
    from fedcluster.data import partition_indices
    from fedcluster.server.artifacts import read_model

    options = {"k": 15, "rounds": 5, "tol": 0.0, "momentum": 0.3, "lr": 0.9}
    config = config_of("dwf", **{"num-server-rounds": 5, "seed": 0, "momentum": 0.3, "lr": 0.9,
                                 "min-nodes": 3})
    # The partitions `fedcluster simulate --clients 3 --split iid --seed 0` makes.
    parts = [s1[i] for i in partition_indices(len(s1), 3, "iid", seed=0)]
    whole, _ = run(config, parts, out=tmp_path / "whole")
    with pytest.raises(Interrupted):
        run(config, parts, out=tmp_path / "cut", stop_after=3)  # init, round 1, round 2
    args = ["simulate", "--clients", "3", "--seed", "0", "--resume", str(tmp_path / "cut")]
    for key, value in options.items():
        args += [f"--{key}", str(value)]
    assert main(args) == 0, capsys.readouterr()
    resumed = read_model(tmp_path / "cut" / "model.pb")
    np.testing.assert_array_equal(resumed.centroids, whole.centroids)
    assert [(r.phase, r.round) for r in resumed.history] == \
        [(r.phase, r.round) for r in whole.history]


@pytest.mark.slow
def test_simulate_resume_continues_a_deepfeca_checkpoint_under_ray(tmp_path, capsys):
    """`fedcluster simulate --algorithm deepfeca --resume DIR` continues a run cut after round 1
    of 2 to the uninterrupted run's network and centroids (the weights travel through Ray's
    ClientApps as ArrayRecords)."""
    torch = pytest.importorskip("torch", reason="DeepFeCA needs PyTorch: pip install "
                                "'fedcluster[deep]'")
    from fedcluster.cli import main
    from fedcluster.data import load_dataset, partition_indices
    from fedcluster.server.artifacts import read_model

    X = load_dataset("digits").X
    # The partitions `fedcluster simulate --dataset digits --clients 3 --split iid --seed 0` makes.
    parts = [X[i] for i in partition_indices(len(X), 3, "iid", seed=0)]
    config = deepfeca_config(**{"seed": 0, "min-nodes": 3})
    # Ray's workers run torch on one thread (OMP_NUM_THREADS=1), and a convolution's float
    # sums depend on the thread count: the in-memory runs use one thread too.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        whole, _ = run(config, parts, out=tmp_path / "whole")
        with pytest.raises(Interrupted):
            run(config, parts, out=tmp_path / "cut", stop_after=1)
    finally:
        torch.set_num_threads(threads)
    args = ["simulate", "--algorithm", "deepfeca", "--dataset", "digits", "--clients", "3",
            "--seed", "0", "--k", "6", "--rounds", "2", "--local-steps", "1",
            "--image-shape", "1,8,8", "--resume", str(tmp_path / "cut")]
    assert main(args) == 0, capsys.readouterr()
    resumed = read_model(tmp_path / "cut" / "model.pb")
    np.testing.assert_array_equal(resumed.centroids, whole.centroids)
    with np.load(tmp_path / "cut" / "network.npz") as network:
        assert_same_network(dict(network), whole.arrays)
    assert [(r.phase, r.round) for r in resumed.history] == \
        [(r.phase, r.round) for r in whole.history]

