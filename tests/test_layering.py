"""The layers hold: only the Flower adapters import Flower, and no layer imports one above it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "fedcluster"

#: Modules that must run without Flower: kernels, metrics, every method, the shared server
#: side, the messages, the in-memory federation, the clients' answers, the estimator and the
#: run report.
FLOWER_FREE = ("fedcluster.numerics", "fedcluster.metrics", "fedcluster.methods",
               "fedcluster.strategies", "fedcluster.messages", "fedcluster.results",
               "fedcluster.federation.base", "fedcluster.client.memory",
               "fedcluster.client.respond", "fedcluster.estimator", "fedcluster.config",
               "fedcluster.report")

#: Folder -> folders of the package it may not import (the layers below it never import it).
BELOW = {
    "numerics": ("strategies", "methods", "federation", "client", "server", "bench", "metrics"),
    "metrics": ("strategies", "methods", "federation", "client", "server", "bench"),
    "data": ("strategies", "methods", "federation", "client", "server", "bench"),
    "strategies": ("federation.flower", "federation.memory", "client", "server", "bench"),
}


def test_flower_free_modules_load_no_flwr_module():
    script = "\n".join(f"import {m}" for m in FLOWER_FREE) + (
        "\nimport sys\nloaded = sorted(m for m in sys.modules if m.split('.')[0] == 'flwr')"
        "\nassert not loaded, loaded[:5]\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


def _imports(path: Path) -> set[str]:
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module.removesuffix(".__init__")
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_no_layer_imports_one_above_it():
    wrong = []
    for folder, above in BELOW.items():
        for path in (PACKAGE / folder).rglob("*.py"):
            for target in _imports(path):
                if any(target == f"fedcluster.{a}" or target.startswith(f"fedcluster.{a}.")
                       for a in above):
                    wrong.append(f"{path.relative_to(PACKAGE.parent)} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_fedcluster_and_every_other_method_load_no_torch():
    """PyTorch is DeepFeCA's optional extra: the package, its apps and the other methods run without it."""
    script = (
        "import sys\n"
        "import fedcluster, fedcluster.cli, fedcluster.client.app, fedcluster.server.app\n"
        "from fedcluster.methods import METHODS\n"
        "from fedcluster.client.memory import InMemoryFederation\n"
        "import numpy as np\n"
        "X = np.random.default_rng(0).normal(size=(200, 2))\n"
        "for name, method in METHODS.items():\n"
        "    strategy = method.strategy(algorithm=name, k=3, num_server_rounds=2)\n"
        "    if method.extra is None:\n"
        "        strategy.fit(InMemoryFederation([X[:100], X[100:]]))\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'torch')\n"
        "assert not loaded, loaded[:5]\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr


def modules_loaded_by(module: str) -> list[str]:
    """Every module a fresh interpreter holds after ``import module``."""
    script = f"import sys\nimport {module}\nprint('\\n'.join(sorted(sys.modules)))\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_numerical_kernels_load_only_themselves():
    """``import fedcluster.numerics`` (every client's kernels) loads no method, client or privacy module.

    The package's public names are imported on first use and ``__version__``
    lives in a leaf module, so the ground floor pays for nothing above it.
    """
    loaded = [m for m in modules_loaded_by("fedcluster.numerics") if m.split(".")[0] == "fedcluster"]
    assert len(loaded) <= 20, loaded
    assert all(m in ("fedcluster", "fedcluster._version") or m.startswith("fedcluster.numerics")
               for m in loaded), loaded


def test_the_package_names_its_public_api_lazily():
    import fedcluster

    assert fedcluster.FederatedKMeans.__name__ == "FederatedKMeans"
    assert callable(fedcluster.select_k)
    try:
        fedcluster.no_such_name  # noqa: B018 - the attribute access is the test
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown attribute must raise AttributeError")


def test_the_client_app_loads_no_server_side():
    """A client process (Flower starts one per message in a deployment) imports the steps only:
    no strategy, no round loop, no SciPy optimiser, no torch."""
    loaded = modules_loaded_by("fedcluster.client.app")
    server_side = [m for m in loaded if m.startswith(("fedcluster.strategies", "fedcluster.server",
                                                      "fedcluster.strategies.private"))
                   or (m.startswith("fedcluster.methods.") and m.endswith(".strategy"))]
    assert not server_side, server_side
    assert "scipy.optimize" not in loaded and "torch" not in loaded


def test_each_method_declares_the_options_its_strategy_takes():
    from fedcluster.methods import METHODS

    for name, method in METHODS.items():
        assert method.strategy.Options is method.options, name


def test_the_sum_forms_the_methods_declare_are_those_their_servers_ask_for():
    from fedcluster.methods import METHODS
    from fedcluster.privacy.options import SUM_FORM

    declared = {name for name, method in METHODS.items() if method.sum_form}
    assert declared == set(SUM_FORM)
    for name in declared:
        assert METHODS[name].strategy.sums_type == METHODS[name].sum_form, name


def test_every_array_a_summary_declares_travels_through_the_codec():
    """The reply arrays are declared once, as ClientSummary's array fields: the codec carries
    each of them without a list of its own (a new array is a new field, nothing else)."""
    import numpy as np

    from fedcluster.messages import SUMMARY_ARRAYS, ClientSummary
    from fedcluster.protocol import decode_reply, reply_content

    assert {"centroids", "counts", "radii", "sums"} <= set(SUMMARY_ARRAYS)
    rng = np.random.default_rng(0)
    summary = ClientSummary(n=7, **{name: rng.random(3) for name in SUMMARY_ARRAYS})
    decoded = decode_reply(reply_content(summary))
    for name in SUMMARY_ARRAYS:
        np.testing.assert_array_equal(getattr(decoded, name), getattr(summary, name), err_msg=name)
