"""k selection in the ServerApp: every k of a range in one Flower run (Ray starts once)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from logging import INFO
from pathlib import Path

from flwr.serverapp import Grid

from ..config import RunConfig
from .flower import FlowerFederation
from ..logs import log
from ..selection import TABLE_FILE, KSelection, check_selection, parse_k_range, select_over, write_table
from .artifacts import write_run


def run_k_selection(grid: Grid, config: RunConfig, *, ks: Sequence[int], criterion: str
                    ) -> KSelection:
    """Choose k over ``grid`` (:func:`fedcluster.selection.select_over`) and write the files.

    ``out_dir`` gets the chosen k's ``model.pb`` and ``history.csv`` and the
    curve, ``k-selection.csv``; each is replaced atomically, the model last.
    """
    selection = select_over(FlowerFederation(grid), config, ks, criterion)
    out = Path(config.out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    table = write_table(selection, out / TABLE_FILE)
    paths = write_run(selection.result, out)
    log(INFO, "Wrote %s, %s", table, ", ".join(str(p) for p in paths.values()))
    return selection


def k_selection_run(k_range: str | None, criterion: str):
    """The ServerApp's ``run`` for ``--k-range``/``--select`` (None without a range).

    Checks both before anything starts, so a bad range fails at once with
    :class:`~fedcluster.config.ConfigError` naming it.
    """
    if k_range is None:
        return None
    ks = parse_k_range(k_range)
    check_selection(ks, criterion)
    return partial(run_k_selection, ks=ks, criterion=criterion)
