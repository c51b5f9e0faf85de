"""Running a benchmark grid: every run in-process, both cores, resumable.

Each run partitions its dataset and runs the method's strategy over an
:class:`~fedcluster.client.memory.InMemoryFederation`: the clients answer
with the same code as in a Flower simulation or a deployment (which gives the
same result with full participation), without messages or Ray's start-up.
The quality metrics are computed federatedly (each client's sufficient
statistics, combined; labels never leave a client) by :mod:`fedcluster.metrics`.

Memory. A grid runs many federations in one process (per worker), so a run
must leave nothing behind. The clients' rows are not written to files: the
run copies the dataset's rows once, in partition order, gives each client a
view of its slice, and drops them when the run ends. A worker
so holds at most the dataset (loaded once per process: fixed datasets are
cached under one key whatever the run's seed, generated ones per draw, at most
:data:`DATASET_CACHE` draws) and one run's partitioned copy: about twice the
data of one run, however many runs the grid has (``BENCHMARKS.md``, "Memory of
a grid"). A single client holding everything (the centralized baseline) is
served the dataset itself, without a copy.

Partitions. Runs that share a partition (dataset, split, clients, seed; the
methods and settings of a grid) run one after the other, and the partition is
computed once per grid, as a task of its own in a worker, and handed to the
workers with the runs: a split such as ``kmeans-noniid`` of MNIST costs a
minute or more of k-means, which every worker would otherwise repeat, for every
method, as its cache of partitions cycled through the grid's seeds. The next
partitions are computed while the runs of the previous ones run, so no worker
waits for one; with several workers the grid's own process never loads the data.

Threads. Each of ``workers`` worker processes limits its BLAS and numba thread
pools to its share of the cores (``cores // workers``, at least 1): two workers
each running the Lloyd kernel and BLAS products on both cores of a 2-core
machine slow each other down (OpenBLAS threads spin while they wait: one DWF
run on MNIST took 42 s of CPU with two BLAS threads, 22 s with one). The
kernel's result does not depend on its thread count.

Output. The strategies log every round through Flower's logger; a grid hides
these lines (and every Flower line below WARNING) unless ``verbose``. Importing
Flower sets its logger to DEBUG, so the level is set after that import, in each
worker process.

Every run, finished or failed, is appended as one JSON object per line to
``runs.jsonl`` in the output directory; ``runs.csv`` holds one row per run of
the grid that has been tried, in the grid's order: the finished row, or the
latest failure with its ``error`` column filled. A grid started again skips the
runs that finished and retries the failed ones.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import numpy as np

from ..data import Dataset, atomic_write, partition_indices
from ..logs import colour_only_on_a_terminal, counted
from .datasets import data_seed, load_spec
from .spec import Grid, RunSpec

RUNS_LOG = "runs.jsonl"
RUNS_CSV = "runs.csv"
#: Columns that describe a run; the metric columns follow them.
RUN_COLUMNS = ("run_id", "method", "algorithm", "dataset", "split", "clients", "seed", "setting",
               "rounds", "converged", "n_clusters", "wall_s", "error")


#: Datasets (draws of a generated one) a process keeps loaded.
DATASET_CACHE = 2


def cached_dataset(spec: str, seed: int) -> Dataset:
    """The dataset ``spec`` names for a run with ``seed``, loaded once per process.

    Runs that see the same data share one entry: a shipped dataset or a file
    whatever the seed, a generated one per draw (its ``data-seed`` or the run's
    seed; see :func:`~fedcluster.bench.datasets.data_seed`).
    """
    return _load_dataset(spec, data_seed(spec, seed))


@lru_cache(maxsize=DATASET_CACHE)
def _load_dataset(spec: str, seed: int) -> Dataset:
    return load_spec(spec, seed=seed)


@lru_cache(maxsize=8)
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


def execute(run: RunSpec, parts: tuple[np.ndarray, ...] | None = None) -> dict[str, Any]:
    """Run one grid cell and return its row (an ``error`` entry if it failed).

    ``parts``: the run's partition (row indices per client) where the caller has
    it; computed here otherwise. A run whose settings say ``standardize = true``
    standardises federatedly first, as ``fedcluster run`` does
    (:func:`~fedcluster.preprocessing.fit_method`), and its metrics are of the
    units the method clustered, as the estimator's score is: the standardised
    rows and true centres (its ``centroids`` are the standardised ones too).
    """
    # Imported here: rendering a report from finished runs needs no client code.
    from ..client.memory import InMemoryFederation
    from ..metrics import combine, local_statistics
    from ..preprocessing import fit_method, in_clustered_units

    row: dict[str, Any] = {"run_id": run.run_id, "method": run.method,
                           "algorithm": run.settings["algorithm"], "dataset": run.dataset,
                           "split": run.split, "clients": run.clients, "seed": run.seed,
                           "setting": run.setting}
    started = time.perf_counter()
    try:
        data = cached_dataset(run.dataset, run.seed)
        if parts is None:
            parts = cached_partition(run.dataset, run.split, run.clients, run.seed)
        rows, labels = client_rows(data, parts)
        result = fit_method(run.config(), InMemoryFederation(rows))
        wall = time.perf_counter() - started
        # One client's standardised rows at a time (see "Memory" above).
        stats = [local_statistics(in_clustered_units(X, result), result.centroids, y)
                 for X, y in zip(rows, labels)]
        del rows
        true_centres = (None if data.true_centers is None
                        else in_clustered_units(data.true_centers, result))
        metrics = combine(stats, result.centroids, true_centres=true_centres)
        row.update(rounds=result.rounds, converged=result.converged,
                   n_clusters=len(result.centroids), wall_s=round(wall, 4), error="", **metrics,
                   centroids=result.centroids.tolist(),
                   history=[r.score for r in result.history if r.phase == "train"])
    except Exception as exc:  # noqa: BLE001 - one failed cell must not stop the grid
        row.update(wall_s=round(time.perf_counter() - started, 4),
                   error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
    return row


def client_rows(data: Dataset, parts: tuple[np.ndarray, ...]
                ) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
    """Each client's rows and labels: views of one copy of the data in partition order.

    One allocation of the data's size instead of one per client; a single
    client holding every row in order gets the dataset itself (no copy).
    """
    order = np.concatenate(parts) if len(parts) > 1 else parts[0]
    whole = len(order) == len(data.X) and bool(np.all(order == np.arange(len(order))))
    X = data.X if whole else data.X[order]
    y = data.labels if whole or data.labels is None else data.labels[order]
    if len(parts) == 1:
        return [X], [y]
    bounds = np.cumsum([len(p) for p in parts])[:-1]
    rows = np.split(X, bounds)
    labels = [None] * len(parts) if y is None else np.split(y, bounds)
    return rows, labels


def _read_log(out_dir: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """``(finished, failed)`` rows of ``out_dir/runs.jsonl`` by run id; the latest failure of each
    run that never finished."""
    path = out_dir / RUNS_LOG
    finished: dict[str, dict[str, Any]] = {}
    failed: dict[str, dict[str, Any]] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                (failed if row.get("error") else finished)[row["run_id"]] = row
    return finished, {key: row for key, row in failed.items() if key not in finished}


def finished_runs(out_dir: Path) -> dict[str, dict[str, Any]]:
    """The rows already in ``out_dir/runs.jsonl``, by run id (failed runs are left out)."""
    return _read_log(out_dir)[0]


def failed_runs(out_dir: Path) -> dict[str, dict[str, Any]]:
    """The latest failure of every run in ``out_dir/runs.jsonl`` that has not finished, by run id."""
    return _read_log(out_dir)[1]


def run_grid(
    grid: Grid,
    out_dir: str | Path,
    *,
    workers: int = 2,
    progress: Callable[[str], None] = print,
    verbose: bool = False,
) -> list[dict[str, Any]]:
    """Run every run of ``grid`` that has not finished in ``out_dir``; return all rows.

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
    verbose : bool
        Show Flower's log lines (the strategies' per-round lines among them);
        by default only its warnings and errors.

    Returns
    -------
    list of dict
        One row per run tried, in the grid's order (as ``runs.csv``): the
        finished runs, and the failed ones with their ``error`` filled (a
        failed run is tried again by the next call). Fewer rows than
        ``grid.runs`` only when some run was never tried.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    done = finished_runs(out)
    pending = [run for run in grid.runs if run.run_id not in done]
    progress(f"{grid.name}: {counted(len(grid.runs), 'run')}, {len(done)} already done, "
             f"{len(pending)} to run with {workers} worker(s)")
    started = time.perf_counter()
    with open(out / RUNS_LOG, "a", encoding="utf-8") as log:
        for i, row in enumerate(_rows(pending, workers, verbose), start=1):
            log.write(json.dumps(row, default=_json_value) + "\n")
            log.flush()
            if not row.get("error"):
                done[row["run_id"]] = row
            elapsed = time.perf_counter() - started
            eta = elapsed / i * (len(pending) - i)
            status = row["error"] or (f"score {row.get('score', math.nan):.4g}, "
                                      f"{counted(row['rounds'], 'round')}, {row['wall_s']:.2f} s")
            progress(f"[{i}/{len(pending)}, eta {eta:.0f} s] {row['method']} {row['setting']} "
                     f"{row['dataset']} {row['split']} seed {row['seed']}: {status}")
    rows = grid_rows(grid, out, failed=True)
    write_csv(rows, out / RUNS_CSV)
    return rows


