"""The ``fedcluster`` command line: simulate, partition, bench, inspect, report, submit."""

from __future__ import annotations

import argparse
import contextlib
import json
import itertools
import logging
import math
import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, NoReturn, get_args, get_origin

# Only what `fedcluster inspect` needs is imported here (it should answer at once); every
# other command imports its modules where it runs (the methods, pydantic's run config, the data
# sets, Flower), and the full parser is built only for them (see main).
from ._version import __version__
from .logs import counted
from .server.artifacts import MODEL_FILE, read_model
from .server.presentation import format_result, result_to_dict


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status.

    0: done; 1: the run (or a benchmark run) failed; 2: invalid input. A
    failure prints one line ``fedcluster: error: ...`` on standard error.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser(only=argv[0] if argv[:1] == ["inspect"] else None)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        # The reader went away (`fedcluster inspect model.pb | head`): not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (ValueError, OSError) as exc:  # ConfigError and DataError are ValueErrors
        print(f"fedcluster: error: {exc}", file=sys.stderr)
        return 2


def _simulate(args: argparse.Namespace) -> int:
    from .config import ConfigError, RunConfig
    from .data import write_partitions
    from .options import setting_defaults
    from .privacy.options import check_delta_for_rows
    from .selection import KSelection, parse_k_range
    from .server.run import k_selection_run
    from .simulation import SimulationError, simulate, simulated_round_timeout

    _check_clients(args.clients)
    given = {key: value for key, value in vars(args).items()
             if key in RunConfig.model_fields or key.replace("-", "_") in RunConfig.model_fields}
    # A resumed run writes its files where it left its checkpoint unless told otherwise.
    out = args.out or args.resume or _default_out(args.overwrite)
    dataset, parts = _partitioned(args)
    n, d = dataset.X.shape
    config = RunConfig.from_mapping({
        **_dataset_settings(given, dataset),
        **{key: value for key, value in given.items() if value is not None},
        "out-dir": str(out), "split": args.split, "dataset": args.dataset, "seed": args.seed,
        "min-nodes": args.clients, "resume-from": str(args.resume or ""),
    })
    if given.get("round-timeout") is None:  # the start asks every client, whatever the sampling
        config = config.model_copy(update={"round_timeout": simulated_round_timeout(args.clients)})
    _check_row_length(config, dataset)
    check_delta_for_rows(config, n)
    if args.resume is not None:  # a wrong or damaged checkpoint fails here, before Ray starts
        from .config import build_strategy
        from .server.checkpoint import resume_point

        resume_point(args.resume, build_strategy(config), config.to_flower())
    if args.resume is not None and args.k_range is not None:
        raise ConfigError("--resume continues one run; it does not combine with --k-range")
    run = k_selection_run(args.k_range, args.select)
    # The largest k the run asks for: a k selection runs its range's ks, not --k.
    k, asked = ((max(parse_k_range(args.k_range)), f"--k-range {args.k_range}'s largest k")
                if args.k_range is not None else (config.k, "--k"))
    if k > n:
        raise ConfigError(f"{asked} {k} is more than the {n} points of {dataset.name}")
    _check_feasible(config.min_cluster_size, k, asked, [len(part) for part in parts])
    _check_out(out, replace=args.overwrite or args.resume is not None and
               out.resolve() == args.resume.resolve())
    described = (f"{dataset.name} ({counted(n, 'point')}, {counted(d, 'feature')}), split "
                 f"{args.split} over {counted(args.clients, 'client')}")
    print(f"fedcluster: {config.algorithm}, k = {config.k}, on {described}", flush=True)
    if args.backend == "memory":
        from .federation.base import RunFailed

        try:
            result = _run_in_memory(config, [dataset.X[rows] for rows in parts], run, out,
                                    verbose=args.verbose)
        except RunFailed as exc:  # as the Flower backend says it: one line, no traceback
            print(f"fedcluster: error: {exc}", file=sys.stderr)
            return 1
    else:
        print("fedcluster: starting the Flower simulation (Ray takes a few seconds to start)...",
              flush=True)
        with tempfile.TemporaryDirectory(prefix="fedcluster-partitions-") as tmp:
            write_partitions(dataset.X, parts, tmp, split=args.split, seed=args.seed,
                             dataset=dataset.name)
            _end_at_once_on_signals(out, tmp)
            try:
                result = simulate(config, tmp, args.clients, verbose=args.verbose, run=run,
                                  report=False)
            except SimulationError as exc:
                print(f"fedcluster: error: {exc}", file=sys.stderr)
                return 1
            _end_at_once_on_signals(out, tmp, ended=True)  # Ray still stops behind the run
    print()
    if isinstance(result, KSelection):
        print(f"{result.table()}\nchosen k = {result.k} ({result.criterion}); curve: "
              f"{out / 'k-selection.csv'}\n")
        result = result.result
    # The settings a plain `fedcluster simulate` would have used are no news; -v lists them all.
    defaults = None if args.verbose else {**setting_defaults(RunConfig), "min-nodes": args.clients,
                                          "round-timeout": simulated_round_timeout(args.clients)}
    print(format_result(result, defaults=defaults))
    print(f"data: {described}")
    reference = _reference(result, dataset)
    for line in _references(result, dataset, reference):
        print(line)
    print(f"model: {out / MODEL_FILE}  history: {out / 'history.csv'}")
    print(_write_report(result, out, reference))
    return 0


