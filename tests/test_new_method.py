"""A new method is its folder and its line in the registry.

The test copies the package into a temporary directory, adds a method there
(a folder of four small files: its spec, its settings with one setting of its
own, its client step under a request kind of its own, its server side) and
its line in ``methods/__init__.py``, and runs it in memory in a fresh
interpreter: the run config, the client's dispatcher and the strategy take it
from the registry with no other file touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "fedcluster"

#: The new method: k-FED whose clients shift their local centres by a setting of its own.
FILES = {
    "__init__.py": '''
        """A test's method: k-FED over local centres shifted by ``probe-shift``."""

        from ..spec import Method
        from .client import PROBE, probe_request
        from .options import ProbeOptions

        PROBE_METHOD = Method("probe", "k-FED over shifted local centres", "a test",
                              "fedcluster.methods.probe.strategy:Probe", ProbeOptions,
                              {PROBE: probe_request})
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

        from ...local.steps import local_kmeans_request
        from ...messages import request_option
        from .options import ProbeOptions

        PROBE = "query.probe"


        def probe_request(X, centroids, config):
            summary = local_kmeans_request(X, centroids, config)
            shift = request_option(config, ProbeOptions, "probe-shift")
            return dataclasses.replace(summary, centroids=summary.centroids + shift)
        ''',
    "strategy.py": '''
        from ..kfed.strategy import KFed
        from .client import PROBE
        from .options import ProbeOptions


        class Probe(KFed):
            Options = ProbeOptions

            def request(self):
                kind, settings, validate, what = super().request()
                return PROBE, {**settings, "probe-shift": self.options.probe_shift}, validate, what
        ''',
}

RUN = '''
import sys

import numpy as np

import fedcluster

from fedcluster.client.memory import InMemoryFederation
from fedcluster.config import RunConfig, build_strategy

rng = np.random.default_rng(0)
centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
parts = [np.concatenate([rng.normal(c, 0.3, (20, 2)) for c in centres]) for _ in range(3)]


def run(**settings):
    config = RunConfig.from_mapping({"k": 3, "seed": 0, **settings})
    return build_strategy(config).fit(InMemoryFederation(parts)).centroids


kfed = run(algorithm="kfed")
assert np.array_equal(run(algorithm="probe"), kfed)
shifted = run(algorithm="probe", **{"probe-shift": 100.0})
assert np.allclose(np.sort(shifted, axis=0), np.sort(kfed, axis=0) + 100.0), shifted
try:
    RunConfig.from_mapping({"algorithm": "probe", "probe-shift": -1.0})
except ValueError as exc:
    assert "probe-shift" in str(exc), exc
else:
    raise AssertionError("the new setting's range is not checked")
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
    done = subprocess.run([sys.executable, "-c", RUN, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
