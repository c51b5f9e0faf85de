"""Tables and plots from a grid's finished runs.

Two kinds of table, chosen per ``[[tables]]`` entry of the grid file:

* ``kind = "grid"`` (default): one row per method (and swept setting), one
  column per dataset and split, each cell ``mean ± std`` over the seeds,
  with the published figure beside ours where the grid gives one; a grid
  with ``best-of = N`` gets each such table twice, over all runs and over
  the N lowest-score runs of each cell (the DWF paper's figures show the
  best 50 of 100 runs, its tables all runs);
* ``kind = "quantiles"``: one row per method, the quantiles of a metric over
  all its runs (the FFCM paper's Table 5).

``scale`` divides the metric (the FeCA paper reports distances / 1e4).

Failed runs (rows with an ``error``) are left out of every table and plot; the
report counts them and names their errors.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..charts import ChartsUnavailable, figure_class, line_chart, save_png
from .spec import Grid

QUANTILES = (0.0, 0.25, 0.5, 0.75, 1.0)


def _groups(rows: Iterable[dict[str, Any]], best_of: int) -> dict[tuple, list[dict[str, Any]]]:
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["method"], row["setting"], row["dataset"], row["split"])].append(row)
    if best_of:
        for key, members in groups.items():
            groups[key] = sorted(members, key=lambda r: r.get("score", math.inf))[:best_of]
    return groups


def _fmt(value: float) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.3g}"


def _values(rows: list[dict[str, Any]], metric: str, scale: float) -> np.ndarray:
    values = [row[metric] / scale for row in rows
              if isinstance(row.get(metric), (int, float)) and math.isfinite(row[metric])]
    return np.asarray(values, dtype=np.float64)


def grid_table(grid: Grid, rows: list[dict[str, Any]], metric: str, scale: float = 1.0,
               best_of: int = 0) -> str:
    """``mean ± std`` of ``metric`` per method and dataset/split, published figures beside.

    With `best_of`, each cell keeps only its `best_of` lowest-score runs.
    """
    groups = _groups(rows, best_of)
    columns = sorted({(d, s) for (_, _, d, s) in groups}, key=_column_order(grid))
    methods = sorted({(m, st) for (m, st, _, _) in groups}, key=_method_order(grid))
    published = {(p.method, p.setting, p.dataset, p.split): p.value
                 for p in grid.published if p.metric == metric}
    header = ["method", *(f"{d} {s}" for d, s in columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for method, setting in methods:
        cells = [f"{method} {setting}".strip()]
        for dataset, split in columns:
            values = _values(groups.get((method, setting, dataset, split), []), metric, scale)
            cell = (f"{_fmt(values.mean())} ± {_fmt(values.std())}" if len(values) else "–")
            if paper := published.get((method, setting, dataset, split)):
                cell += f" (paper {paper})"
            cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
    title = f"{metric}" + (f" / {scale:g}" if scale != 1.0 else "")
    runs = f"the best {best_of} runs (lowest score)" if best_of else "all runs"
    return f"**{title}**, mean ± std over {runs} per cell:\n\n" + "\n".join(lines)


def quantile_table(grid: Grid, rows: list[dict[str, Any]], metric: str, scale: float = 1.0) -> str:
    """Quantiles of ``metric`` over all runs of each method."""
    by_method: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_method[(row["method"], row["setting"])].append(row)
    header = ["method", "runs", *(f"q{int(q * 100)}" for q in QUANTILES)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for method, setting in sorted(by_method, key=_method_order(grid)):
        values = _values(by_method[(method, setting)], metric, scale)
        quantiles = np.quantile(values, QUANTILES) if len(values) else [math.nan] * len(QUANTILES)
        lines.append("| " + " | ".join([f"{method} {setting}".strip(), str(len(values)),
                                        *(_fmt(q) for q in quantiles)]) + " |")
    published = [p for p in grid.published if p.metric == metric]
    notes = "".join(f"\n- paper, {p.method}: {p.value}" for p in published)
    title = f"{metric}" + (f" / {scale:g}" if scale != 1.0 else "")
    return f"**{title}**, quantiles over all runs:\n\n" + "\n".join(lines) + (f"\n{notes}" if notes else "")


def timing_table(rows: list[dict[str, Any]]) -> str:
    """Runs, mean rounds and mean wall time per method."""
    by_method: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_method[(row["method"], row["setting"])].append(row)
    lines = ["| method | runs | mean rounds | mean wall time per run (s) |", "|---|---|---|---|"]
    for (method, setting), members in sorted(by_method.items()):
        lines.append(f"| {method} {setting} | {len(members)} | "
                     f"{np.mean([r['rounds'] for r in members]):.3g} | "
                     f"{np.mean([r['wall_s'] for r in members]):.3g} |".replace("  ", " "))
    return "\n".join(lines)


def failed(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of failed runs."""
    return [row for row in rows if row.get("error")]