def _run_in_memory(config: RunConfig, rows: list, run, out: Path, *, verbose: bool):
    """``--backend memory``: the same run and files over the in-process federation.

    Every client is its array in this process and a request is a function call
    (:class:`~fedcluster.client.memory.InMemoryFederation`): no Flower, no Ray,
    no partition files. With full participation the centroids are those of the
    Flower simulation (same requests, same checks, same order of combination).
    Returns what ``run`` (or :func:`~fedcluster.server.run.run_federation`) returns.
    """
    from .client.memory import InMemoryFederation
    from .logs import progress_lines
    from .server.run import run_federation

    federation = InMemoryFederation(rows)
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    _end_at_once_on_signals(out)
    try:
        with progress_lines(verbose):
            return run(federation, config) if run is not None else run_federation(federation,
                                                                                  config)[0]
    finally:  # a caller of main() in this process (a test) gets its own handling back
        signal.signal(signal.SIGINT, handlers[0])
        signal.signal(signal.SIGTERM, handlers[1])


def _reference(result, dataset):
    """The data set's true centres and their score in the run's units; None if it knows none."""
    from .metrics import combine, local_statistics
    from .report import Reference

    centres = dataset.true_centers
    # DeepFeCA's centroids are of its network's features, not of the data's.
    if centres is None or result.dimension != dataset.X.shape[1]:
        return None
    score = math.nan
    if result.settings.get("score", "exact") == "exact":  # "client-mean" is no pooled mean
        # The run's score is in its own units: standardised ones under --standardize.
        shift, scale = (0.0, 1.0) if result.shift is None else (result.shift, result.scale)
        truth = (centres - shift) / scale
        score = combine([local_statistics((dataset.X - shift) / scale, truth)], truth)["score"]
    return Reference(dataset.name, centres, score)


def _references(result, dataset, reference) -> list[str]:
    """The run's result beside what the data set knows of itself: true centres, labels."""
    from .metrics import centre_distance, combine, local_statistics

    X, name = dataset.X, dataset.name
    if result.dimension != X.shape[1]:  # DeepFeCA's centroids are of its network's features
        return []
    lines = []
    if reference is not None and reference.centres.shape == result.centroids.shape:
        distance = centre_distance(result.original_centroids, reference.centres)
        lines.append(f"distance to the true centres of {name}: {distance:.4g} (optimal matching "
                     "of centroids to centres, root of the summed squared distances)")
    # A DP run's score is not measured (NaN).
    if reference is not None and math.isfinite(reference.score) and math.isfinite(result.score):
        lines.append(f"score {result.score:.4g} beside {reference.score:.4g}, the score of the "
                     f"true centres of {name} ({result.score / reference.score - 1:+.1%})")
    if dataset.labels is not None:
        ari = combine([local_statistics(X, result.original_centroids, dataset.labels)],
                      result.original_centroids)["ari"]
        lines.append(f"adjusted Rand index against the labels of {name}: {ari:.3f} (1: the "
                     "labels' own partition; 0: chance)")
    return lines


