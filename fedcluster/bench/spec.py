"""Benchmark grids described in TOML, expanded into single runs.

A grid file names datasets, splits, methods (each with settings and optional
parameter lists to sweep) and seeds; every combination is one run::

    name = "feca-table1"
    seeds = 10                        # or a list: [0, 1, 2]
    clients = 10
    datasets = ["s1", "s2", "s3", "s4"]
    splits = ["iid", "dirichlet:0.3"]
    k = 15                            # default k of every method (else the dataset's classes)
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
"""

from __future__ import annotations

import hashlib
import itertools
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import RunConfig
from ..data.partition import parse_split

#: Run-config keys a grid may not set: the harness owns where data and results are.
RESERVED = ("out-dir", "dataset", "split", "partitions-dir", "seed")


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
    for method in spec["methods"]:
        runs.extend(_method_runs(path, spec, method, seeds, splits))
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


def _method_runs(path: Path, spec: dict, method: dict, seeds: list[int], splits: list[str]):
    unknown = set(method) - {"label", "algorithm", "settings", "sweep", "clients", "datasets", "splits"}
    if unknown:
        raise ValueError(f"grid {path}: method {method.get('label')!r} has unknown keys {sorted(unknown)}")
    label = method.get("label") or method["algorithm"]
    settings = {"algorithm": method["algorithm"], **method.get("settings", {})}
    if "k" in spec:
        settings.setdefault("k", spec["k"])
    if reserved := set(settings) & set(RESERVED):
        raise ValueError(f"grid {path}: method {label!r} sets {sorted(reserved)}; the grid sets them")
    sweep = method.get("sweep", {})
    keys = sorted(sweep)
    clients = method.get("clients", spec.get("clients", 10))
    for values in itertools.product(*(sweep[k] for k in keys)):
        swept = dict(zip(keys, values))
        setting = " ".join(f"{k}={v}" for k, v in swept.items())
        run_clients = swept.pop("clients", clients)
        for dataset in method.get("datasets", spec["datasets"]):
            for split in method.get("splits", splits):
                for seed in seeds:
                    run = RunSpec(label, dataset, split, int(run_clients), int(seed),
                                  {**settings, **swept}, setting)
                    run.config()  # validate now, not in the middle of the grid
                    yield run