def grid_rows(grid: Grid, out_dir: str | Path, *, failed: bool = False) -> list[dict[str, Any]]:
    """The finished rows of ``grid``'s runs in ``out_dir``, in the grid's order.

    With ``failed``, a run that failed and has not finished since is there too,
    as its latest failure (``error`` filled, no metrics).
    """
    done, errors = _read_log(Path(out_dir))
    if failed:
        done = {**errors, **done}
    return [done[run.run_id] for run in grid.runs if run.run_id in done]


def _flower_logging(verbose: bool) -> int:
    """Hide Flower's lines below WARNING (unless ``verbose``), colour them only on a terminal;
    return the level it had.

    Flower's logger must be imported first: importing Flower sets its level to
    DEBUG, which would undo a level set before (what let every per-round line
    of a spawned worker through).
    """
    from flwr.common.logger import FLOWER_LOGGER

    colour_only_on_a_terminal()
    level = FLOWER_LOGGER.level
    if not verbose:
        FLOWER_LOGGER.setLevel(logging.WARNING)
    return level


def _limit_threads(threads: int) -> None:
    """Use at most ``threads`` threads for BLAS / OpenMP (threadpoolctl, when installed) and numba."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        pass
    else:
        threadpool_limits(threads)
    try:
        import numba
    except ImportError:
        return
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))


def _worker_init(verbose: bool, threads: int) -> None:
    # Ctrl-C reaches the whole process group: the parent answers it and ends the workers,
    # which would otherwise each print a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _flower_logging(verbose)
    _limit_threads(threads)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _partition_key(run: RunSpec) -> tuple:
    """What decides a run's partition (one client holds every row whatever the split)."""
    if run.clients == 1:
        try:
            return (run.dataset, "", 1, data_seed(run.dataset, run.seed))
        except ValueError:  # a bad data-seed: the run fails with that error
            pass
    return (run.dataset, run.split, run.clients, run.seed)


