"""Choosing k from summaries only: a federated score curve and a simplified silhouette.

For each k of a range the method runs with the same settings and seed
(:func:`fedcluster.preprocessing.fit_method`, over one standardisation if
asked, computed once for all ks); then one silhouette request to every
connected client returns, for the final centroids, the client's sum of
squared distances (the SSE curve, exact over all clients whatever
``score`` compares restarts by) and the sum of its rows' simplified
silhouettes (:func:`fedcluster.local.summaries.silhouette_request`:
``(b - a) / max(a, b)`` with ``a`` and ``b`` the distances to the nearest and
second nearest centroid; Hruschka, Campello & de Castro 2004; Wang et al.'s
and Garst & Reinders' federated evaluations use it too). The server divides
the summed silhouettes by the summed counts.

The criteria (:data:`CRITERIA`):

``silhouette`` (default)
    the k of the largest mean simplified silhouette (the smallest such k on
    a tie); every k must be >= 2.
``elbow``
    the k of the SSE curve's point farthest from the chord between its ends,
    both axes scaled to [0, 1] (:func:`fedcluster.numerics.moments.farthest_from_chord`,
    the Kneedle rule without smoothing); needs three ks or more.

:func:`select_over` runs the curve over any federation. Its faces stand
above it: :func:`fedcluster.estimator.select_k` over arrays (in memory or as
one Flower simulation), and the command line's ``fedcluster simulate
--k-range``, which runs :func:`fedcluster.server.run.run_k_selection`
inside one ServerApp. This module does not import Flower.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from logging import INFO
from pathlib import Path
from typing import Any

import numpy as np

from .config import ConfigError, RunConfig, build_strategy
from .data.atomic import atomic_write
from .federation.base import Federation, RunFailed
from .logs import log
from .messages import SILHOUETTE, validate_reply
from .numerics.moments import farthest_from_chord
from .preprocessing import StandardizedFederation, federated_standardization, fit_method
from .results import RunResult

CRITERIA = ("silhouette", "elbow")
#: The most values of k one selection runs.
MAX_KS = 200
TABLE_FILE = "k-selection.csv"
TABLE_COLUMNS = ("k", "sse", "score", "silhouette", "rounds", "converged", "chosen")


@dataclass(frozen=True)
class KRow:
    """One k of a selection: its run's SSE, mean simplified silhouette and rounds.

    ``sse`` is the sum over all clients of the squared distances to the
    nearest centroid, ``score`` = ``sse / n``; both, like ``silhouette``
    (NaN for k = 1, where it is undefined), in the units clustered
    (standardised ones when the run standardises).
    """

    k: int
    sse: float
    n: int
    silhouette: float
    rounds: int
    converged: bool

    @property
    def score(self) -> float:
        return self.sse / self.n


@dataclass
class KSelection:
    """The outcome of a choice of k.

    Attributes
    ----------
    criterion : {"silhouette", "elbow"}
    rows : list of KRow
        One per k, in increasing k.
    k : int
        The chosen k.
    result : RunResult
        The chosen k's run (centroids, history, transform).
    model : FederatedKMeans or None
        :func:`select_k` only: an estimator fitted with ``result``.
    """

    criterion: str
    rows: list[KRow]
    k: int
    result: RunResult
    model: Any = field(default=None, repr=False)

    def table(self) -> str:
        """The curve as aligned text, the chosen row marked."""
        lines = [f"{'k':>4}  {'sse':>12}  {'score':>12}  {'silhouette':>10}  rounds"]
        for row in self.rows:
            mark = f"  <- chosen ({self.criterion})" if row.k == self.k else ""
            lines.append(f"{row.k:>4}  {row.sse:>12.6g}  {row.score:>12.6g}  "
                         f"{row.silhouette:>10.4f}  {row.rounds:>6}{mark}")
        return "\n".join(lines)


def parse_k_range(text: str) -> list[int]:
    """The ks of ``"A:B"`` (A to B inclusive), ``"A:B:STEP"`` or ``"A,B,C"``.

    Raises
    ------
    ConfigError
        Naming the value: not integers, a k below 1, an empty or descending
        range, a repeated k, or more than :data:`MAX_KS` values.
    """
    bad = f"invalid k range {text!r}"
    try:
        if ":" in text:
            parts = [int(p) for p in text.split(":")]
            if len(parts) not in (2, 3):
                raise ValueError
            start, stop, step = (*parts, 1) if len(parts) == 2 else parts
            if step < 1 or stop < start:
                raise ConfigError(f"{bad}: expected A:B or A:B:STEP with A <= B and STEP >= 1")
            ks = list(range(start, stop + 1, step))
        else:
            ks = [int(p) for p in text.split(",")]
    except ValueError:
        raise ConfigError(f"{bad}: expected A:B (inclusive), A:B:STEP or A,B,C of integers") from None
    if not ks or min(ks) < 1:
        raise ConfigError(f"{bad}: every k must be >= 1")
    if len(set(ks)) != len(ks):
        raise ConfigError(f"{bad}: a k is repeated")
    if len(ks) > MAX_KS:
        raise ConfigError(f"{bad}: {len(ks)} values, at most {MAX_KS}")
    return sorted(ks)


def check_selection(ks: Sequence[int], criterion: str) -> None:
    """Refuse a criterion the ks cannot support, naming both."""
    if criterion not in CRITERIA:
        raise ConfigError(f"invalid k-selection criterion {criterion!r} (one of {', '.join(CRITERIA)})")
    if criterion == "silhouette" and min(ks) < 2:
        raise ConfigError(f"the silhouette criterion needs every k >= 2, got k = {min(ks)} "
                          "(it is undefined for one cluster)")
    if criterion == "elbow" and len(ks) < 3:
        raise ConfigError(f"the elbow criterion needs at least 3 values of k, got {list(ks)}")


def choose(rows: Sequence[KRow], criterion: str) -> int:
    """The k that ``criterion`` picks among ``rows`` (see the module docstring)."""
    if criterion == "silhouette":
        return max(rows, key=lambda r: (r.silhouette, -r.k)).k
    return rows[farthest_from_chord([r.k for r in rows], [r.sse for r in rows])].k


def select_over(federation: Federation, config: RunConfig, ks: Sequence[int],
                criterion: str = "silhouette") -> KSelection:
    """Run ``config`` for each k of ``ks`` over ``federation`` and choose one.

    Raises
    ------
    ConfigError
        A criterion the ks cannot support.
    RunFailed
        A run, or its silhouette request, failed (the message names the k).
    """
    ks = sorted(ks)
    check_selection(ks, criterion)
    standardization = None
    if config.standardize:
        standardization = federated_standardization(build_strategy(config), federation)
    rows, results = [], {}
    for k in ks:
        run_config = config.model_copy(update={"k": k})
        try:
            result = fit_method(run_config, federation, standardization)
            rows.append(_curve_point(federation, run_config, result, standardization))
        except RunFailed as exc:
            raise RunFailed(f"k = {k}: {exc}") from exc
        results[k] = result
        log(INFO, "k = %d: sse %.6g, mean simplified silhouette %.4f", k, rows[-1].sse,
            rows[-1].silhouette)
    chosen = choose(rows, criterion)
    log(INFO, "chose k = %d by the %s criterion", chosen, criterion)
    return KSelection(criterion, rows, chosen, results[chosen])


def _curve_point(federation: Federation, config: RunConfig, result: RunResult,
                 standardization) -> KRow:
    """The SSE and mean simplified silhouette of ``result``'s centroids, from every client."""
    k = result.n_clusters
    strategy = build_strategy(config)
    target = federation if standardization is None else StandardizedFederation(federation,
                                                                                standardization)
    exchange = strategy.exchange(
        target, SILHOUETTE, strategy.connected_nodes(target),
        {"k": k, "chunk-size": config.chunk_size, "device": config.device},
        lambda s: validate_reply(s, expect=("sse", "silhouette")),
        centroids=np.ascontiguousarray(result.centroids), what=f"silhouette (k = {k})")
    replies = exchange.in_content_order()
    n = sum(s.n for s in replies)
    silhouette = math.fsum(s.silhouette for s in replies) / n if k > 1 else math.nan
    return KRow(k, math.fsum(s.sse for s in replies), n, silhouette, result.rounds, result.converged)


def write_table(selection: KSelection, path: str | Path) -> Path:
    """Write the curve as CSV (:data:`TABLE_COLUMNS`), atomically; floats exactly (``repr``)."""
    path = Path(path)
    with atomic_write(path, "w") as fh:
        fh.write(",".join(TABLE_COLUMNS) + "\n")
        for r in selection.rows:
            fh.write(f"{r.k},{r.sse!r},{r.score!r},{r.silhouette!r},{r.rounds},"
                     f"{str(r.converged).lower()},{str(r.k == selection.k).lower()}\n")
    return path

