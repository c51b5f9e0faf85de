"""A new method is its folder and its line in the registry, own setting and own reply array included.

The test copies the package into a temporary directory, adds a method there
(a folder of four small files: its spec, its settings with one setting of its
own, its client step under a request kind of its own that sends one reply
array of its own, and its server side, which reads that array) and its line in
``methods/__init__.py``, and runs it in a fresh interpreter in memory and
through the real ClientApp and codec (Flower messages, ``InProcessGrid``): the
run config, the client's dispatcher, the codec, the reply check and the
strategy take it from the registry with no other file touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "fedcluster"
TESTS = Path(__file__).resolve().parent

#: The new method: k-FED whose clients shift their local centres by a setting of its own and
#: send the shift of each centre in a reply array of its own, which the server takes off again.
FILES = {
    "__init__.py": '''
        """A test's method: k-FED over local centres shifted by ``probe-shift``, and shifted back."""

        from ..spec import Method
        from .client import OFFSETS, PROBE, probe_request
        from .options import ProbeOptions

        PROBE_METHOD = Method("probe", "k-FED over shifted local centres", "a test",
                              "fedcluster.methods.probe.strategy:Probe", ProbeOptions,
                              {PROBE: probe_request}, reply_arrays=(OFFSETS,))
        ''',
    "options.py": '''
        from typing import Literal

        from pydantic import Field

        from ..kfed.options import KFedOptions


        class ProbeOptions(KFedOptions):
            algorithm: Literal["probe"] = "probe"
            probe_shift: float = Field(0.0, ge=0.0, description="probe: added to every centre")
        ''',
    "client.py": '''
        import dataclasses

        import numpy as np

        from ...local.steps import local_kmeans_request
        from ...messages import ReplyArray, request_option
        from .options import ProbeOptions

        PROBE = "query.probe"
        #: Each sent centre's shift: one row per local cluster the floor let through.
        OFFSETS = ReplyArray("offsets", ("k", "d"), nonnegative=True)


        def probe_request(X, centroids, config):
            summary = local_kmeans_request(X, centroids, config)
            shift = request_option(config, ProbeOptions, "probe-shift")
            return dataclasses.replace(summary, centroids=summary.centroids + shift,
                                       own={"offsets": np.full_like(summary.centroids, shift)})
        ''',
    "strategy.py": '''
        import dataclasses

        from ...messages import validate_reply
        from ..kfed.strategy import KFed
        from .client import OFFSETS, PROBE
        from .options import ProbeOptions


        class Probe(KFed):
            Options = ProbeOptions

            def request(self):
                kind, settings, validate, what = super().request()

                def check(summary):
                    checked = validate_reply(summary, expect=("centroids", "counts", OFFSETS.name),
                                             own=(OFFSETS,))
                    return dataclasses.replace(validate(checked), own=checked.own)

                return PROBE, {**settings, "probe-shift": self.options.probe_shift}, check, what

            def combine(self, exchange, what):
                self.offsets_read = 0
                for node, summary in exchange.accepted.items():
                    offsets = summary.own[OFFSETS.name]
                    self.offsets_read += len(offsets)
                    exchange.accepted[node] = dataclasses.replace(
                        summary, centroids=summary.centroids - offsets)
                return super().combine(exchange, what)
        ''',
}

RUN = '''
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

import fedcluster

from fedcluster.client.app import build_client_app
from fedcluster.client.memory import InMemoryFederation
from fedcluster.config import RunConfig, build_strategy
from fedcluster.messages import ClientSummary, ProtocolError, validate_reply
from fedcluster.methods import METHODS
from fedcluster.server.flower import FlowerFederation
from harness.inprocess import InProcessGrid

rng = np.random.default_rng(0)
centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
parts = [np.concatenate([rng.normal(c, 0.3, (20, 2)) for c in centres]) for _ in range(3)]
nodes = []
for i, part in enumerate(parts):
    np.save(Path(sys.argv[1]) / f"part{i}.npy", part)
    nodes.append({"data-path": str(Path(sys.argv[1]) / f"part{i}.npy")})


def run(federation=None, **settings):
    config = RunConfig.from_mapping({"k": 3, "seed": 0, **settings})
    strategy = build_strategy(config)
    centroids = strategy.fit(federation or InMemoryFederation(parts)).centroids
    return centroids, getattr(strategy, "offsets_read", None)


kfed, _ = run(algorithm="kfed")
same, read = run(algorithm="probe")
assert np.array_equal(same, kfed) and read == 9, read
# The server takes the shift off again with the array the clients send: without reading it,
# the centres would lie 100 away.
back, _ = run(algorithm="probe", **{"probe-shift": 100.0})
assert np.allclose(back, kfed, atol=1e-9), back
# Through the real ClientApp and the Flower codec: the array travels and gives the same run.
flower, read = run(FlowerFederation(InProcessGrid(build_client_app(), nodes)), algorithm="probe",
                   **{"probe-shift": 100.0})
assert np.array_equal(flower, back) and read == 9, (flower, read)
try:
    RunConfig.from_mapping({"algorithm": "probe", "probe-shift": -1.0})
except ValueError as exc:
    assert "probe-shift" in str(exc), exc
else:
    raise AssertionError("the new setting's range is not checked")
# The reply check holds the array to its declaration (shape, sign, presence, finite).
declared = METHODS["probe"].reply_arrays
reply = ClientSummary(n=20, centroids=np.zeros((2, 2)), counts=np.array([10.0, 10.0]))
for own, says in (({"offsets": np.zeros((3, 2))}, "shape (3, 2), expected (2, 2)"),
                  ({"offsets": -np.ones((2, 2))}, "negative"),
                  ({"offsets": np.full((2, 2), np.nan)}, "non-finite"),
                  (None, "lacks the array 'offsets'")):
    try:
        validate_reply(replace(reply, own=own), expect=("offsets",), own=declared)
    except ProtocolError as exc:
        assert says in str(exc), (says, exc)
    else:
        raise AssertionError(f"not refused: {own}")
# The library face takes the new setting under its own name, with no edit of the estimator.
from fedcluster import FederatedKMeans

model = FederatedKMeans(3, algorithm="probe", probe_shift=100.0, random_state=0)
assert model.get_params()["probe_shift"] == 100.0
assert np.allclose(model.fit(parts).cluster_centers_, back), model.cluster_centers_
print("ok" if fedcluster.__file__.startswith(sys.argv[1]) else fedcluster.__file__)
'''


def test_a_method_added_as_a_folder_and_a_registry_line_runs(tmp_path):
    copy = tmp_path / "fedcluster"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    folder = copy / "methods" / "probe"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    registry = copy / "methods" / "__init__.py"
    text = registry.read_text()
    assert text.count("DEEPFECA,\n)}") == 1
    # Its line in the registry: the import, and its name added to the registry's tuple.
    registry.write_text(text.replace("DEEPFECA,\n)}", "DEEPFECA, PROBE_METHOD,\n)}")
                        .replace("from .spec import Method\n",
                                 "from .spec import Method\nfrom .probe import PROBE_METHOD\n"))
    path = os.pathsep.join((str(tmp_path), str(TESTS)))  # the copy first, then the test harness
    done = subprocess.run([sys.executable, "-c", RUN, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": path})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
