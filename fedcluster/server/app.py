"""The fedcluster ServerApp: validated configuration in, model files out."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from logging import INFO, WARNING
from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from ..config import RunConfig
from .flower import FlowerFederation
from ..logs import colour_only_on_a_terminal, log
from ..config import build_strategy
from ..preprocessing import fit_method
from ..report import ReportUnavailable, RoundReports, write_report
from ..results import RunResult
from ..selection import KSelection
from .artifacts import write_run
from .checkpoint import CheckpointWriter, resume_point


def run_federation(grid: Grid, config: RunConfig) -> tuple[RunResult, dict[str, Path]]:
    """Run the configured method over ``grid`` and write ``model.pb`` and ``history.csv``.

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

    result = fit_method(config, FlowerFederation(grid), strategy=strategy, resume=resume,
                        checkpoint=after_each_round)
    paths = write_run(result, out_dir)
    log(INFO, "Wrote %s", ", ".join(str(p) for p in paths.values()))
    return result, paths


def build_server_app(overrides: Mapping[str, Any] | None = None,
                     on_result: Callable[[RunResult], None] | None = None,
                     run: Callable[[Grid, RunConfig], Any] | None = None) -> ServerApp:
    """Create the ServerApp.

    Parameters
    ----------
    overrides : mapping, optional
        Settings that take precedence over the run config; the command line
        binds its options here because ``run_simulation`` passes no run config.
    on_result : callable, optional
        Called with the run's result once its files are written (a simulation
        runs the ServerApp in its own process and takes the result from here).
    run : callable, optional
        What the ServerApp does with the grid and the config instead of
        :func:`run_federation` (k selection:
        :func:`fedcluster.server.choose_k.run_k_selection`); ``on_result``
        gets what it returns.
    """
    bound = dict(overrides or {})
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        # A deployment's log goes to the SuperLink and `flwr log`, rarely to a terminal.
        colour_only_on_a_terminal()
        config = RunConfig.from_mapping({**context.run_config, **bound})
        result = run(grid, config) if run is not None else run_federation(grid, config)[0]
        made = result.result if isinstance(result, KSelection) else result
        if isinstance(made, RunResult):  # a caller's own ``run`` may make something else
            _final_report(made, Path(config.out_dir).resolve())
        if on_result is not None:
            on_result(result)

    return app


def _final_report(result: RunResult, out_dir: Path) -> None:
    """Replace the pages of the rounds with the run's report (a simulation's command line
    writes it again, with the data set's true centres, which only it knows)."""
    try:
        log(INFO, "Wrote %s", write_report(result, out_dir))
    except ReportUnavailable as exc:
        log(WARNING, "no report.html: %s", exc)


app = build_server_app()