def _write_report(result, out: Path, reference) -> str:
    """Write the run's report.html; the line that says where, or why there is none."""
    from .report import ReportUnavailable, write_report

    try:
        return f"report: {write_report(result, out, reference=reference)}"
    except ReportUnavailable as exc:
        return f"report skipped: {exc}"


def _report(args: argparse.Namespace) -> int:
    from .options import ConfigError
    from .report import ReportUnavailable, write_progress_report, write_report
    from .server.checkpoint import checkpoint_path, read_checkpoint

    model = args.dir / MODEL_FILE
    try:
        if not model.exists() and checkpoint_path(args.dir).is_file():
            # A run interrupted (or still going): the page of where its checkpoint stands.
            body, progress = read_checkpoint(args.dir)
            path = write_progress_report(progress, body["settings"], args.dir)
            if path is None:
                raise ConfigError(f"{checkpoint_path(args.dir)}: the run has no centroids yet: "
                                  "nothing to report")
        else:
            result = read_model(model)
            reference = None if args.dataset is None else _reference(result, _dataset(args))
            path = write_report(result, args.dir, reference=reference)
    except ReportUnavailable as exc:
        print(f"fedcluster: error: report not written: {exc}", file=sys.stderr)
        return 2
    print(f"report: {path}")
    return 0


#: Seconds Ray gets to stop its processes after Ctrl-C before the command exits anyway.
RAY_STOP_SECONDS = 10.0


def _end_at_once_on_signals(out: Path, partitions: str | None = None, *, ended: bool = False
                            ) -> None:
    """Make Ctrl-C (and SIGTERM) end ``fedcluster simulate`` within seconds, with one line.

    Flower runs the ServerApp in a thread that waits out ``round-timeout``
    for replies that will not come once Ray is interrupted, so Python's own
    KeyboardInterrupt leaves the process waiting minutes and then prints a
    traceback. Instead the handler stops Ray (its local cluster's processes
    are this command's), removes the partition files, says where the last
    checkpoint is and how to resume from it, and exits with 128 + the signal
    (130 for Ctrl-C). Without ``partitions`` (the in-memory backend: no Ray,
    no files) it only says where to resume; once the run has ``ended`` (its
    files written, Ray still stopping) it says so instead. Only the command
    line does this:
    a Python caller of :func:`fedcluster.simulation.simulate` keeps Python's
    own handling.
    """
    started = time.time()

    def stop(signum, frame) -> None:  # noqa: ARG001 - a signal handler
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut this short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for name in ("flwr", "ray"):  # the in-flight tasks Ray cancels are no news to the user
            logging.getLogger(name).disabled = True
        if partitions is not None:
            stopper = threading.Thread(target=_stop_ray, daemon=True)
            stopper.start()
            stopper.join(RAY_STOP_SECONDS)
            _end_ray_leftovers()
            shutil.rmtree(partitions, ignore_errors=True)
        said = (f"{_what(signum)} while Ray stopped; the run had ended: {out / MODEL_FILE}"
                if ended else _interrupted(out, started, signum))
        print(f"\nfedcluster: {said}", file=sys.stderr, flush=True)
        os._exit(128 + signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)


def _stop_ray() -> None:
    import ray

    ray.shutdown()


