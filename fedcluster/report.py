"""``report.html``: one self-contained page per run, from what its ``model.pb`` holds.

The page carries its charts as inline SVG (:mod:`fedcluster.charts`: matplotlib,
imported only when a report is made), so it opens offline, from a mail attachment as
from the out-dir. Equal inputs give byte-identical pages: ``fedcluster report
DIR`` regenerates what ``fedcluster simulate`` wrote. The centroid chart of
data above two dimensions projects the centroids on their own principal axes:
the server holds centroids, never rows. This module does not depend on Flower.
"""

from __future__ import annotations

import dataclasses
import html
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from .charts import ChartsUnavailable as ReportUnavailable
from .charts import figure_class, line_chart, new_axes, outside_legend, svg
from .config import RunConfig
from .data.atomic import atomic_write
from .logs import counted
from .options import changed_settings, setting_defaults
from .results import SCORE_MEANING, RunResult
from .strategies.progress import Progress

__all__ = ["REPORT_FILE", "Reference", "ReportUnavailable", "RoundReports", "progress_result",
           "render_report", "verdict", "write_progress_report", "write_report"]

REPORT_FILE = "report.html"


@dataclass(frozen=True)
class Reference:
    """What the run's data set knows of itself: the centralized reference of the report.

    ``centres`` are in the data's units; ``score`` is the score of those
    centres over the pooled data in the run's own units (NaN: not comparable).
    """

    name: str
    centres: np.ndarray
    score: float


def write_report(result: RunResult, out_dir: str | os.PathLike[str], *,
                 reference: Reference | None = None, running: str | None = None) -> Path:
    """Write ``report.html`` of ``result`` into ``out_dir``, atomically; return its path.

    ``running``: see :func:`render_report`.

    Raises
    ------
    ReportUnavailable
        If matplotlib is not installed; nothing is written then.
    """
    page = render_report(result, reference=reference, running=running)
    path = Path(out_dir) / REPORT_FILE
    with atomic_write(path, "w") as fh:
        fh.write(page)
    return path


