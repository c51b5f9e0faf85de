"""The layers hold: every folder stands in one layer, none imports a layer above it, no two
folders import each other, only the Flower adapters import Flower, and the light processes
(a client's, the kernels', ``fedcluster inspect``) load only what they use."""

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
               "fedcluster.federation.base", "fedcluster.client.memory", "fedcluster.local",
               "fedcluster.client.respond", "fedcluster.estimator", "fedcluster.config",
               "fedcluster.report")

#: The package's layers from the ground up. Each folder or top-level module stands in one and
#: imports only from its own layer or those below; a new folder or module must be placed here.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the ground floor", ("_version", "_lazy", "logs", "numerics", "data", "metrics", "results", "proto",
                          "charts")),
    ("the contract both sides share", ("messages", "privacy", "options", "federation")),
    ("each side's shared steps", ("local", "strategies")),
    ("the methods", ("methods",)),
    ("composition", ("config", "preprocessing", "selection")),
    ("the run's report, which the processes write as they go", ("report",)),
    ("the Flower adapters and the processes", ("protocol", "client", "server", "simulation")),
    ("the faces", ("estimator", "cli", "submit", "bench", "__init__")),
)
LAYER_OF = {unit: level for level, (_, units) in enumerate(LAYERS) for unit in units}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _imports(path: Path, source: str | None = None) -> set[str]:
    """The package's modules that ``path`` (or ``source`` standing there) imports, wherever the
    import stands.

    :func:`ast.walk` visits every node, so an import inside a function or an
    ``if TYPE_CHECKING:`` block counts as much as one at the top.
    ``from package import name`` is an import of ``package.name`` where that
    is a module, else of ``package``.
    """
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text() if source is None else source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.update(f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target
                         for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.split(".")[0] == "fedcluster"}


def _unit(module: str) -> str:
    """The folder or top-level module of the package that ``module`` belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _unit_imports() -> dict[str, dict[str, list[str]]]:
    """Unit -> each other unit it imports -> the imports that say so."""
    edges: dict[str, dict[str, list[str]]] = {}
    for module, path in MODULES.items():
        for target in _imports(path):
            if _unit(target) != _unit(module):
                edges.setdefault(_unit(module), {}).setdefault(_unit(target), []).append(
                    f"{module} imports {target}")
    return edges


def test_the_import_reader_counts_function_local_and_type_checking_imports():
    source = ("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
              "    from ..config import RunConfig\n\n\ndef f():\n"
              "    import fedcluster.estimator\n"
              "    from . import lloyd, assign\n")
    assert _imports(PACKAGE / "numerics" / "probe.py", source) == {
        "fedcluster.config", "fedcluster.estimator", "fedcluster.numerics.lloyd",
        "fedcluster.numerics"}


def test_every_folder_and_module_of_the_package_has_a_layer():
    units = {_unit(module) for module in MODULES}
    assert units == set(LAYER_OF), (sorted(units - set(LAYER_OF)), sorted(set(LAYER_OF) - units))


def test_no_layer_imports_one_above_it():
    wrong = [f"{how} ({LAYERS[LAYER_OF[unit]][0]} -> {LAYERS[LAYER_OF[target]][0]})"
             for unit, targets in _unit_imports().items() for target, hows in targets.items()
             if LAYER_OF[target] > LAYER_OF[unit] for how in hows]
    assert not wrong, "\n".join(wrong)


def test_no_two_folders_import_each_other_at_any_depth():
    """The folders' import graph has no circle (Tarjan's strongly connected components)."""
    edges = _unit_imports()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        for target in edges.get(unit, {}):
            if target not in index:
                visit(target)
                low[unit] = min(low[unit], low[target])
            elif target in stack:
                low[unit] = min(low[unit], index[target])
        if low[unit] == index[unit]:
            component = [stack.pop()]
            while component[-1] != unit:
                component.append(stack.pop())
            if len(component) > 1:
                circles.append([how for a in component for b in component
                                for how in edges.get(a, {}).get(b, [])])

    for unit in sorted(LAYER_OF):
        if unit not in index:
            visit(unit)
    assert not circles, circles


def test_only_the_adapters_import_flower_at_import_time():
    """A module-level ``flwr`` import belongs to the adapters; a face imports Flower where it runs it."""
    wrong = []
    for module, path in MODULES.items():
        for node in ast.parse(path.read_text()).body:
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(name.split(".")[0] == "flwr" for name in names) and (
                    LAYER_OF[_unit(module)] != LAYER_OF["client"]):
                wrong.append(module)
    assert not wrong, wrong


def test_flower_free_modules_load_no_flwr_module():
    script = "\n".join(f"import {m}" for m in FLOWER_FREE) + (
        "\nimport sys\nloaded = sorted(m for m in sys.modules if m.split('.')[0] == 'flwr')"
        "\nassert not loaded, loaded[:5]\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


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
    assert all(m in ("fedcluster", "fedcluster._version", "fedcluster._lazy")
               or m.startswith("fedcluster.numerics") for m in loaded), loaded


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
    no strategy, no round loop, no composition or face, no SciPy optimiser, no torch, no
    secure-aggregation stage code. Of the methods it loads what declares their request kinds and
    computes their steps."""
    loaded = modules_loaded_by("fedcluster.client.app")
    server_side = [m for m in loaded if m.startswith((
        "fedcluster.strategies", "fedcluster.server", "fedcluster.config", "fedcluster.estimator",
        "fedcluster.selection", "fedcluster.preprocessing", "fedcluster.simulation"))]
    assert not server_side, server_side
    methods = [m for m in loaded if m.startswith("fedcluster.methods.") and m.count(".") == 3]
    assert methods and all(m.rpartition(".")[2] in ("client", "options", "kernels")
                           for m in methods), methods
    assert "scipy.optimize" not in loaded and "torch" not in loaded
    # Secure aggregation's stage code comes with the first stage a client runs, not with every
    # client process (its names, which route a request, live apart).
    assert "fedcluster.privacy.secagg" not in loaded and "fedcluster.privacy.secagg_names" in loaded