def _end_ray_leftovers() -> None:
    """Kill the processes Ray started in this process group that outlive ``ray.shutdown()``.

    Ray's dashboard and runtime-env agents, started by its raylet, are left
    running (orphaned, for minutes) when the raylet goes down mid-start, as
    a Ctrl-C early in a run often finds it. They are in this command's
    process group; only those whose command line is Ray's (``ray::...``, or
    a program under a ``ray`` package directory) are killed, so a shell
    script that runs this command in its own group is left alone. Linux only
    (``/proc``); elsewhere nothing is done.
    """
    group, me = os.getpgrp(), os.getpid()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            pid = int(entry.name)
            # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
            pgrp = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2])
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if pid != me and pgrp == group and (command.startswith(b"ray::") or b"/ray/" in command):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _what(signum: int) -> str:
    return "interrupted" if signum == signal.SIGINT else f"stopped by signal {signum}"


def _interrupted(out: Path, started: float, signum: int) -> str:
    """The line an interrupted simulation ends with: where it stopped and how to go on."""
    what = _what(signum)
    checkpoint = out / "checkpoint.json"
    try:
        fresh = checkpoint.stat().st_mtime >= started
        body = json.loads(checkpoint.read_text())["body"] if fresh else None
    except (OSError, ValueError, KeyError):
        body = None
    if body is None:
        return f"{what} before its first checkpoint; nothing to resume"
    argv = sys.argv[1:]
    if "--resume" not in argv:
        argv += ["--resume", str(out)]
    return (f"{what} after round {body.get('round')} of restart {body.get('restart')}; the last "
            f"checkpoint is {checkpoint}; resume with: fedcluster {shlex.join(argv)}")


def _dataset_settings(given: dict, dataset) -> dict:
    """What the data set says of settings the command line left out: DeepFeCA's image shape."""
    if given.get("algorithm") == "deepfeca" and given.get("image-shape") is None \
            and given.get("network") != "mlp" and dataset.image_shape is not None:
        return {"image-shape": ",".join(map(str, dataset.image_shape))}
    return {}


def _check_row_length(config: RunConfig, dataset) -> None:
    """DeepFeCA reads each row as ``image-shape``: refuse a mismatch before Ray starts."""
    if config.algorithm != "deepfeca":
        return
    from .methods.deepfeca.options import parse_shape
    from .options import ConfigError

    needed, d = math.prod(parse_shape(config.image_shape)), dataset.X.shape[1]
    if needed != d:
        raise ConfigError(f"--image-shape {config.image_shape} needs {needed} values per row, "
                          f"and the rows of {dataset.name} have {d}: give --image-shape C,H,W "
                          f"(or D with --network mlp)")


def _check_feasible(p: int, k: int, asked: str, sizes: list[int]) -> None:
    """Refuse, before Ray starts, a split whose clients cannot send k clusters at all.

    Under the privacy floor a client of n rows sends at most n // p clusters
    (each of p rows or more) and nothing when n < p, so a federation whose
    clients together hold fewer than k such clusters cannot find a start of
    k centroids, whatever the method; one of tiny clients would otherwise
    fail only after every round's warnings. ``asked`` names where ``k`` came
    from in the message.
    """
    from .options import ConfigError

    if max(sizes) < p:
        raise ConfigError(f"every one of the {counted(len(sizes), 'client')} holds fewer than "
                          f"--min-cluster-size {p} rows (the largest {counted(max(sizes), 'row')}): "
                          f"none could send anything; use fewer --clients")
    clusters = sum(size // p for size in sizes)
    if clusters < k:
        raise ConfigError(f"the {counted(len(sizes), 'client')} can send at most "
                          f"{counted(clusters, 'cluster')} of --min-cluster-size {p} rows or more, "
                          f"fewer than {asked} {k}; use fewer --clients or a smaller k")


def _default_out(replace: bool) -> Path:
    """RunConfig's out-dir, or where an earlier run is there, the first free ``results-N``.

    A user who types the README's commands one after another without ``--out``
    keeps every run, and the refusal of :func:`_check_out` is for an ``--out``
    named on purpose.
    """
    from .config import RunConfig

    default = Path(RunConfig().out_dir)
    if replace or not (default / MODEL_FILE).exists():
        return default
    free = next(default.with_name(f"{default.name}-{i}") for i in itertools.count(2)
                if not default.with_name(f"{default.name}-{i}").exists())
    print(f"fedcluster: {default} holds an earlier run; this one writes to {free} (--out to "
          "choose, --overwrite to replace it)", flush=True)
    return free


def _check_out(out: Path, *, replace: bool) -> None:
    """Refuse, before Ray starts, an output directory the run could not write its files to.

    A run writes them at its end (and a checkpoint after each round), so a
    file in the way, a read-only place or a full disk would otherwise be
    found only after the whole run. The directory is made here; writing a
    scratch file in it is the check (permission bits do not bind root).
    A finished run's model there is refused unless ``replace`` (``--overwrite``,
    or the run resumes in its own directory), so that no run is lost silently.
    """
    from .options import ConfigError

    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: a file is in the way (the run writes a directory there)")
    if not replace and (out / MODEL_FILE).exists():
        raise ConfigError(f"--out {out} holds a finished run ({out / MODEL_FILE}); give another "
                          "--out, or --overwrite to replace it")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out) as probe:
            probe.write(b"\0" * _OUT_ROOM)
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot write there ({exc.strerror or exc})") from None