class RoundReports:
    """Replace ``report.html`` as a run goes on: give it to the strategy's ``checkpoint`` hook.

    A page costs a few tenths of a second (matplotlib draws six charts), as
    much as a round of a small run, so a page is written only while the time
    spent writing pages stays within ``share`` of the time since the first
    call (importing matplotlib not counted): the first progress (the
    initialisation) always gets one, later rounds as the budget allows. The
    run's last page, with its final verdict, is the caller's to write
    (:func:`write_report`); a run interrupted keeps the page of a round at
    most about ``1 / share`` page-writing times old.

    Parameters
    ----------
    out_dir : path
        The run's output directory.
    settings : mapping
        The method's settings (``strategy.settings``).
    share : float
        The share of the run's time that the pages may take (default: 10 %).
    clock : callable
        Seconds, monotonic (tests give their own).
    """

    def __init__(self, out_dir: str | os.PathLike[str], settings: dict, *, share: float = 0.1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.out_dir = Path(out_dir)
        self.settings = dict(settings)
        self.share = share
        self.clock = clock
        self.started: float | None = None
        self.spent = 0.0

    def __call__(self, progress: Progress) -> None:
        if self.started is None:
            figure_class()  # importing matplotlib (a second) is no page's cost: the last needs it
            self.started = self.clock()
        now = self.clock()
        if self.spent > self.share * (now - self.started):
            return
        write_progress_report(progress, self.settings, self.out_dir)
        self.spent += self.clock() - now


def write_progress_report(progress: Progress, settings: dict,
                          out_dir: str | os.PathLike[str]) -> Path | None:
    """Write the page of a run in progress (:func:`progress_result`); None: nothing to show yet."""
    result = progress_result(progress, settings)
    if result is None:
        return None
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    return write_report(result, out_dir, running=_running(progress, settings))


def progress_result(progress: Progress, settings: dict) -> RunResult | None:
    """What a page can show of a run in progress, as a :class:`RunResult`; None: nothing yet.

    The centroids are those of the restart in progress (or, between
    restarts or while those are not all finite, of the best scored restart
    so far); cluster sizes are measured only when a restart is scored, so
    they are NaN until then; the score is that of the restart's last scored
    round.
    """
    best = progress.best
    # A method may leave a centroid undefined between rounds (NaN): a page must not end the run.
    own = progress.centroids is not None and bool(np.all(np.isfinite(progress.centroids)))
    if not own and best is None:
        return None
    if not own:
        return dataclasses.replace(best, history=list(progress.history))
    scores = [r.score for r in progress.history
              if r.restart == progress.restart and math.isfinite(r.score)]
    return RunResult(
        algorithm=str(settings["algorithm"]), settings=settings, centroids=progress.centroids,
        counts=np.full(len(progress.centroids), math.nan), score=scores[-1] if scores else math.nan,
        n_points=0, rounds=progress.round or 0, converged=progress.converged,
        best_restart=progress.restart, history=list(progress.history))


def _running(progress: Progress, settings: dict) -> str:
    restarts = int(settings.get("n-init", 1))
    where = f"restart {progress.restart} (of {restarts}), " if restarts > 1 else ""
    if progress.round is None:  # between restarts
        where = f"{progress.restart} of {counted(restarts, 'restart')} scored"
    else:
        where += (f"round {progress.round} of at most {settings.get('num-server-rounds')} done"
                  if progress.round else "initialised, no round yet")
    return (f"In progress when written ({datetime.now(timezone.utc):%H:%M:%S} UTC): {where}. "
            "This page is replaced as the run goes on and when it ends; a run interrupted "
            "keeps it as it is.")


# -- the page ------------------------------------------------------------------------------------


def render_report(result: RunResult, *, reference: Reference | None = None,
                  running: str | None = None) -> str:
    """The HTML of the report of ``result`` (see the module docstring).

    ``running``: the sentence that replaces the verdict on the page of a run in
    progress (:class:`RoundReports`).
    """
    figure_class()  # no matplotlib, no page: ReportUnavailable before any chart
    e = html.escape
    sections = [
        ("Score per round", _score_chart(result, reference), _score_note(result, reference)),
        ("Centroid movement per round", _movement_chart(result),
         "How far the centroids moved in each training round, by the method's measure (the "
         "Frobenius norm of the change for the k-means methods)."),
        ("Clients per round", _clients_chart(result) + _rejections(result),
         "Sampled, answered and rejected clients of each round; the table below the chart "
         "gives the reason of each rejection. A client silent until the round timeout counts "
         "as neither answered nor rejected."),
        ("Cluster sizes", _sizes_chart(result), _sizes_note(result)),
        ("Centroids", _centroid_chart(result, reference), _centroid_note(result, reference)),
        ("Privacy", _epsilon_chart(result), _privacy_note(result)),
    ]
    body = [f"<h1>fedcluster run: {e(result.algorithm)}, k = {result.n_clusters}</h1>",
            f'<p class="verdict">{e(running or verdict(result))}</p>', _summary_table(result)]
    for title, chart, note in sections:
        body += [f"<h2>{e(title)}</h2>", f"<p>{e(note)}</p>", chart]
    body += _settings_section(result)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>fedcluster report: {e(result.algorithm)}, k = {result.n_clusters}</title>\n"
        "<style>body{font-family:sans-serif;max-width:60em;margin:auto;padding:1em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;"
        "text-align:left}.verdict{font-size:1.2em;font-weight:bold}svg{max-width:100%;"
        "height:auto}</style>\n</head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n"
    )


def verdict(result: RunResult) -> str:
    """The run's outcome in one sentence (of the restart kept, where there were several)."""
    bound = f"tol = {result.settings.get('tol')}"
    if result.settings.get("tol-scale") == "variance":
        bound = f"sqrt(tol x the mean feature variance), {bound}"
    n_init = result.settings.get("n-init", 1)
    kept = f"Restart {result.best_restart}, the best of {n_init}: " if n_init > 1 else ""
    if not result.history:
        return (f"Finished in one exchange ({result.algorithm} has no rounds), "
                f"score {result.score:.4g}.")
    if result.stop_reason:
        said = (f"stopped by its privacy budget after {counted(result.rounds, 'round')} "
                f"({result.stop_reason}); the centroids of the last round are kept.")
    elif result.converged:
        said = (f"converged after {counted(result.rounds, 'round')}: the centroids moved less "
                f"than {bound}.")
    else:
        said = (f"did not converge: stopped at the round limit, "
                f"{counted(result.rounds, 'round')}, with the centroids still moving more than "
                f"{bound}.")
    return kept + (said if kept else said[0].upper() + said[1:])


