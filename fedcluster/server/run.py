"""A run over any federation, with the files a run leaves: what the ServerApp and
``fedcluster simulate --backend memory`` both do.

Nothing here imports Flower: the ServerApp wraps its grid in a
:class:`~fedcluster.server.flower.FlowerFederation` and calls these functions,
and the in-memory backend calls them with an
:class:`~fedcluster.client.memory.InMemoryFederation`, so both write the same
checkpoint, round pages, ``model.pb``, ``history.csv`` (and ``k-selection.csv``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from logging import INFO, WARNING
from pathlib import Path

from ..config import RunConfig, build_strategy
from ..federation.base import Federation
from ..logs import log
from ..preprocessing import fit_method
from ..report import ReportUnavailable, RoundReports
from ..results import RunResult
from ..selection import TABLE_FILE, KSelection, check_selection, parse_k_range, select_over, write_table
from .artifacts import write_run
from .checkpoint import CheckpointWriter, resume_point


def run_federation(federation: Federation, config: RunConfig) -> tuple[RunResult, dict[str, Path]]:
    """Run the configured method over ``federation`` and write ``model.pb`` and ``history.csv``.

    After every round a checkpoint replaces ``checkpoint.json`` in ``out_dir``
    (:mod:`.checkpoint`), and ``report.html`` as often as its cost allows
    (:class:`~fedcluster.report.RoundReports`); with ``resume-from`` set (a directory holding one,
    or the file) the run continues from it instead of starting afresh.

    ``out_dir`` is resolved against the working directory of the process that
    runs the ServerApp (a deployment's SuperExec): give an absolute path there.
    With ``standardize`` the moments request comes first
    (:func:`fedcluster.preprocessing.fit_method`).
    """
    strategy = build_strategy(config)
    out_dir = Path(config.out_dir).resolve()
    data = config.to_flower()
    resume = resume_point(config.resume_from, strategy, data) if config.resume_from else None
    checkpoint = CheckpointWriter(out_dir, strategy.settings, data)
    reports: RoundReports | None = RoundReports(out_dir, strategy.settings)

    def after_each_round(progress) -> None:
        nonlocal reports
        checkpoint(progress)
        if reports is not None:
            try:
                reports(progress)
            except ReportUnavailable as exc:  # said once; the run goes on without pages
                log(WARNING, "no report.html: %s", exc)
                reports = None

    result = fit_method(config, federation, strategy=strategy, resume=resume,
                        checkpoint=after_each_round)
    paths = write_run(result, out_dir)
    log(INFO, "Wrote %s", ", ".join(str(p) for p in paths.values()))
    return result, paths


def run_k_selection(federation: Federation, config: RunConfig, *, ks: Sequence[int],
                    criterion: str) -> KSelection:
    """Choose k over ``federation`` (:func:`fedcluster.selection.select_over`) and write the files.

    ``out_dir`` gets the chosen k's ``model.pb`` and ``history.csv`` and the
    curve, ``k-selection.csv``; each is replaced atomically, the model last.
    """
    selection = select_over(federation, config, ks, criterion)
    out = Path(config.out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    table = write_table(selection, out / TABLE_FILE)
    paths = write_run(selection.result, out)
    log(INFO, "Wrote %s, %s", table, ", ".join(str(p) for p in paths.values()))
    return selection


def k_selection_run(k_range: str | None, criterion: str):
    """The ``run`` for ``--k-range``/``--select`` (None without a range): a function of a
    federation and a config, for the ServerApp or the in-memory backend.

    Checks both before anything starts, so a bad range fails at once with
    :class:`~fedcluster.config.ConfigError` naming it.
    """
    if k_range is None:
        return None
    ks = parse_k_range(k_range)
    check_selection(ks, criterion)
    return partial(run_k_selection, ks=ks, criterion=criterion)