#: The scratch file of :func:`_check_out`: room for a run's model, history and checkpoint
#: (together under 1 MiB up to k x d = 40,000, e.g. k = 50 on MNIST's 784 features).
_OUT_ROOM = 1 << 20


def _check_clients(clients: int) -> None:
    from .options import ConfigError

    if clients < 1:
        raise ConfigError(f"--clients must be at least 1, got {clients}")


def _partition(args: argparse.Namespace) -> int:
    from .data import write_partitions

    _check_clients(args.clients)
    dataset, parts = _partitioned(args)
    try:
        paths = write_partitions(dataset.X, parts, args.out, fmt=args.format, split=args.split,
                                 seed=args.seed, dataset=dataset.name, overwrite=args.overwrite)
    except FileExistsError:
        raise FileExistsError(f"{args.out.resolve()} is not empty; choose another --out or pass "
                              "--overwrite") from None
    paths = [path.resolve() for path in paths]
    for path, part in zip(paths, parts):
        print(f"{path}\t{counted(len(part), 'row')}")
    print(f"give each SuperNode its file: flower-supernode ... --node-config 'data-path=\"{paths[0]}\"'")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from .bench import load_grid, plot, render, run_grid
    from .bench.runner import RUNS_LOG, cached_dataset, grid_rows

    grid = load_grid(args.grid)
    out = args.out or Path("benchmarks") / "results" / grid.name
    # SIGTERM ends a grid as Ctrl-C does: the runs in flight stop, the finished ones stay.
    old_term = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        rows = (grid_rows(grid, out, failed=True) if args.report_only
                else run_grid(grid, out, workers=args.workers, verbose=args.verbose))
    except KeyboardInterrupt:
        done = len(grid_rows(grid, out))
        print(f"\nfedcluster: interrupted: {done} of {len(grid.runs)} runs done, kept in "
              f"{out / RUNS_LOG}; the same command goes on from there", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, old_term)
    finished = [row for row in rows if not row.get("error")]
    report = out / "report.md"
    report.write_text(render(grid, rows) + "\n", encoding="utf-8")
    plots = plot(grid, finished, out / "plots", lambda spec: cached_dataset(spec, 0))
    print(f"{len(finished)} of {len(grid.runs)} runs done; report: {report}; "
          f"{counted(len(plots), 'plot')} in {out / 'plots'}")
    if len(finished) == len(grid.runs):
        return 0
    failed = [row for row in rows if row.get("error")]
    first = f"; first: {failed[0]['run_id']}: {failed[0]['error']}" if failed else ""
    print(f"fedcluster: error: {len(grid.runs) - len(finished)} of {len(grid.runs)} runs did not "
          f"finish ({len(failed)} failed, marked in {out / 'runs.csv'}){first}", file=sys.stderr)
    return 1


def _inspect(args: argparse.Namespace) -> int:
    result = read_model(args.model)
    if args.json:
        print(json.dumps(result_to_dict(result, with_centroids=True), indent=2))
    else:
        print(format_result(result))
    return 0


