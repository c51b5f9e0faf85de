"""FeCA at k = 2 on breast-cancer (569 x 30): where its failures come from (BENCHMARKS.md).

For 10 seeds of each split (10 clients), the ratio of FeCA's score to
centralized k-means (scikit-learn, 10 starts) and its ARI, in three variants:

* ``floor``: FeCA as shipped, privacy floor p = 2;
* ``paper``: the paper's FeCA, no floor (every client's p set to 1, a patch
  of this process only);
* ``starts``: as shipped, but each client's local k-means keeps the best of
  10 k-means++ starts (a check, not the paper: FeCA refines one Lloyd run).

Then, for the IID split of seed 0 (standardized), what each client sends under
the floor (its local k-means seeded with its index, not the run's seeds).

Run: python benchmarks/feca_k2.py
"""

from __future__ import annotations

import functools
import logging

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score

import fedcluster.client.respond as respond
import fedcluster.local.steps as steps
from fedcluster.local.floor import floor_of
from fedcluster.data import load_dataset, partition_indices
from fedcluster.client.memory import InMemoryFederation
from fedcluster.methods.feca.client import feca_request
from fedcluster.methods.feca.strategy import FeCA

SEEDS = range(10)
CLIENTS = 10


def sse(X, C):
    return float(((X[:, None, :] - C[None]) ** 2).sum(-1).min(1).sum())


def variant(name: str) -> None:
    """Set this process's clients to the variant ``name``."""
    respond.floor_of = (lambda config, node_config: 1) if name == "paper" else floor_of
    steps.kmeans = functools.partial(steps.kmeans.func if isinstance(steps.kmeans, functools.partial)
                                     else steps.kmeans, n_init=10 if name == "starts" else 1)


def main() -> None:
    logging.disable(logging.WARNING)
    data = load_dataset("breast-cancer")
    for scaled in (False, True):
        X = (data.X - data.X.mean(0)) / data.X.std(0) if scaled else data.X
        central = KMeans(2, n_init=10, random_state=0).fit(X)
        base = sse(X, central.cluster_centers_)
        print(f"{'standardized' if scaled else 'raw'}: centralized ARI "
              f"{adjusted_rand_score(data.labels, central.labels_):.3f}")
        for split in ("iid", "dirichlet:0.1"):
            for name in ("floor", "paper", "starts"):
                variant(name)
                ratios, aris, sizes = [], [], []
                for seed in SEEDS:
                    parts = partition_indices(len(X), CLIENTS, split, labels=data.labels, seed=seed)
                    C = FeCA(2, seed=seed, device="cpu").fit(
                        InMemoryFederation([X[p] for p in parts])).centroids
                    labels = ((X[:, None, :] - C[None]) ** 2).sum(-1).argmin(1)
                    ratios.append(sse(X, C) / base)
                    aris.append(adjusted_rand_score(data.labels, labels))
                    sizes.append(len(C))
                print(f"  {split:13} {name:6} ratio {np.mean(ratios):.3f} ARI {np.mean(aris):.3f} "
                      f"runs > 1.1: {sum(r > 1.1 for r in ratios)}  ratios {np.round(ratios, 3)} "
                      f"centroids {sizes}")
    variant("floor")
    X = (data.X - data.X.mean(0)) / data.X.std(0)
    central = KMeans(2, n_init=10, random_state=0).fit(X).cluster_centers_
    print(f"IID seed 0, standardized: the true-centre distance is "
          f"{np.linalg.norm(central[0] - central[1]):.2f}")
    parts = partition_indices(len(X), CLIENTS, "iid", labels=data.labels, seed=0)
    for i, part in enumerate(parts):
        reply = feca_request(X[part], None, {"k": 2, "seed": i, "max-iter": 300, "tol": 1e-4,
                                             "chunk-size": 4096, "radius": "algorithm4",
                                             "min-cluster-size": 2})
        print(f"  client {i}: counts {reply.counts.tolist()} radii {np.round(reply.radii, 2).tolist()}")


if __name__ == "__main__":
    main()
