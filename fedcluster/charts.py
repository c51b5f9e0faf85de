"""The charts of the run report and of ``fedcluster bench``: one look, legends beside the axes.

matplotlib's object interface only (:class:`matplotlib.figure.Figure`, no
pyplot): nothing here touches pyplot's global backend or figure list, so a
chart can be drawn in a server thread. A legend goes beside the axes, where
it cannot cover a curve, in as many columns as keep it about as tall as the
chart: a grid of 25 settings gets two.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["ChartsUnavailable", "figure_class", "line_chart", "new_axes", "outside_legend",
           "save_png", "svg"]

#: The line style of each ten lines (matplotlib's colour cycle repeats after ten).
LINE_STYLES = ("-", "--", ":")
#: Legend entries per column: about a chart's height at the legend's font size.
LEGEND_ROWS = 16


class ChartsUnavailable(ImportError):
    """matplotlib, which draws the charts, is not installed."""


def figure_class():
    """matplotlib's Figure class; :class:`ChartsUnavailable` where matplotlib is missing."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ChartsUnavailable(
            "matplotlib is not installed (pip install 'fedcluster[bench]')") from exc
    return Figure


def new_axes(ylabel: str, *, width: float = 6.4, height: float = 3.2, whole_x: bool = True):
    """A figure with one grid-lined axes; ``whole_x``: integer ticks only (rounds, clusters)."""
    fig = figure_class()(figsize=(width, height))
    ax = fig.add_subplot()
    ax.xaxis.get_major_locator().set_params(integer=whole_x)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    return fig, ax


def outside_legend(ax) -> None:
    """A legend beside the axes, where it cannot cover a curve (see the module docstring)."""
    entries = len(ax.get_legend_handles_labels()[1])
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False,
              ncols=max(1, math.ceil(entries / LEGEND_ROWS)))


def line_chart(series: Mapping[str, tuple[Sequence[float], Sequence[float]]], ylabel: str,
               xlabel: str = "round", *, reference: float | None = None,
               reference_label: str = "", log_y: bool = False):
    """One line per ``label: (xs, ys)``, with a dashed horizontal ``reference``; the figure.

    With nothing to draw the axes say so in their middle (a chart is never blank).
    """
    fig, ax = new_axes(ylabel)
    for i, (label, (xs, ys)) in enumerate(series.items()):
        # The colour cycle has ten colours: the next ten lines are dashed, then dotted.
        ax.plot(xs, ys, marker="." if len(xs) < 50 else None, label=label,
                linestyle=LINE_STYLES[i // 10 % len(LINE_STYLES)])
    if reference is not None:
        ax.axhline(reference, color="k", linestyle="--", label=reference_label)
    if not ax.lines:
        ax.text(0.5, 0.5, "nothing recorded", ha="center", va="center", transform=ax.transAxes)
    else:
        if log_y:
            ax.set_yscale("log")
        outside_legend(ax)
    ax.set_xlabel(xlabel)
    return fig


def svg(fig) -> str:
    """The figure as inline SVG, the same bytes for the same figure (no date, fixed ids)."""
    import matplotlib

    buffer = io.StringIO()
    # The salt fixes the ids of clip paths; fonts stay text (smaller, selectable).
    with matplotlib.rc_context({"svg.hashsalt": "fedcluster-report", "svg.fonttype": "none"}):
        fig.savefig(buffer, format="svg", bbox_inches="tight",
                    metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def save_png(fig, path: Path, dpi: int = 110) -> Path:
    """Write the figure as PNG, its outside legend included (the bounding box is the drawing's)."""
    fig.savefig(path, dpi=dpi, bbox_inches="tight", metadata={"Software": None})
    return path
