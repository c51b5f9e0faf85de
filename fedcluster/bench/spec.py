"""Benchmark grids described in TOML, expanded into single runs.

A grid file names datasets, splits, methods (each with settings and optional
parameter lists to sweep) and seeds; every combination is one run::

    name = "feca-table1"
    seeds = 10                        # or a list: [0, 1, 2]
    clients = 10
    datasets = ["s1", "s2", "s3", "s4"]
    splits = ["iid", "dirichlet:0.3"]
    k = 15                            # default k of every method (else each dataset's own, below)
    best-of = 5                       # optional: tables also over each cell's 5 lowest-score runs

    [[methods]]
    label = "FeCA"
    algorithm = "feca"

    [[methods]]
    label = "DWF"
    algorithm = "dwf"
    settings = { local-steps = 5 }
    sweep = { clients-per-round = [5, 10, 20] }   # one run per value

    [[methods]]
    label = "centralized k-means"
    algorithm = "dwf"
    clients = 1                       # one client holding all data: the centralized baseline
    settings = { n-init = 10 }        # (a split of one client is the whole dataset)

    [[tables]]                        # what the report shows (default: the score)
    metric = "centre_distance"
    scale = 1e4                       # shown divided by this
    kind = "grid"                     # or "quantiles" (quantiles over all runs per method)

    [[published]]                     # numbers from the paper, shown beside ours
    method = "FeCA"
    dataset = "s1"
    split = "iid"
    metric = "centre_distance"
    value = "1.0e4 ± 0.1e4"

Settings are run-config keys (:class:`fedcluster.config.RunConfig`); each run is
validated before anything starts. Datasets take generator parameters as
``"name?key=value&key=value"`` (see :func:`fedcluster.data.load_dataset`);
``data-seed=S`` fixes a generated dataset across the grid's seeds.

The number of clusters
----------------------
A method's ``k`` comes from its ``sweep``, else its ``settings``, else the
grid's ``k``. Where none gives it, each run uses its dataset's own number:
the number of true centres when the dataset has them, else its number of
distinct labels (:attr:`fedcluster.data.Dataset.known_k`; for ``s1`` 15, for
``digits`` 10, for ``triebe`` its ``clusters``, not its clients). The grid
loads each dataset once to count (per seed for a generated one), and a
dataset with neither labels nor centres is an error when the grid is loaded.

Data files
----------
A dataset may be a data file (``.npy``, ``.npz``, ``.csv``, ``.txt``; see
:mod:`fedcluster.data.files`), its path relative to the directory
``fedcluster bench`` runs in (or absolute)::

    datasets = ["data/points.npz", "data/patients.csv?label-column=diagnosis"]

An ``.npz`` file gives its points in ``X``, labels in ``y`` and true centres
in ``centers`` (shape ``(k, d)``); with centres the runs report
``centre_distance`` and the knowledge gaps. A CSV file names its label column
with ``?label-column=NAME`` (otherwise a column named ``label`` holds the
labels; ``?label-column=`` reads every column as a feature); the labels feed
the label-based splits (``dirichlet:ALPHA``, ``by-label``,
``clusters-per-client:...``) and the label metrics, and never leave a client.
A file is fixed data: the seeds change the split and the method, not the rows.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import DATA_OPTIONS, RunConfig
from ..data.partition import parse_split
from .datasets import load_spec

#: Run-config keys a method's settings or sweep may not set: the grid sets the data, split
#: and seeds, the harness where results go, and a grid resumes by running again (it skips
#: the runs it finished), not from one run's checkpoint. Every other key applies to each run
#: (``standardize`` through :func:`~fedcluster.preprocessing.fit_method`).
RESERVED = (*DATA_OPTIONS, "seed")


@dataclass(frozen=True)
class Published:
    """A published figure to show beside ours."""

    method: str
    dataset: str
    split: str
    metric: str
    value: str
    setting: str = ""


@dataclass(frozen=True)
class RunSpec:
    """One run of a grid.

    Attributes
    ----------
    method : str
        The method's label in the grid.
    dataset, split : str
        Dataset specification and split.
    clients : int
        Number of clients.
    seed : int
        Seed of the split and of the method.
    settings : dict
        Run-config settings (validated).
    setting : str
        The swept parameter values of this run, as ``key=value`` text ("" if none).
    """

    method: str
    dataset: str
    split: str
    clients: int
    seed: int
    settings: dict[str, Any]
    setting: str = ""

    @property
    def run_id(self) -> str:
        """A stable id of the run's configuration (resuming a grid skips ids it has)."""
        text = json.dumps([self.method, self.dataset, self.split, self.clients, self.seed,
                           sorted(self.settings.items())], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def config(self, out_dir: str = "") -> RunConfig:
        """The validated run configuration of this run."""
        return RunConfig.from_mapping({**self.settings, "seed": self.seed, "split": self.split,
                                       "out-dir": out_dir or "."})


@dataclass(frozen=True)
class Grid:
    """A parsed grid file."""

    name: str
    runs: tuple[RunSpec, ...]
    published: tuple[Published, ...] = ()
    best_of: int = 0
    tables: tuple[dict[str, Any], ...] = ()


#: Kinds of ``[[tables]]`` entry (see :mod:`fedcluster.bench.report`).
TABLE_KINDS = ("grid", "quantiles")


def load_grid(path: str | Path) -> Grid:
    """Parse and validate a grid file.

    Raises
    ------
    ValueError
        A missing or misspelt key, or a run whose settings are invalid (named).
    """
    path = Path(path)
    try:
        spec = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"grid {path}: cannot read it ({exc})") from None
    known = {"name", "seeds", "clients", "datasets", "splits", "k", "methods", "published",
             "best-of", "tables"}
    if unknown := set(spec) - known:
        raise ValueError(f"grid {path}: unknown keys {sorted(unknown)} (known: {sorted(known)})")
    for key in ("name", "datasets", "methods"):
        if key not in spec:
            raise ValueError(f"grid {path}: '{key}' is missing")
    seeds = spec.get("seeds", 1)
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    splits = spec.get("splits", ["iid"])
    for split in splits:
        parse_split(split)
    runs = []
    known_k: dict[tuple[str, int], int] = {}  # (dataset, seed) -> k, shared by the methods
    for method in spec["methods"]:
        runs.extend(_method_runs(path, spec, method, seeds, splits, known_k))
    published = tuple(Published(**{k.replace("-", "_"): v for k, v in p.items()})
                      for p in spec.get("published", []))
    tables = tuple(spec.get("tables", [{"metric": "score"}]))
    for table in tables:
        if set(table) - {"metric", "kind", "scale"} or "metric" not in table:
            raise ValueError(f"grid {path}: a table takes 'metric', 'kind' and 'scale', got {table}")
        if table.get("kind", "grid") not in TABLE_KINDS:
            raise ValueError(f"grid {path}: table kind must be one of {', '.join(TABLE_KINDS)}, "
                             f"got {table['kind']!r}")
    best_of = spec.get("best-of", 0)
    if not isinstance(best_of, int) or isinstance(best_of, bool) or not 0 <= best_of <= len(seeds):
        raise ValueError(f"grid {path}: best-of must be an integer from 0 (off) to the number of "
                         f"seeds, {len(seeds)}; got {best_of!r}")
    return Grid(name=spec["name"], runs=tuple(runs), published=published, best_of=best_of,
                tables=tables)


