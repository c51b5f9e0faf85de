"""A run's result as people read it: text for the terminal, and a JSON summary.

The model file's format (what ``model.pb`` holds and how it is checked) is
:mod:`.artifacts`'; this module only presents a :class:`~fedcluster.results.RunResult`,
whichever way it was obtained (read from a file, or the run just finished).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from ..logs import counted
from ..results import RunResult
from .artifacts import SCORE_MEANING


def _json_float(x: float) -> float | None:
    """JSON has no NaN or infinity; represent them as null."""
    return x if math.isfinite(x) else None


def result_to_dict(result: RunResult, *, with_centroids: bool = True) -> dict[str, Any]:
    """Return a JSON-serialisable summary of ``result``.

    Parameters
    ----------
    result : RunResult
    with_centroids : bool, default True
        Include ``centroids`` as a list of ``k`` rows.

    Returns
    -------
    dict
        Plain Python values only; non-finite floats become ``None``, the
        creation time an ISO 8601 string.
    """
    out: dict[str, Any] = {
        "fedcluster_version": result.version,
        "algorithm": result.algorithm,
        "created": result.created.isoformat(),
        "n_clusters": result.n_clusters,
        "dimension": result.dimension,
        "n_points": result.n_points,
        "rounds": result.rounds,
        "converged": result.converged,
        "best_restart": result.best_restart,
        "score": _json_float(result.score),
        "settings": {
            key: _json_float(value) if isinstance(value, float) else value
            for key, value in result.settings.items()
        },
        "counts": [_json_float(c) for c in result.counts.tolist()],
        "stop_reason": result.stop_reason,
    }
    if with_centroids:
        out["centroids"] = [[_json_float(v) for v in row] for row in result.centroids.tolist()]
    if result.shift is not None:
        # "centroids" are then in standardised units, "original_centroids" in the data's.
        out["standardization"] = {"shift": result.shift.tolist(), "scale": result.scale.tolist()}
        if with_centroids:
            out["original_centroids"] = result.original_centroids.tolist()
    out["history"] = [
        {
            **asdict(r),
            "movement": _json_float(r.movement),
            "score": _json_float(r.score),
            "epsilon": _json_float(r.epsilon),
            "participants": list(r.participants),
        }
        for r in result.history
    ]
    return out


#: What the ``score`` of a model means, by the ``score`` setting that chose the restart.
def format_result(result: RunResult, *, last_rounds: int = 5,
                  defaults: Mapping[str, Any] | None = None, settings: bool = True) -> str:
    """Return a human-readable multi-line summary, as ``fedcluster inspect`` prints.

    Parameters
    ----------
    result : RunResult
    last_rounds : int, default 5
        How many of the last history rows to show.
    defaults : mapping, optional
        List only the settings whose value differs from these (a run's
        summary); by default every setting, as the model file holds them.
    settings : bool, default True
        False leaves the settings out (a log above listed them already).

    Returns
    -------
    str
        Without a trailing newline.
    """
    lines = [
        f"fedcluster model (written by fedcluster {result.version})",
        f"  algorithm      {result.algorithm}",
        f"  created        {result.created:%Y-%m-%d %H:%M:%S} UTC",
        f"  clusters (k)   {result.n_clusters}",
        f"  dimension (d)  {result.dimension}",
        f"  points         {result.n_points}",
        f"  rounds         {result.rounds}",
        f"  converged      {'yes' if result.converged else 'no'}",
        f"  best restart   {result.best_restart}",
        f"  score          {result.score:.6g}  ({SCORE_MEANING[result.settings.get('score', 'exact')]})",
        *([f"  stopped        {result.stop_reason}"] if result.stop_reason else []),
        *([f"  privacy        {privacy}"] if (privacy := _privacy_line(result)) else []),
    ]
    if settings and defaults is None:
        lines.append("settings")
        lines += [f"  {key} = {value!r}" for key, value in sorted(result.settings.items())] \
            or ["  (none)"]
    elif settings:
        from ..options import changed_settings  # pydantic's: not for `fedcluster inspect`

        changed = changed_settings(result.settings, defaults)
        lines.append(f"settings other than the defaults ({len(changed)} of "
                     f"{len(result.settings)})")
        lines += [f"  {key} = {value!r}" for key, value in sorted(changed.items())]
    if result.shift is not None:
        lines.append("standardised: centroids and score in units of (x - shift) / scale")
        lines += [f"  feature {j:>3}  shift {a:.6g}  scale {b:.6g}"
                  for j, (a, b) in enumerate(zip(result.shift, result.scale))]

    total = float(result.counts.sum())
    lines.append("cluster counts")
    for j, count in enumerate(result.counts.tolist()):
        share = f"{100 * count / total:5.1f}%" if total > 0 else "     -"
        lines.append(f"  {j:>4}  {count:>12.6g}  {share}")

    shown = result.history[-last_rounds:] if last_rounds > 0 else []
    lines.append(f"history (last {len(shown)} of {counted(len(result.history), 'round')})")
    if shown:
        lines.append(
            f"  {'restart':>7} {'phase':<5} {'round':>5} {'movement':>12} {'score':>12}"
            f" {'sampled':>7} {'answered':>8} {'rejected':>8}"
        )
        lines += [
            f"  {r.restart:>7} {r.phase:<5} {r.round:>5} {r.movement:>12.6g} {r.score:>12.6g}"
            f" {r.clients_sampled:>7} {r.clients_answered:>8} {r.clients_rejected:>8}"
            for r in shown
        ]
    return "\n".join(lines)


def _bounds_shown(text: str) -> str:
    """``data-bounds`` as given, or, for many features, a summary of them (an estimated box
    holds one bound per feature: thousands of numbers for MNIST)."""
    if len(text) <= 120:
        return text
    from fedcluster.privacy.bounds import describe
    from fedcluster.privacy.mechanism import parse_bounds

    return describe(*parse_bounds(text))


def _privacy_line(result: RunResult) -> str:
    """What protected the run: DP with the epsilon it spent and the data bounds, SecAgg; or ''."""
    said = []
    dp = result.settings.get("dp", "off")
    if dp != "off":
        spent = [r.epsilon for r in result.history if math.isfinite(r.epsilon)]
        used = f"epsilon {spent[-1]:.4g} spent" if spent else "no epsilon recorded"
        # A run without declared bounds estimated them first: an init row that spent epsilon.
        estimated = any(r.phase == "init" and math.isfinite(r.epsilon) for r in result.history)
        said.append(f"{dp} DP: {used} of {result.settings.get('dp-epsilon')} at delta "
                    f"{result.settings.get('dp-delta')}, data bounds "
                    f"{_bounds_shown(str(result.settings.get('data-bounds')))}"
                    + (" (estimated under DP, within the budget)" if estimated else ""))
    if result.settings.get("secure-aggregation"):
        said.append("secure aggregation")
    return "; ".join(said)
