"""Running a benchmark grid: every run in-process, both cores, resumable.

Each run partitions its dataset, writes one file per client, and drives the
method's Flower strategy and the unchanged ClientApp through
:class:`~fedcluster.server.inprocess.InProcessGrid`: the same code as a Flower
simulation or a deployment, without Ray's start-up. The quality metrics are
computed federatedly (each client's sufficient statistics, combined; labels
never leave a client) by :mod:`fedcluster.metrics`.

Finished runs are appended, one JSON object per line, to ``runs.jsonl`` in the
output directory, which ``runs.csv`` mirrors; a grid started again skips the
runs it finds there.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import multiprocessing
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..data import Dataset, atomic_write, partition_indices, write_partitions
from .datasets import load_spec
from .spec import Grid, RunSpec

RUNS_LOG = "runs.jsonl"
RUNS_CSV = "runs.csv"
#: Columns that describe a run; the metric columns follow them.
RUN_COLUMNS = ("run_id", "method", "algorithm", "dataset", "split", "clients", "seed", "setting",
               "rounds", "converged", "n_clusters", "wall_s", "error")


@lru_cache(maxsize=8)
def cached_dataset(spec: str, seed: int) -> Dataset:
    """The dataset ``spec`` names, loaded once per process."""
    return load_spec(spec, seed=seed)


@lru_cache(maxsize=64)
def cached_partition(spec: str, split: str, clients: int, seed: int) -> tuple[np.ndarray, ...]:
    """The split of a dataset, computed once per process (methods and settings share it).

    One client holds every row whatever the split: that is how a grid runs its
    centralized baseline in each split's column (a split such as ``by-label``
    would refuse one client).
    """
    data = cached_dataset(spec, seed)
    if clients == 1:
        return (np.arange(len(data.X)),)
    return tuple(partition_indices(len(data.X), clients, split, labels=data.labels,
                                   points=data.X, seed=seed))


def execute(run: RunSpec) -> dict[str, Any]:
    """Run one grid cell and return its row (an ``error`` entry if it failed)."""
    # Imported here: rendering a report from finished runs needs no Flower.
    from ..client.app import build_client_app
    from ..metrics import combine, local_statistics
    from ..server.inprocess import InProcessGrid
    from ..strategies import build_strategy

    row: dict[str, Any] = {"run_id": run.run_id, "method": run.method,
                           "algorithm": run.settings["algorithm"], "dataset": run.dataset,
                           "split": run.split, "clients": run.clients, "seed": run.seed,
                           "setting": run.setting}
    started = time.perf_counter()
    try:
        data = cached_dataset(run.dataset, run.seed)
        parts = cached_partition(run.dataset, run.split, run.clients, run.seed)
        with tempfile.TemporaryDirectory(prefix="fedcluster-bench-") as tmp:
            files = write_partitions(data.X, parts, tmp)
            grid = InProcessGrid(build_client_app(), [{"data-path": str(f)} for f in files])
            result = build_strategy(run.config()).fit(grid)
        wall = time.perf_counter() - started
        labels = data.labels
        stats = [local_statistics(data.X[p], result.centroids,
                                  None if labels is None else labels[p]) for p in parts]
        metrics = combine(stats, result.centroids, true_centres=data.true_centers)
        row.update(rounds=result.rounds, converged=result.converged,
                   n_clusters=len(result.centroids), wall_s=round(wall, 4), error="", **metrics,
                   centroids=result.centroids.tolist(),
                   history=[r.score for r in result.history if r.phase == "train"])
    except Exception as exc:  # noqa: BLE001 - one failed cell must not stop the grid
        row.update(wall_s=round(time.perf_counter() - started, 4),
                   error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
    return row


def finished_runs(out_dir: Path) -> dict[str, dict[str, Any]]:
    """The rows already in ``out_dir/runs.jsonl``, by run id (failed runs are left out)."""
    path = out_dir / RUNS_LOG
    rows: dict[str, dict[str, Any]] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                if not row.get("error"):
                    rows[row["run_id"]] = row
    return rows


def run_grid(
    grid: Grid,
    out_dir: str | Path,
    *,
    workers: int = 2,
    progress: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Run every run of ``grid`` that ``out_dir`` does not hold yet; return all rows.

    Parameters
    ----------
    grid : Grid
        The parsed grid.
    out_dir : path
        Where ``runs.jsonl`` and ``runs.csv`` go (created if missing).
    workers : int
        Worker processes (runs in parallel); 1 runs everything in this process.
    progress : callable
        Receives one line per finished run.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    done = finished_runs(out)
    pending = [run for run in grid.runs if run.run_id not in done]
    progress(f"{grid.name}: {len(grid.runs)} runs, {len(done)} already done, {len(pending)} to run "
             f"with {workers} worker(s)")
    started = time.perf_counter()
    with open(out / RUNS_LOG, "a", encoding="utf-8") as log:
        for i, row in enumerate(_rows(pending, workers), start=1):
            log.write(json.dumps(row, default=_json_value) + "\n")
            log.flush()
            if not row.get("error"):
                done[row["run_id"]] = row
            elapsed = time.perf_counter() - started
            eta = elapsed / i * (len(pending) - i)
            status = row["error"] or (f"score {row.get('score', math.nan):.4g}, "
                                      f"{row['rounds']} rounds, {row['wall_s']:.2f} s")
            progress(f"[{i}/{len(pending)}, eta {eta:.0f} s] {row['method']} {row['setting']} "
                     f"{row['dataset']} {row['split']} seed {row['seed']}: {status}")
    rows = grid_rows(grid, out)
    write_csv(rows, out / RUNS_CSV)
    return rows


def grid_rows(grid: Grid, out_dir: str | Path) -> list[dict[str, Any]]:
    """The finished rows of ``grid``'s runs in ``out_dir``, in the grid's order."""
    done = finished_runs(Path(out_dir))
    return [done[run.run_id] for run in grid.runs if run.run_id in done]


def _quiet_flower() -> None:
    """Keep the strategies' per-round log lines out of a grid's progress."""
    logging.getLogger("flwr").setLevel(logging.WARNING)


def _rows(runs: list[RunSpec], workers: int) -> Iterable[dict[str, Any]]:
    if workers <= 1:
        logger = logging.getLogger("flwr")
        level = logger.level
        _quiet_flower()
        try:
            yield from map(execute, runs)
        finally:
            logger.setLevel(level)
        return
    # Spawned workers: Flower's gRPC and logging threads do not survive a fork well.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context,
                             initializer=_quiet_flower) as pool:
        for future in as_completed([pool.submit(execute, run) for run in runs]):
            yield future.result()


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """One row per run: the run's columns, then every metric any run has."""
    metrics = sorted({key for row in rows for key, value in row.items()
                      if key not in RUN_COLUMNS and isinstance(value, (int, float))})
    with atomic_write(path, "w") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*RUN_COLUMNS, *metrics], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def _json_value(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")
