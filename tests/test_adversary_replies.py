"""Red team, part 1: malformed replies through Flower messages, for every method.

The in-memory hostile-reply tests (``test_hostile_replies.py``) alter a
client's summary before the federation sees it. Here the real ClientApp
answers a real Flower message and one node's reply is then altered where an
attacker would alter it, in the message's arrays (not-a-number, complex, huge
values, counts that are not whole, arrays of the wrong shape), and the
server reads it through the same code path as a deployment's
(``FlowerFederation`` over the in-process grid, Flower-like uint64 node ids).
Each case asserts that the liar is named, that no honest node is rejected,
and that the run ends with a model inside the data's range.

The attacks on the privacy protocol itself (secure aggregation, DP) are in
``test_adversary.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Array
from helpers import iid_parts, messages, save_parts

from fedcluster.client.app import build_client_app
from fedcluster.config import RunConfig
from fedcluster.server.flower import FlowerFederation
from fedcluster.config import build_strategy
from fedcluster.methods import METHODS
from fedcluster.protocol import RESULT_KEY
from harness.inprocess import InProcessGrid

#: Every method that runs without extras (DeepFeCA needs torch and images: its own tests).
ALGORITHMS = [name for name, method in METHODS.items() if not method.extra]
#: How the hostile node alters each array of its replies.
MODES = ("nan", "complex", "huge", "fractional-counts", "short")


def alter(array: np.ndarray, name: str, mode: str) -> np.ndarray | None:
    """The array as the hostile node sends it (None: left as it is)."""
    if not np.issubdtype(array.dtype, np.floating) or array.size == 0:
        return None
    if mode == "nan":
        changed = array.copy()
        changed.flat[0] = np.nan
        return changed
    if mode == "complex":
        return array.astype(np.complex128) + 1j
    if mode == "huge":
        return np.full_like(array, 1e308)
    if mode == "fractional-counts" and name == "counts" and array.size >= 2:
        changed = array.copy()
        changed.flat[0] += 0.5
        changed.flat[1] -= 0.5
        return changed
    if mode == "short":
        return array[:-1]
    return None


def tamper(msg, context, call_next):
    """A Flower client mod: the node whose node_config names a ``hostile`` mode alters its replies."""
    reply = call_next(msg, context)
    mode = context.node_config.get("hostile")
    if mode and not reply.has_error() and RESULT_KEY in reply.content.array_records:
        arrays = reply.content[RESULT_KEY]
        for name in list(arrays.keys()):
            changed = alter(arrays[name].numpy(), name, mode)
            if changed is not None:
                arrays[name] = Array(changed)
    return reply


def rejected(log: str) -> set[int]:
    return {int(line.split("rejected node ")[1].split(":")[0])
            for line in log.splitlines() if "rejected node " in line}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_malformed_flower_reply_names_its_sender_and_no_honest_client(tmp_path, s1, flwr_log,
                                                                       algorithm, mode):
    configs = save_parts(tmp_path / "parts", iid_parts(s1, 5))
    configs[2]["hostile"] = mode
    grid = InProcessGrid(build_client_app(mods=[tamper]), configs, seed=7)
    settings = {"algorithm": algorithm, "k": 15, "seed": 1, "num-server-rounds": 3}
    try:
        result = build_strategy(RunConfig.from_mapping(settings)).fit(FlowerFederation(grid))
    except Exception as exc:  # noqa: BLE001 - the assertion below says which
        pytest.fail(f"{algorithm}, {mode}: one hostile client of five stopped the run: {exc}")
    log = messages(flwr_log)
    assert rejected(log) == {grid.node_ids[2]}, (algorithm, mode, log[-3000:])
    assert np.all(np.isfinite(result.centroids))
    assert np.all((result.centroids >= s1.min(axis=0)) & (result.centroids <= s1.max(axis=0)))