def _dataset(args: argparse.Namespace):
    """The dataset the options name."""
    from .data import BlobsParams, load_dataset

    blobs = None
    if args.dataset == "blobs":
        blobs = BlobsParams(n_samples=args.blobs_samples, centers=args.blobs_centers,
                            n_features=args.blobs_features, cluster_std=args.blobs_std,
                            n_noise=args.blobs_noise)
    return load_dataset(args.dataset, seed=args.seed, blobs=blobs, label_column=args.label_column)


def _partitioned(args: argparse.Namespace):
    """The dataset the options name, and its split into ``--clients`` index sets."""
    from .data import partition_indices

    dataset = _dataset(args)
    parts = partition_indices(dataset.X.shape[0], args.clients, args.split,
                              labels=dataset.labels, points=dataset.X, seed=args.seed)
    return dataset, parts


def simulate_options() -> tuple[str, ...]:
    """Settings of every method that a simulation takes from the command line (waiting for
    nodes matters only in a deployment; a simulation waits for all of its clients)."""
    from .methods import COMMON_OPTIONS

    return tuple(key for key in COMMON_OPTIONS
                 if key not in ("seed", "min-nodes", "node-wait-timeout"))


#: Simulation defaults that are not RunConfig's, as the help states them.
_SIMULATED_DEFAULTS = {"round-timeout": "300 + clients / (2 x Ray actors), one actor per core"}


def _config_option(group, key: str) -> None:
    """A command-line option for the run-config field ``key``, typed and documented by it."""
    from .config import RunConfig

    field = RunConfig.model_fields[key.replace("-", "_")]
    flag = "--rounds" if key == "num-server-rounds" else f"--{key}"
    default = _SIMULATED_DEFAULTS.get(key, field.default)
    options = {"dest": key, "default": None, "help": f"{field.description} (default: {default})"}
    if get_origin(field.annotation) is Literal:
        options["choices"] = get_args(field.annotation)
    elif field.annotation is bool:
        options["type"] = _boolean
        options["metavar"] = "{true,false}"
    else:
        options["type"] = field.annotation
    group.add_argument(flag, **options)


def _boolean(text: str) -> bool:
    """``true`` or ``false`` (a plain ``bool`` would take any text for True)."""
    if text.lower() in ("true", "1", "yes", "on"):
        return True
    if text.lower() in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _data_options(parser: argparse.ArgumentParser, dataset: str | None = "s1",
                  title: str = "data and its split", *, split: bool = True) -> None:
    """The options that name a data set (and, with ``split``, how it is split over clients)."""
    from .data import DATASET_NAMES, BlobsParams
    from .data.partition import SPLIT_HELP

    defaults = BlobsParams()
    data = parser.add_argument_group(title)
    data.add_argument("--dataset", default=dataset,
                      help=f"a name ({', '.join(DATASET_NAMES)}, or g2-D-S: the SIPU G2 set of "
                           "dimension D and overlap S, e.g. g2-16-50) or a .npy/.npz/.csv/.txt "
                           f"file (default: {dataset or 'none'})")
    data.add_argument("--label-column", default=None, metavar="NAME",
                      help="the label column of a CSV file (not a feature); labels are needed "
                           "by label-based splits and metrics (default: a column named 'label', "
                           "if any; an .npz file holds labels in 'y')")
    if split:
        data.add_argument("--clients", type=int, default=10,
                          help="number of clients (default: 10)")
        data.add_argument("--split", default="iid", help=f"{SPLIT_HELP} (default: iid)")
        data.add_argument("--seed", type=int, default=0, help="seed of the split, the sampling "
                          "and the initialisation (default: 0)")
    else:
        data.add_argument("--seed", type=int, default=0,
                          help="the run's seed (blobs are drawn with it) (default: 0)")
    blobs = parser.add_argument_group("blobs dataset (the DWF paper's synthetic set by default)")
    blobs.add_argument("--blobs-samples", type=int, default=defaults.n_samples)
    blobs.add_argument("--blobs-centers", type=int, default=defaults.centers)
    blobs.add_argument("--blobs-features", type=int, default=defaults.n_features)
    blobs.add_argument("--blobs-std", type=float, default=defaults.cluster_std)
    blobs.add_argument("--blobs-noise", type=int, default=defaults.n_noise)