def _method_runs(path: Path, spec: dict, method: dict, seeds: list[int], splits: list[str],
                 known_k: dict[tuple[str, int], int]):
    unknown = set(method) - {"label", "algorithm", "settings", "sweep", "clients", "datasets", "splits"}
    if unknown:
        raise ValueError(f"grid {path}: method {method.get('label')!r} has unknown keys {sorted(unknown)}")
    label = method.get("label") or method["algorithm"]
    settings = {"algorithm": method["algorithm"], **method.get("settings", {})}
    if "k" in spec:
        settings.setdefault("k", spec["k"])
    sweep = method.get("sweep", {})
    if reserved := (set(settings) | set(sweep)) & set(RESERVED):
        raise ValueError(f"grid {path}: method {label!r} sets {sorted(reserved)}, which a run of "
                         f"a grid cannot take (the grid sets the data, split and seeds; a grid "
                         f"resumes by running again)")
    dataset_k = "k" not in settings and "k" not in sweep  # k from each run's dataset
    keys = sorted(sweep)
    clients = method.get("clients", spec.get("clients", 10))
    for values in itertools.product(*(sweep[k] for k in keys)):
        swept = dict(zip(keys, values))
        setting = " ".join(f"{k}={v}" for k, v in swept.items())
        run_clients = swept.pop("clients", clients)
        for dataset in method.get("datasets", spec["datasets"]):
            for split in method.get("splits", splits):
                for seed in seeds:
                    run_settings = {**settings, **swept}
                    if dataset_k:
                        run_settings["k"] = _dataset_k(path, dataset, int(seed), known_k)
                    run = RunSpec(label, dataset, split, int(run_clients), int(seed),
                                  run_settings, setting)
                    run.config()  # validate now, not in the middle of the grid
                    yield run


def _dataset_k(path: Path, dataset: str, seed: int, known_k: dict[tuple[str, int], int]) -> int:
    """The number of clusters of ``dataset`` as drawn for ``seed`` (see the module docstring)."""
    if (dataset, seed) not in known_k:
        try:
            data = load_spec(dataset, seed=seed)
        except (ValueError, OSError) as exc:  # DataError is a ValueError
            raise ValueError(
                f"grid {path}: no k given, so the number of clusters is the dataset's, but "
                f"dataset {dataset!r} cannot be loaded: {exc}") from None
        k = data.known_k
        if k is None:
            raise ValueError(
                f"grid {path}: no k given, and dataset {dataset!r} has neither labels nor true "
                f"centres to take it from; set k in the grid (k = 15) or in the method's "
                f"settings, or give the data file labels (a CSV file: "
                f"'{dataset.partition('?')[0]}?label-column=NAME'; an .npz file: arrays 'y' "
                f"or 'centers')")
        known_k[(dataset, seed)] = k
    return known_k[(dataset, seed)]