def finished(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of finished runs."""
    return [row for row in rows if not row.get("error")]


def failure_note(rows: list[dict[str, Any]], shown: int = 5) -> str:
    """How many runs failed, and their distinct errors (at most ``shown``); "" if none."""
    errors = failed(rows)
    if not errors:
        return ""
    distinct = list(dict.fromkeys(row["error"] for row in errors))
    lines = [f"**{len(errors)} run(s) failed** (left out of the tables; their errors are in "
             f"runs.csv, tracebacks in runs.jsonl; the next run of the grid retries them):", ""]
    lines += [f"- {error.splitlines()[0] if error.strip() else error}" for error in distinct[:shown]]
    if len(distinct) > shown:
        lines.append(f"- ... and {len(distinct) - shown} other error(s)")
    return "\n".join(lines)


def render(grid: Grid, rows: list[dict[str, Any]]) -> str:
    """The markdown report of a grid: its tables and its timing (failed runs counted apart)."""
    note = failure_note(rows)
    rows = finished(rows)
    parts = [f"### {grid.name}", ""]
    if note:
        parts += [note, ""]
    for table in grid.tables:
        metric, scale = table["metric"], float(table.get("scale", 1.0))
        if table.get("kind", "grid") == "quantiles":
            parts += [quantile_table(grid, rows, metric, scale), ""]
            continue
        parts += [grid_table(grid, rows, metric, scale), ""]
        if grid.best_of:
            parts += [grid_table(grid, rows, metric, scale, best_of=grid.best_of), ""]
    parts += ["Runs and time:", "", timing_table(rows), ""]
    return "\n".join(parts)


def plot(grid: Grid, rows: list[dict[str, Any]], out_dir: Path, data_of) -> list[Path]:
    """Recovered centres over the data (2-D sets) and the score per round; PNG files.

    ``data_of(dataset)`` returns the :class:`~fedcluster.data.Dataset`. The
    round charts are the run report's (:mod:`fedcluster.charts`: the legend
    beside the axes, in columns for a large grid). Needs matplotlib (the
    ``bench`` extra); without it, no plot is made.
    """
    try:
        Figure = figure_class()
    except ChartsUnavailable:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    first_seed: dict[tuple, dict[str, Any]] = {}
    for row in sorted(finished(rows), key=lambda r: r["seed"]):
        first_seed.setdefault((row["dataset"], row["split"], row["method"], row["setting"]), row)
    for dataset, split in sorted({(d, s) for (d, s, _, _) in first_seed}, key=_column_order(grid)):
        data = data_of(dataset)
        cells = [(key, row) for key, row in first_seed.items() if key[:2] == (dataset, split)]
        cells.sort(key=lambda item: _method_order(grid)(item[0][2:]))
        if data.X.shape[1] == 2:
            fig = Figure(figsize=(3.2 * len(cells), 3.2))
            for ax, ((_, _, method, setting), row) in zip(fig.subplots(1, len(cells),
                                                                       squeeze=False)[0], cells):
                ax.scatter(data.X[:, 0], data.X[:, 1], s=1, c="0.75")
                if data.true_centers is not None:
                    ax.scatter(*data.true_centers.T, marker="x", c="k", s=30)
                found = np.asarray(row["centroids"])
                ax.scatter(found[:, 0], found[:, 1], marker="o", facecolors="none", edgecolors="r", s=40)
                ax.set_title(f"{method} {setting}".strip(), fontsize=8)
                ax.set_xticks([])
                ax.set_yticks([])
            fig.suptitle(f"{dataset} {split}: true centres (x), recovered (o), first seed", fontsize=9)
            written.append(save_png(fig, out_dir / f"centres-{_slug(dataset)}-{_slug(split)}.png"))
        series = {f"{method} {setting}".strip(): (range(1, len(row["history"]) + 1), row["history"])
                  for (_, _, method, setting), row in cells if len(row.get("history", [])) > 1}
        if series:
            fig = line_chart(series, "score of the round's start", log_y=True)
            fig.axes[0].set_title(f"{dataset} {split}, first seed", fontsize=9)
            written.append(save_png(fig, out_dir / f"rounds-{_slug(dataset)}-{_slug(split)}.png"))
    return written


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text)


def _column_order(grid: Grid):
    datasets = list(dict.fromkeys(run.dataset for run in grid.runs))
    # The splits in the order of the method that has the most of them (the grid's own order,
    # where one method, such as a centralized baseline, runs on fewer).
    per_method: dict[str, dict[str, None]] = {}
    for run in grid.runs:
        per_method.setdefault(run.method, {})[run.split] = None
    widest = max(per_method.values(), key=len, default={})
    splits = list(dict.fromkeys([*widest, *(run.split for run in grid.runs)]))
    return lambda col: (datasets.index(col[0]) if col[0] in datasets else len(datasets),
                        splits.index(col[1]) if col[1] in splits else len(splits))


def _method_order(grid: Grid):
    methods = list(dict.fromkeys((run.method, run.setting) for run in grid.runs))
    return lambda key: methods.index(tuple(key)) if tuple(key) in methods else len(methods)
