"""Utility of DP-Lloyd: score over the centralized score at several epsilons, beside diffprivlib.

    python benchmarks/privacy.py                  # S1 and S2, IID and Dirichlet 0.3 (a few minutes)
    python benchmarks/privacy.py --datasets s1 --seeds 3 --distributed-seeds 2
    python benchmarks/privacy.py --secagg-cost 10,30 --neighbours 0,4   # SecAgg vs SecAgg+

For each data set, split, epsilon and seed: fedcluster's ``dwf`` with
``dp = central`` (and ``dp = distributed`` under secure aggregation) over
10 in-memory clients, ``--rounds`` rounds, a random start in the declared
bounds; diffprivlib's ``KMeans`` (central DP, its own iteration count) on the
pooled data at the same epsilon and bounds. epsilon = inf is the same
``dwf`` sum-form run without noise (``dp = off``, same start) and
scikit-learn's ``KMeans`` with one random start for diffprivlib's column.
The score is the mean squared distance of all points to their nearest
centroid, computed here on the pooled data (a DP run does not release it),
divided by the centralized score (scikit-learn ``KMeans``, 20 starts). The
table gives the mean and the median over seeds. Needs ``pip install
"fedcluster[dp]" diffprivlib``.

``--secagg-cost`` instead measures secure aggregation itself: for each
number of clients and ``secagg-neighbours`` (0: SecAgg, every pair; d:
SecAgg+, d neighbours each), one ``dwf`` run of ``--rounds`` rounds on S1's
IID split and its final score, all through secure aggregation in memory;
it prints the bytes of the stage payloads to and from the clients and the
seconds per aggregation (the run's totals over its aggregations: the
rounds' sums and the score's counts).
"""

from __future__ import annotations

import argparse
import logging
import math
import time

import numpy as np

#: The declared, data-independent bounds of each data set (every SIPU S-set lies in [0, 1e6]).
BOUNDS = {"s1": "0:1e6", "s2": "0:1e6", "s3": "0:1e6", "s4": "0:1e6"}
EPSILONS = (0.5, 1.0, 2.0, 5.0, math.inf)


def _diffprivlib_kmeans():
    """diffprivlib's KMeans; its package imports a scikit-learn name that 1.9 dropped.

    Only ``diffprivlib.models.forest`` needs ``sklearn.tree._tree.DOUBLE``/``DTYPE``
    (aliases of float64/float32); KMeans never touches them.
    """
    import sklearn.tree._tree as tree

    for name, value in (("DOUBLE", np.float64), ("DTYPE", np.float32)):
        if not hasattr(tree, name):
            setattr(tree, name, value)
    from diffprivlib.models import KMeans

    return KMeans


def score(X: np.ndarray, centroids: np.ndarray) -> float:
    from fedcluster.numerics import cluster_stats

    return float(cluster_stats(X, np.asarray(centroids)).inertia) / len(X)


def fedcluster_run(parts, k, bounds, epsilon, seed, rounds, mode) -> np.ndarray:
    from fedcluster.config import RunConfig
    from fedcluster.federation.memory import InMemoryFederation
    from fedcluster.methods import build_strategy

    settings = {"k": k, "seed": seed, "init": "random", "data-bounds": bounds, "tol": 0.0,
                "num-server-rounds": rounds}
    if math.isinf(epsilon):
        settings["secure-aggregation"] = True  # the sum form without noise
    elif mode == "central":
        settings.update({"dp": "central", "dp-epsilon": epsilon})
    else:
        settings.update({"dp": "distributed", "dp-epsilon": epsilon, "secure-aggregation": True})
    return build_strategy(RunConfig.from_mapping(settings)).fit(InMemoryFederation(parts)).centroids


def secagg_cost(parts, k, bounds, neighbours, rounds):
    """The :class:`~fedcluster.privacy.server.SecAggCost` of one secure ``dwf`` run (seed 0)."""
    from fedcluster.config import RunConfig
    from fedcluster.federation.memory import InMemoryFederation
    from fedcluster.methods import build_strategy

    strategy = build_strategy(RunConfig.from_mapping({
        "k": k, "seed": 0, "init": "random", "data-bounds": bounds, "tol": 0.0,
        "num-server-rounds": rounds, "secure-aggregation": True, "secagg-neighbours": neighbours}))
    strategy.fit(InMemoryFederation(parts))
    return strategy.private.cost