def _summary_table(result: RunResult) -> str:
    meaning = SCORE_MEANING[result.settings.get("score", "exact")]
    rows = [
        ("algorithm", result.algorithm),
        ("created", f"{result.created:%Y-%m-%d %H:%M:%S} UTC, fedcluster {result.version}"),
        ("clusters (k)", result.n_clusters),
        ("dimension (d)", result.dimension),
        ("points", result.n_points if np.all(np.isfinite(result.counts))
         else "counted when the restart is scored"),
        ("rounds", result.rounds),
        ("best restart", result.best_restart),
        ("score", f"{result.score:.6g} ({meaning})"),
    ]
    return _table(rows)


def _table(rows, header: tuple[str, ...] = ()) -> str:
    e = html.escape
    lines = ["<table>"]
    if header:
        lines.append("<tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>")
    lines += ["<tr>" + "".join(f"<td>{e(str(v))}</td>" for v in row) + "</tr>" for row in rows]
    return "\n".join([*lines, "</table>"])


#: Rejections listed on the page; the model file and the server's log have them all.
SHOWN_REJECTIONS = 50


def _rejections(result: RunResult) -> str:
    rows = [(r.restart, r.phase, r.round, reason) for r in result.history for reason in r.rejections]
    if not rows:
        return "<p>No answer was rejected.</p>"
    more = len(rows) - SHOWN_REJECTIONS
    return (_table(rows[:SHOWN_REJECTIONS], ("restart", "phase", "round", "rejected: why"))
            + (f"\n<p>{more} more rejection(s) in the model file "
               "(<code>fedcluster inspect --json</code>) and the server's log.</p>"
               if more > 0 else ""))


def _settings_section(result: RunResult) -> list[str]:
    changed = changed_settings(result.settings, setting_defaults(RunConfig))
    every = sorted(result.settings.items())
    return [
        "<h2>Settings other than the defaults</h2>",
        f"<p>{len(changed)} of {len(result.settings)} settings differ from "
        "<code>fedcluster simulate</code>'s defaults.</p>",
        _table(sorted(changed.items()), ("setting", "value")),
        f"<details><summary>All {len(every)} settings</summary>",
        _table(every, ("setting", "value")), "</details>",
    ]


# -- notes ---------------------------------------------------------------------------------------


def _score_note(result: RunResult, reference: Reference | None) -> str:
    note = ("The score at the start of each round, one line per restart: "
            f"{SCORE_MEANING[result.settings.get('score', 'exact')]}.")
    if reference is not None and math.isfinite(reference.score):
        note += (f" The dashed line is the score of the true centres of {reference.name} "
                 f"({reference.score:.4g}); the run ends at {result.score:.4g} "
                 f"({result.score / reference.score - 1:+.1%}).")
    else:
        note += " No centralized reference is known for this run's data."
    if not any(math.isfinite(r.score) for r in result.history):
        note += " No round's score was measured (under DP the score is not computed)."
    return note


def _sizes_note(result: RunResult) -> str:
    if not np.all(np.isfinite(result.counts)):
        return "Measured when the restart is scored, at its end."
    return f"Points per cluster, {counted(result.n_points, 'point')} in all."


def _centroid_note(result: RunResult, reference: Reference | None) -> str:
    units = "" if result.shift is None else " (in the data's units, the standardisation undone)"
    if result.dimension <= 2:
        what = f"The centroids{units}, each marked by its size."
    else:
        what = (f"The centroids{units} on the first two principal axes of the centroids "
                "themselves (computed from what the server holds, no client's rows).")
    if _comparable(result, reference):
        what += f" Crosses: the true centres of {reference.name}."
    return what


def _privacy_note(result: RunResult) -> str:
    dp = result.settings.get("dp", "off")
    if dp == "off":
        secagg = " Secure aggregation hid each client's sums." \
            if result.settings.get("secure-aggregation") else ""
        return f"No differential privacy: no epsilon was spent.{secagg}"
    spent = [r.epsilon for r in result.history if math.isfinite(r.epsilon)]
    total = f"{spent[-1]:.4g}" if spent else "none recorded"
    return (f"{dp.capitalize()} differential privacy: epsilon spent by the end of each round "
            f"(in all: {total} of a budget of {result.settings.get('dp-epsilon')}, delta "
            f"{result.settings.get('dp-delta')}); data bounds used: "
            f"{result.settings.get('data-bounds') or 'none given'}.")