class _Parser(argparse.ArgumentParser):
    """argparse's parser with a one-line usage error (exit status 2 as before).

    The usage of ``simulate`` runs to dozens of lines, which buried the one that
    says what was wrong; argparse's message itself names the valid choices.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


#: ``simulate --help``'s section of each setting every method takes; the others are in
#: "clients and computation".
_METHOD_SECTION = ("algorithm", "k", "num-server-rounds", "tol", "tol-scale", "n-init", "score")
_PRIVACY_PREFIXES = ("dp", "secagg", "secure-aggregation", "data-bounds")

#: What ends ``simulate --help``: (what it does, the command).
SIMULATE_EXAMPLES = (
    ("DWF on S1 over 10 IID clients, k = 15", "simulate"),
    ("EWF on S2 split by a Dirichlet(0.3) prior", "simulate --algorithm ewf --dataset s2 "
     "--split dirichlet:0.3 --rounds 20"),
    ("digits, standardised", "simulate --dataset digits --k 10 --clients 5 --standardize"),
    ("choose k by the elbow of the SSE curve", "simulate --k-range 10:20 --select elbow"),
    ("central DP under secure aggregation, epsilon 1", "simulate --init random --data-bounds "
     "0:1e6 --dp central --secure-aggregation true --dp-epsilon 1 --rounds 5"),
    ("continue an interrupted run", "simulate --resume results"),
    ("every setting and the history of the run", "inspect results/model.pb"),
)


def _examples() -> str:
    return "examples:\n" + "\n".join(f"  # {what}\n  fedcluster {command}"
                                      for what, command in SIMULATE_EXAMPLES)


def _parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every command, or ``only="inspect"``, which then needs none
    of the imports the others' options do (the methods, the run config, the data sets)."""
    parser = _Parser(prog="fedcluster", description=(
        "Federated k-means-style clustering on Flower: data stays with its owners, "
        "only centroids and counts travel."))
    parser.add_argument("--version", action="version", version=f"fedcluster {__version__}")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    if only == "inspect":
        _inspect_parser(commands)
        return parser
    from .config import RunConfig
    from .methods import METHODS
    from .submit import add_submit_parser

    sim = commands.add_parser(
        "simulate", help="run a Flower simulation in this process",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_examples(),
        description="Partition a dataset over simulated clients and run a federated clustering "
        "method in a Flower simulation (Ray), or with --backend memory in this process without "
        "Flower. Methods:\n" + "\n".join(
            f"  {m.name:<10} {m.title}" for m in METHODS.values()))
    _data_options(sim)
    method = sim.add_argument_group("the method and when it stops")
    clients = sim.add_argument_group("clients and computation")
    privacy = sim.add_argument_group("privacy: differential privacy and secure aggregation")
    for key in simulate_options():
        _config_option(method if key in _METHOD_SECTION else privacy
                       if key.startswith(_PRIVACY_PREFIXES) else clients, key)
    method.add_argument("--standardize", action="store_true", default=None,
                        help=RunConfig.model_fields["standardize"].description)
    clients.add_argument("--privacy-threshold", dest="min-cluster-size", type=int,
                         help="alias of --min-cluster-size (Garst & Reinders' name for p)")
    choose = sim.add_argument_group("choosing k (one run per k, in one Flower simulation)")
    choose.add_argument("--k-range", default=None, metavar="A:B",
                        help="run every k from A to B (inclusive; or A:B:STEP, or A,B,C) instead "
                        "of --k, print the curve and write the chosen k's model")
    choose.add_argument("--select", choices=("silhouette", "elbow"), default="silhouette",
                        help="largest mean simplified silhouette, or the elbow of the SSE curve "
                        "(farthest from the chord between its ends) (default: silhouette)")
    sim.add_argument(
        "--backend", choices=("flower", "memory"), default="flower",
        help="flower: a Flower simulation, every client a Ray actor that answers Flower "
        "messages (default); memory: the in-process federation, every client an array in this "
        "process answering function calls, no Flower messages and no Ray (quicker to start; the "
        "same centroids with full participation)")
    output = sim.add_argument_group("output")
    output.add_argument("--out", type=Path, default=None,
                        help=f"output directory (default: {RunConfig().out_dir}, or the --resume "
                             "directory)")
    output.add_argument("--overwrite", action="store_true",
                        help="replace the run in --out (without it, a directory that holds a "
                             "finished run's model.pb is refused)")
    output.add_argument("--resume", type=Path, default=None, metavar="DIR",
                        help="continue the run whose checkpoint.json is in DIR (its --out), given "
                             "the same data and method options that began it")
    output.add_argument("-v", "--verbose", action="store_true",
                        help="show Flower's and Ray's log, the clients' log and every setting "
                             "(the summary lists only those that differ from the defaults)")
    shown = set(simulate_options())
    for method in METHODS.values():
        own = [key for key in method.own_keys if key not in shown]
        also = [f"--{key}" for key in method.own_keys if key in shown]
        text = method.paper + (f"; also uses {', '.join(also)}" if also else "")
        group = sim.add_argument_group(f"{method.name}: {method.title}", text)
        for key in own:
            _config_option(group, key)
        shown.update(own)
    sim.set_defaults(func=_simulate)

    part = commands.add_parser("partition", help="write one data file per client",
                               description="Split a dataset into one file per client for a deployment.")
    _data_options(part)
    part.add_argument("--format", choices=["npy", "npz", "csv"], default="npy")
    part.add_argument("--out", type=Path, required=True, help="output directory")
    part.add_argument("--overwrite", action="store_true", help="replace an existing partition set")
    part.set_defaults(func=_partition)

    bench = commands.add_parser(
        "bench", help="run a benchmark grid (datasets x splits x methods x settings x seeds)",
        description="Run every run of a grid file in-process on several cores, resuming an "
        "interrupted grid, and write runs.csv, report.md and plots (see fedcluster/bench/spec.py "
        "for the file format and benchmarks/*.toml for examples).")
    bench.add_argument("grid", type=Path, help="grid file (TOML)")
    bench.add_argument("--out", type=Path, default=None,
                       help="output directory (default: benchmarks/results/<grid name>)")
    bench.add_argument("--workers", type=int, default=2, help="worker processes (default: 2)")
    bench.add_argument("-v", "--verbose", action="store_true",
                       help="show the runs' per-round log lines (hidden by default)")
    bench.add_argument("--report-only", action="store_true",
                       help="render the report from the finished runs without running anything")
    bench.set_defaults(func=_bench)

    _inspect_parser(commands)

    rep = commands.add_parser(
        "report", help="write a run's report.html again from its model.pb",
        description="Write report.html into DIR from DIR/model.pb: the run's verdict, score, "
        "movement, clients, cluster sizes, centroids, privacy budget and changed settings, as "
        "`fedcluster simulate` writes it (a run without model.pb, interrupted: the page of its "
        "checkpoint.json). With the run's --dataset (and --seed and --blobs-* "
        "options for blobs), the score and centroid charts show the data set's true centres.")
    rep.add_argument("dir", type=Path, help="a run's output directory (its --out)")
    _data_options(rep, dataset=None, title="the run's data (for the true centres only)",
                  split=False)
    rep.set_defaults(func=_report)
    add_submit_parser(commands)
    return parser



def _inspect_parser(commands) -> None:
    insp = commands.add_parser("inspect", help="print a model file")
    insp.add_argument("model", type=Path, help="a model.pb written by a run")
    insp.add_argument("--json", action="store_true", help="JSON with the centroids")
    insp.set_defaults(func=_inspect)

if __name__ == "__main__":
    raise SystemExit(main())
