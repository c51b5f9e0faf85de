"""The ratio table of BENCHMARKS.md's "Small and skewed data owners" (benchmarks/small-owners.toml).

One row per cell (data set, split, clients), one column per method: each
federated run's score (sum of squared distances over all rows / n, on the
raw features) divided by the mean score of centralized k-means (10 k-means++
starts) on the same data set, averaged over the seeds; a failed run is listed
as such. Cells within 1 % (2 % for ffcm-avg1, the issue's bars) are not
marked; the others carry a *. Then the centralized runs of other methods
(one client holding all rows) in the same ratio, per data set.

Run: python benchmarks/small_owners_table.py [results folder]
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from fedcluster.bench.runner import failed_runs, grid_rows
from fedcluster.bench.spec import load_grid

BASELINE = "centralized k-means"
#: The issue's bars: a method's mean ratio on a cell within 1 % (ffcm-avg1: 2 %).
BARS = {"dwf": 0.01, "fkm": 0.01, "fedkmeans": 0.01, "ffcm-avg1": 0.02}


def main(folder: str = "benchmarks/results/small-owners") -> None:
    grid = load_grid(Path(__file__).with_name("small-owners.toml"))
    rows = grid_rows(grid, folder)
    failed = failed_runs(Path(folder))
    base = defaultdict(list)
    for row in rows:
        if row["method"] == BASELINE:
            base[row["dataset"]].append(row["score"])
    ratios, errors = defaultdict(list), defaultdict(int)
    central = {run.method for run in grid.runs if run.clients == 1} - {BASELINE}
    cells = []
    for run in grid.runs:
        if run.method == BASELINE or run.method in central:
            continue
        cell = (run.dataset, run.split, run.clients)
        if cell not in cells:
            cells.append(cell)
        if run.run_id in failed:
            errors[run.method, cell] += 1
    for row in rows:
        if row["method"] != BASELINE:
            cell = (row["dataset"], row["split"], row["clients"])
            ratios[row["method"], cell].append(row["score"] / np.mean(base[row["dataset"]]))
    methods = list(dict.fromkeys(run.method for run in grid.runs
                                 if run.method != BASELINE and run.method not in central))
    print("| data set | split | clients | " + " | ".join(methods) + " |")
    print("|---" * (len(methods) + 3) + "|")
    for cell in cells:
        out = []
        for method in methods:
            values = ratios[method, cell]
            text = f"{np.mean(values):.3f}" if values else "-"
            if method in BARS and values and np.mean(values) > 1 + BARS[method]:
                text += "*"
            if errors[method, cell]:
                text += f" ({errors[method, cell]} failed)"
            out.append(text)
        print("| " + " | ".join(map(str, cell)) + " | " + " | ".join(out) + " |")
    datasets = list(dict.fromkeys(run.dataset for run in grid.runs))
    print("\n| centralized | " + " | ".join(datasets) + " |")
    print("|---" * (len(datasets) + 1) + "|")
    for method in sorted(central):
        values = [ratios[method, (d, "iid", 1)] for d in datasets]
        print(f"| {method} | " + " | ".join(f"{np.mean(v):.3f}" if v else "-" for v in values) + " |")

if __name__ == "__main__":
    main(*sys.argv[1:])