# -- charts --------------------------------------------------------------------------------------


def _per_restart(result: RunResult, value) -> dict[int, tuple[list[int], list[float]]]:
    lines: dict[int, tuple[list[int], list[float]]] = {}
    for r in result.history:
        if r.phase == "train" and math.isfinite(y := value(r)):
            xs, ys = lines.setdefault(r.restart, ([], []))
            xs.append(r.round)
            ys.append(y)
    return lines


def _round_chart(result: RunResult, value, ylabel: str, reference: float | None = None,
                 reference_label: str = "") -> str:
    series = {f"restart {restart}": line
              for restart, line in sorted(_per_restart(result, value).items())}
    return svg(line_chart(series, ylabel, reference=reference, reference_label=reference_label))


def _score_chart(result: RunResult, reference: Reference | None) -> str:
    known = reference is not None and math.isfinite(reference.score)
    return _round_chart(result, lambda r: r.score, "score",
                        reference.score if known else None,
                        f"true centres of {reference.name}" if known else "")


def _movement_chart(result: RunResult) -> str:
    return _round_chart(result, lambda r: r.movement, "centroid movement")


def _epsilon_chart(result: RunResult) -> str:
    if result.settings.get("dp", "off") == "off":
        return ""
    return _round_chart(result, lambda r: r.epsilon, "epsilon spent",
                        result.settings.get("dp-epsilon"), "budget")


def _clients_chart(result: RunResult) -> str:
    fig, ax = new_axes("clients")
    steps = np.arange(len(result.history))
    # Sampled as bars behind the lines: with every client answering, the lines would coincide.
    ax.bar(steps, [r.clients_sampled for r in result.history], color="0.85", label="sampled")
    for name, colour in (("answered", "tab:green"), ("rejected", "tab:red")):
        counts = [getattr(r, f"clients_{name}") for r in result.history]
        ax.plot(steps, counts, marker=".", color=colour, label=name)
    if len(steps):
        outside_legend(ax)
    ax.set_xlabel("exchange (in order; restarts and the initialisation included)")
    ax.yaxis.get_major_locator().set_params(integer=True)
    return svg(fig)


def _sizes_chart(result: RunResult) -> str:
    if not np.all(np.isfinite(result.counts)):
        return ""
    fig, ax = new_axes("points")
    ax.bar(np.arange(result.n_clusters), result.counts, color="tab:blue")
    ax.set_xlabel("cluster")
    return svg(fig)


def _comparable(result: RunResult, reference: Reference | None) -> bool:
    return reference is not None and reference.centres.shape[1:] == (result.dimension,)


def _centroid_chart(result: RunResult, reference: Reference | None) -> str:
    fig, ax = new_axes("", width=5.0, height=5.0, whole_x=False)
    centroids = result.original_centroids
    truth = reference.centres if _comparable(result, reference) else None
    if result.dimension == 1:
        points = np.column_stack([centroids[:, 0], np.zeros(len(centroids))])
        axes = ("feature 0", "")
        truth = None if truth is None else np.column_stack([truth[:, 0], np.zeros(len(truth))])
    elif result.dimension == 2:
        points, axes = centroids, ("feature 0", "feature 1")
    else:
        mean = centroids.mean(axis=0)
        # The principal axes of the centroids: their SVD (no row of any client is involved).
        _, _, vt = np.linalg.svd(centroids - mean, full_matrices=False)
        basis = np.zeros((result.dimension, 2))
        basis[:, :min(2, len(vt))] = vt[:2].T
        points, axes = (centroids - mean) @ basis, ("principal axis 1", "principal axis 2")
        truth = None if truth is None else (truth - mean) @ basis
    if truth is not None:
        ax.scatter(truth[:, 0], truth[:, 1], marker="x", color="k", label="true centres")
    total = result.counts.sum()
    sizes = 20 + 200 * result.counts / total if total > 0 else 40  # NaN total: not yet measured
    ax.scatter(points[:, 0], points[:, 1], s=sizes, facecolors="none", edgecolors="tab:red",
               label="centroids")
    for j, (x, y) in enumerate(points):
        ax.annotate(str(j), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel(axes[0])
    ax.set_ylabel(axes[1])
    outside_legend(ax)
    return svg(fig)
