"""The fedcluster ServerApp: validated configuration in, model files out."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from logging import INFO, WARNING
from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from ..config import RunConfig
from ..federation.base import Federation
from .flower import FlowerFederation
from ..logs import colour_only_on_a_terminal, log
from ..report import ReportUnavailable, write_report
from ..results import RunResult
from ..selection import KSelection
from .run import run_federation


def build_server_app(overrides: Mapping[str, Any] | None = None,
                     on_result: Callable[[RunResult], None] | None = None,
                     run: Callable[[Federation, RunConfig], Any] | None = None,
                     final_report: bool = True) -> ServerApp:
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
        What the ServerApp does with the federation (its grid's
        :class:`~.flower.FlowerFederation`) and the config instead of
        :func:`~.run.run_federation` (k selection:
        :func:`fedcluster.server.run.run_k_selection`); ``on_result`` gets
        what it returns.
    final_report : bool
        Write ``report.html`` from the result at the end (False where the
        caller writes its own, as ``fedcluster simulate`` does with the data
        set's true centres: a second page would cost as much again).
    """
    bound = dict(overrides or {})
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        # A deployment's log goes to the SuperLink and `flwr log`, rarely to a terminal.
        colour_only_on_a_terminal()
        config = RunConfig.from_mapping({**context.run_config, **bound})
        federation = FlowerFederation(grid)
        result = (run(federation, config) if run is not None
                  else run_federation(federation, config)[0])
        made = result.result if isinstance(result, KSelection) else result
        if final_report and isinstance(made, RunResult):  # a caller's own ``run`` may make something else
            _final_report(made, Path(config.out_dir).resolve())
        if on_result is not None:
            on_result(result)

    return app


def _final_report(result: RunResult, out_dir: Path) -> None:
    """Replace the pages of the rounds with the run's report."""
    try:
        log(INFO, "Wrote %s", write_report(result, out_dir))
    except ReportUnavailable as exc:
        log(WARNING, "no report.html: %s", exc)


app = build_server_app()