def _by_partition(runs: list[RunSpec]) -> list[list[RunSpec]]:
    """``runs`` in groups that share a partition, in the order of first appearance."""
    groups: dict[tuple, list[RunSpec]] = {}
    for run in runs:
        groups.setdefault(_partition_key(run), []).append(run)
    return list(groups.values())


def _partition_of(run: RunSpec) -> tuple[np.ndarray, ...] | None:
    """The run's partition; None where it cannot be made (the run then fails saying why)."""
    try:
        return cached_partition(run.dataset, run.split, run.clients, run.seed)
    except Exception:  # noqa: BLE001 - execute() records the error as the run's
        return None


def _rows(runs: list[RunSpec], workers: int, verbose: bool = False) -> Iterable[dict[str, Any]]:
    groups = _by_partition(runs)
    if workers <= 1:
        level = _flower_logging(verbose)
        try:
            for group in groups:
                parts = _partition_of(group[0])
                for run in group:
                    yield execute(run, parts)
        finally:
            logging.getLogger("flwr").setLevel(level)
        return
    # Spawned workers: Flower's gRPC and logging threads do not survive a fork well.
    context = multiprocessing.get_context("spawn")
    threads = max(1, _cores() // workers)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context,
                               initializer=partial(_worker_init, verbose, threads))
    try:
        upcoming = iter(groups)
        partitions: dict[Future, list[RunSpec]] = {}  # partition task -> the runs waiting for it
        running: set[Future] = set()

        def next_partition() -> None:
            group = next(upcoming, None)
            if group is not None:
                partitions[pool.submit(_partition_of, group[0])] = group

        # ``workers`` partitions ahead: a worker computes the next one while the others run
        # the runs of the last (the pool takes its tasks in order).
        for _ in range(workers):
            next_partition()
        while partitions or running:
            done, _ = wait([*partitions, *running], return_when=FIRST_COMPLETED)
            for future in done:
                if future in partitions:
                    group = partitions.pop(future)
                    parts = future.result()
                    running.update(pool.submit(execute, run, parts) for run in group)
                    next_partition()
                else:
                    running.discard(future)
                    yield future.result()
    except BaseException:  # Ctrl-C, SIGTERM, or the reader gone: end the runs in flight now
        pool.shutdown(wait=False, cancel_futures=True)
        # The executor has no public way to end a busy worker before Python 3.14.
        for process in list((pool._processes or {}).values()):
            process.terminate()
        raise
    pool.shutdown()


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
