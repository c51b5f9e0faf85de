"""The coordinator dies mid-run: a loopback deployment whose SuperLink is SIGKILLed after round 2.

One SuperLink (with its ``--database``) and three SuperNodes run DWF for 4
rounds with the SuperLink killed (SIGKILL, as a crash) as soon as the
ServerApp's checkpoint says round 2 is done. Then:
``fedcluster submit`` of the interrupted run fails loudly, nothing of the
SuperLink's process group (its SuperExec, the ``flwr-serverapp`` process)
outlives it, the SuperNodes wait for the SuperLink instead of exiting, and
once it is started again on the same database, ``fedcluster submit --resume``,
submitted at once, waits for the SuperNodes to reconnect (by Flower's retries,
under the ids they had) and finishes the run with the uninterrupted run's
centroids, bit for bit, and the same rounds and participants. The
uninterrupted run is the in-process one of the same partition files under the
SuperNodes' ids (harness.inprocess.run_on_files), which is the deployment's.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from fedcluster.data import load_dataset, partition_indices, write_partitions
from fedcluster.server.artifacts import read_model
from fedcluster.server.checkpoint import CHECKPOINT_FILE, read_checkpoint
from harness.inprocess import run_on_files
from harness.localdeploy import LocalDeployment, group_members

pytestmark = pytest.mark.slow

SETTINGS = {"algorithm": "dwf", "k": 15, "num-server-rounds": 4, "local-steps": 2, "lr": 0.9,
            "momentum": 0.3, "seed": 4, "tol": 0.0, "min-nodes": 3, "round-timeout": 120.0}


def run_config(**extra) -> str:
    return " ".join(f'{k}="{v}"' if isinstance(v, str) else f"{k}={v}"
                    for k, v in {**SETTINGS, **extra}.items())


def wait_for_round(out, round_: int, proc, deployment, timeout: float = 300):
    """Poll the checkpoint until it records ``round_`` (every read must succeed once it exists)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (out / CHECKPOINT_FILE).exists():
            _, progress = read_checkpoint(out)  # never a partial file: written atomically
            if progress.round is not None and progress.round >= round_:
                return progress
        assert proc.poll() is None, proc.communicate()[0] + deployment.logs()
        time.sleep(0.05)
    raise AssertionError(f"no checkpoint of round {round_} within {timeout} s\n{deployment.logs()}")


def test_killed_superlink_resumes_to_the_uninterrupted_result(tmp_path):
    data = load_dataset("s1")
    parts = partition_indices(len(data.X), 3, "dirichlet:0.5", labels=data.labels, seed=4)
    files = write_partitions(data.X, parts, tmp_path / "parts")
    cut = tmp_path / "cut"
    with LocalDeployment(tmp_path / "processes", [f'data-path="{f}"' for f in files]) as deployment:
        # Polled every 0.5 s (default 3): five failed reads in a row say the SuperLink is lost.
        follow = deployment.start_submit("--poll", "0.5",
                                         "-c", run_config(**{"out-dir": str(cut)}))
        at_kill = wait_for_round(cut, 2, follow, deployment)
        group = deployment.kill_superlink()
        out, err = follow.communicate(timeout=180)
        assert follow.returncode == 1, out + err
        assert "lost the SuperLink" in err.strip().splitlines()[-1], err

        # Nothing of the killed SuperLink's group lives on (SuperExec, flwr-serverapp).
        deadline = time.monotonic() + 30
        while group_members(group) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not group_members(group), (group_members(group), deployment.logs())
        # The SuperNodes wait for their SuperLink.
        time.sleep(5)
        assert all(node.poll() is None for node in deployment.supernodes), deployment.logs()
        _, before = read_checkpoint(cut)
        assert 2 <= before.round < 4 and before.round >= at_kill.round, before

        # Resumed at once: the SuperNodes are still in their retry back-off, and the resumed
        # run waits until each has answered again (it would lose them otherwise).
        deployment.start_superlink()
        done = deployment.submit("--resume", str(cut), "-c", run_config(), timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr + deployment.logs()
        assert f"resuming at restart 0, after round {before.round}" in done.stdout, done.stdout
        assert "resume: all 3 clients of the interrupted run answer" in done.stdout, done.stdout
        print(*(line for line in done.stdout.splitlines() if "resum" in line), sep="\n")
        nodes = deployment.node_ids()

    reference, resumed = run_on_files(SETTINGS, files, nodes), read_model(cut / "model.pb")
    # First who took part: a round that lost a client explains any other difference.
    assert [(r.phase, r.round, r.participants, r.clients_answered) for r in resumed.history] == \
        [(r.phase, r.round, r.participants, r.clients_answered) for r in reference.history]
    np.testing.assert_array_equal(resumed.centroids, reference.centroids)
    np.testing.assert_array_equal(resumed.counts, reference.counts)
    assert resumed.score == reference.score and resumed.rounds == reference.rounds == 4
    assert all(len(r.participants) == 3 for r in resumed.history)
