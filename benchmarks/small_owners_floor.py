"""Why dwf misses 1 % on small-owners' k-means splits over 50 clients: the floor's lone rows.

For dwf on every ``kmeans-noniid`` cell of 50 clients in
``benchmarks/small-owners.toml`` (each seed): the clients of fewer than
p = 2 rows (they cannot take part, see README "What leaves a data owner"),
the rows they hold, and the ratio to centralized k-means as the grid runs it
and with every client's p set to 1 (a patch of this process only: the
floor off).

Run: python benchmarks/small_owners_floor.py
"""

from __future__ import annotations

import logging

import numpy as np

import fedcluster.client.respond as respond
from fedcluster.bench.runner import cached_partition, execute
from fedcluster.bench.spec import load_grid


def main() -> None:
    logging.disable(logging.CRITICAL)
    grid = load_grid("benchmarks/small-owners.toml")
    base: dict[str, list[float]] = {}
    for run in grid.runs:
        if run.method == "centralized k-means":
            base.setdefault(run.dataset, []).append(execute(run)["score"])
    floor = respond.floor_of
    for run in grid.runs:
        if run.method != "dwf" or run.split != "kmeans-noniid" or run.clients != 50:
            continue
        sizes = np.array([len(p) for p in cached_partition(run.dataset, run.split, run.clients,
                                                           run.seed)])
        ratios = []
        for p in (floor, lambda config, node_config: 1):
            respond.floor_of = p
            ratios.append(execute(run)["score"] / np.mean(base[run.dataset]))
        respond.floor_of = floor
        print(f"{run.dataset} seed {run.seed}: {int((sizes < 2).sum())} clients of 1 row; "
              f"ratio with the floor {ratios[0]:.3f}, without {ratios[1]:.3f}")


if __name__ == "__main__":
    main()