def print_secagg_cost(args) -> None:
    """The table of ``--secagg-cost``: bytes and seconds per aggregation, SecAgg beside SecAgg+."""
    from fedcluster.data import load_dataset, partition_indices

    X = load_dataset("s1").X
    print("| clients | secagg-neighbours | kB to clients (each) | kB from clients (each) | "
          "s per aggregation | s sharing keys | s masking |")
    print("|---|---|---|---|---|---|---|")
    for clients in (int(c) for c in args.secagg_cost.split(",")):
        parts = [X[i] for i in partition_indices(len(X), clients, "iid", seed=0)]
        for neighbours in (int(d) for d in args.neighbours.split(",")):
            cost = secagg_cost(parts, args.k, BOUNDS["s1"], neighbours, args.rounds)
            per = cost.aggregations
            stage = {kind.rsplit("_", 1)[-1]: s / per for kind, s in cost.per_stage_seconds.items()}
            to, back = cost.bytes_to_clients / per / 1e3, cost.bytes_from_clients / per / 1e3
            print(f"| {clients} | {neighbours} | {to:.0f} ({to / clients:.1f}) | "
                  f"{back:.0f} ({back / clients:.1f}) | {cost.seconds / per:.2f} | "
                  f"{stage['share']:.2f} | {stage['masked']:.2f} |", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="s1,s2")
    parser.add_argument("--splits", default="iid,dirichlet:0.3")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--k", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--distributed-seeds", type=int, default=3,
                        help="seeds of the distributed runs (secure aggregation costs ~1 s a round)")
    parser.add_argument("--distributed-datasets", default="s1")
    parser.add_argument("--secagg-cost", default="",
                        help="numbers of clients, e.g. 10,30: measure secure aggregation instead")
    parser.add_argument("--neighbours", default="0,4",
                        help="secagg-neighbours values of --secagg-cost (0: SecAgg)")
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)
    if args.secagg_cost:
        print_secagg_cost(args)
        return
    from sklearn.cluster import KMeans as SKKMeans

    from fedcluster.data import load_dataset, partition_indices

    KMeans = _diffprivlib_kmeans()
    started = time.time()
    print("| data | split | epsilon | central DP (mean / median) | distributed DP | "
          "diffprivlib KMeans | central / diffprivlib |")
    print("|---|---|---|---|---|---|---|")
    for name in args.datasets.split(","):
        data = load_dataset(name)
        X, labels = data.X, data.labels
        low, high = (float(v) for v in BOUNDS[name].split(":"))
        best = SKKMeans(args.k, n_init=20, random_state=0).fit(X).inertia_ / len(X)
        for split in args.splits.split(","):
            parts = [X[i] for i in partition_indices(len(X), args.clients, split, labels=labels,
                                                     points=X, seed=0)]
            for epsilon in EPSILONS:
                central = [score(X, fedcluster_run(parts, args.k, BOUNDS[name], epsilon, s,
                                                   args.rounds, "central")) / best
                           for s in range(args.seeds)]
                distributed = []
                if name in args.distributed_datasets.split(",") and not math.isinf(epsilon):
                    distributed = [score(X, fedcluster_run(parts, args.k, BOUNDS[name], epsilon, s,
                                                           args.rounds, "distributed")) / best
                                   for s in range(args.distributed_seeds)]
                if math.isinf(epsilon):
                    reference = [score(X, SKKMeans(args.k, init="random", n_init=1, random_state=s)
                                       .fit(X).cluster_centers_) / best for s in range(args.seeds)]
                else:
                    reference = [score(X, KMeans(n_clusters=args.k, epsilon=epsilon,
                                                 bounds=(low, high), random_state=s)
                                       .fit(X).cluster_centers_) / best for s in range(args.seeds)]

                def shown(values):
                    return f"{np.mean(values):.2f} / {np.median(values):.2f}" if values else "-"

                print(f"| {name} | {split} | {epsilon:g} | {shown(central)} | {shown(distributed)} | "
                      f"{shown(reference)} | {np.mean(central) / np.mean(reference):.2f} |", flush=True)
    print(f"\n{time.time() - started:.0f} s; rounds {args.rounds}, {args.clients} clients, "
          f"k {args.k}, seeds {args.seeds} ({args.distributed_seeds} distributed)")


if __name__ == "__main__":
    main()