def test_inspecting_a_model_file_loads_no_server_side_and_no_flower(tmp_path):
    """``fedcluster inspect`` reads a file and prints it: no Flower, no strategy, no method, no
    run config (pydantic), no torch, SciPy, numba or matplotlib."""
    import numpy as np

    from fedcluster.results import RunResult
    from fedcluster.server.artifacts import write_run

    write_run(RunResult(algorithm="dwf", settings={"algorithm": "dwf", "k": 2},
                        centroids=np.zeros((2, 2)), counts=np.ones(2), score=0.5, n_points=2,
                        rounds=1, converged=True, best_restart=0, history=[]), tmp_path)
    script = ("import contextlib, io, sys\nfrom fedcluster.cli import main\n"
              "with contextlib.redirect_stdout(io.StringIO()):\n"
              f"    assert main(['inspect', {str(tmp_path / 'model.pb')!r}]) == 0\n"
              "print('\\n'.join(sorted(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.split()
    heavy = [m for m in loaded if m.split(".")[0] in ("flwr", "ray", "torch", "scipy", "numba",
                                                      "pydantic", "matplotlib")
             or m.startswith(("fedcluster.strategies", "fedcluster.estimator",
                              "fedcluster.simulation", "fedcluster.server.app",
                              "fedcluster.server.flower", "fedcluster.methods",
                              "fedcluster.config", "fedcluster.options", "fedcluster.submit"))]
    assert not heavy, heavy[:10]


def test_each_method_declares_the_options_its_strategy_takes():
    from fedcluster.methods import METHODS

    for name, method in METHODS.items():
        assert method.strategy.Options is method.options, name


def test_the_sum_forms_the_methods_declare_are_those_their_servers_ask_for():
    from fedcluster.methods import METHODS, SUM_FORMS

    assert SUM_FORMS == ("dwf", "ewf", "fedkmeans", "ffcm-avg1")
    for name in SUM_FORMS:
        assert METHODS[name].strategy.sums_type == METHODS[name].sum_form, name


def test_the_texts_that_list_methods_by_a_flag_list_the_registrys():
    """The method lists a flag of :class:`Method` defines are written out in the settings'
    descriptions and the README: each names exactly the methods the registry derives."""
    from fedcluster.config import RunConfig
    from fedcluster.methods import FEATURE_CLUSTERINGS, SUM_FORMS

    readme = (PACKAGE.parent / "README.md").read_text()
    fields = RunConfig.model_fields
    sum_forms = ", ".join(SUM_FORMS)
    for text in (fields["dp"].description, fields["secure_aggregation"].description):
        assert f"{sum_forms} in their one-step sum form" in text, text
    assert f"`--secure-aggregation true` ({sum_forms})" in readme
    assert f"`--dp central` or `distributed` ({sum_forms};" in readme
    baselines = ", ".join(name for name in FEATURE_CLUSTERINGS if name != "feca")
    assert f"Table 3: {baselines} with one round" in fields["feature_clustering"].description
    assert f"`--feature-clustering` {baselines})" in readme


def test_every_array_a_summary_declares_travels_through_the_codec():
    """The shared reply arrays are declared once, as ClientSummary's array fields, and a
    method's own in its :class:`Method` (ClientSummary.own): the codec carries each of them
    without a list of its own, so a method's new array touches no shared module."""
    from dataclasses import replace

    import numpy as np

    from fedcluster.messages import SUMMARY_ARRAYS, ClientSummary, validate_reply
    from fedcluster.protocol import decode_reply, reply_content

    assert {"centroids", "counts", "radii", "sums"} <= set(SUMMARY_ARRAYS)
    rng = np.random.default_rng(0)
    summary = ClientSummary(n=7, **{name: rng.random(3) for name in SUMMARY_ARRAYS})
    own = {"spread": rng.random(3), "centroids": rng.random((3, 2))}  # no shared name shadowed
    decoded = decode_reply(reply_content(replace(summary, own=own)))
    for name in SUMMARY_ARRAYS:
        np.testing.assert_array_equal(getattr(decoded, name), getattr(summary, name), err_msg=name)
    assert decoded.own.keys() == own.keys()
    for name, value in own.items():
        np.testing.assert_array_equal(decoded.own[name], value, err_msg=name)
    assert decode_reply(reply_content(summary)).own is None
    # A method that declares none of them reads none: the reply check drops them unread.
    assert validate_reply(ClientSummary(n=7, counts=np.ones(3), own=decoded.own), k=3).own is None
