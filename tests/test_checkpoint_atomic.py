"""A process killed (SIGKILL) while it writes a checkpoint leaves the previous one readable.

A child process writes checkpoints in a loop, each larger than the last (a
growing history and centroids), as the ServerApp does after every round;
the test kills it at varying moments and reads the file each time: it is
one of the checkpoints the child completed, never a partial or damaged one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from fedcluster.server.checkpoint import CHECKPOINT_FILE, read_checkpoint

REPO = Path(__file__).resolve().parents[1]

WRITER = r"""
import sys
import numpy as np
from fedcluster.results import RoundRecord
import numpy as np

from fedcluster.server.checkpoint import CheckpointWriter
from fedcluster.strategies.progress import Progress

out = sys.argv[1]
writer = CheckpointWriter(out, {"algorithm": "dwf", "k": 200}, {"dataset": "s1", "split": "iid"})
rng = np.random.default_rng(0)
history = []
for t in range(1, 10**9):
    history.append(RoundRecord(0, t, 1.0, 2.0, 3, 3, 0, (1, 2, 3)))
    writer(Progress(restart=0, round=t, centroids=rng.normal(size=(200, 50)) + t, converged=False,
                    history=history, best=None, state={"rng": rng.bit_generator.state}))
    print(t, flush=True)  # this checkpoint is complete
"""


def test_sigkill_mid_write_leaves_a_whole_checkpoint(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    # After the first checkpoint, kill at spread-out moments (a write takes a few ms).
    delays = [0.003 * i for i in range(8)]
    for delay in delays:
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], env=env,
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "1"  # started writing
        time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
        out, _ = child.communicate()
        last = int(out.split()[-1]) if out.split() else 1
        _, progress = read_checkpoint(tmp_path)  # raises if the file were partial or damaged
        # The file is the last completed checkpoint, or the one whose completion the child
        # had not reported yet (killed between the rename and the print).
        assert progress.round in (last, last + 1), (progress.round, last)
        assert progress.centroids.shape == (200, 50) and len(progress.history) == progress.round
        np.testing.assert_array_equal(progress.centroids, expected_centroids(progress.round))
        (tmp_path / CHECKPOINT_FILE).unlink()


def expected_centroids(round_: int) -> np.ndarray:
    """The centroids the writer stored with checkpoint ``round_`` (its generator's draws)."""
    rng = np.random.default_rng(0)
    for _ in range(round_ - 1):
        rng.normal(size=(200, 50))
    return rng.normal(size=(200, 50)) + round_
