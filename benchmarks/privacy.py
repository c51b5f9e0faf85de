"""Utility of DP-Lloyd: score over the centralized score at several epsilons, beside diffprivlib.

    python benchmarks/privacy.py                  # S1 and S2, IID and Dirichlet 0.3 (a few minutes)
    python benchmarks/privacy.py --datasets s1 --seeds 3 --distributed-seeds 2
    python benchmarks/privacy.py --secagg-cost 10,50,200,1000 --full-up-to 50   # default vs SecAgg
    python benchmarks/privacy.py --datasets mnist --rows 10000 --seeds 2 --json out.json
    python benchmarks/privacy.py --table results/privacy/*.json   # the table from saved runs

For each data set, split, epsilon and seed: fedcluster's ``dwf`` with
``dp = central`` (and ``dp = distributed`` under secure aggregation) over
10 in-memory clients, ``--rounds`` rounds, a start in the declared bounds
(``--init``: random, uniform, the default; spread, packed apart; or private,
a DP coreset of noisy cell means with a share of the budget; with ``--private-bounds`` the
DP runs declare no bounds and estimate them); diffprivlib's ``KMeans``
(central DP, its own iteration count) on the pooled data at the same epsilon
and bounds. epsilon = inf is the same
``dwf`` sum-form run without noise (``dp = off``, same start) and
scikit-learn's ``KMeans`` with one random start for diffprivlib's column.
The score is the mean squared distance of all points to their nearest
centroid, computed here on the pooled data (a DP run does not release it),
divided by the centralized score (scikit-learn ``KMeans``, 20 starts). The
table gives the mean and the median over seeds. The declared bounds and k of
each data set are in :data:`BOUNDS` and :data:`K`; ``--rows`` takes a seeded
subset (seed 0) of a large set (MNIST). ``--json`` saves every seed's ratio,
``--table`` prints the table again from saved files. Needs ``pip install
"fedcluster[dp]" diffprivlib``.

``--secagg-cost`` instead measures secure aggregation itself: for each
number of clients and ``secagg-neighbours`` (auto: the default, the degree
and threshold chosen from the number of participants; 0: SecAgg, every
pair; d: SecAgg+, d neighbours each),
on S1's IID split: one secure aggregation of a ``dwf`` round's sums, counts,
squared distances and rows (``k (features + 1) + 2`` values) in memory; it prints
the degree and threshold used, the CPU seconds of the process (the
server's and every client's work, beside a round of the same ``dwf`` run
without secure aggregation, ``--rounds`` rounds), the
bytes of the stage payloads to and from each client (Flower's framing not
counted) and the request rounds. SecAgg runs only up to ``--full-up-to``
clients (its cost grows as m^2).
"""

from __future__ import annotations

import argparse
import logging
import glob
import json
import math
import resource
import time

import numpy as np

#: The declared, data-independent bounds of each data set: every SIPU S-set lies in [0, 1e6];
#: the G2 sets are two Gaussians centred at 500 and 600 per feature with standard deviation at
#: most 100, so [0, 1100] is 5 deviations either side (every shipped G2 value lies in
#: [45, 1034]); MNIST's pixels are scaled to [0, 1] by ``load_dataset``; scikit-learn's digits
#: (UCI's optdigits, 1797 x 64) are counts of 0 to 16.
BOUNDS = {"s1": "0:1e6", "s2": "0:1e6", "s3": "0:1e6", "s4": "0:1e6", "mnist": "0:1",
          "digits": "0:16"}
#: k per data set: 15 for the S-sets, 2 for a G2 set (its two Gaussians), 10 for MNIST and digits.
K = {"s1": 15, "s2": 15, "s3": 15, "s4": 15, "mnist": 10, "digits": 10}


def bounds_of(name: str) -> str:
    return "0:1100" if name.startswith("g2-") else BOUNDS[name]


def k_of(name: str) -> int:
    return 2 if name.startswith("g2-") else K[name]
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


def fedcluster_run(parts, k, bounds, epsilon, seed, rounds, mode, init="random",
                   private_bounds=False, start_share=0.0, threshold=0.0) -> np.ndarray:
    from fedcluster.config import RunConfig
    from fedcluster.client.memory import InMemoryFederation
    from fedcluster.config import build_strategy

    settings = {"k": k, "seed": seed, "init": init, "data-bounds": bounds, "tol": 0.0,
                "num-server-rounds": rounds, "dp-rounds": rounds}
    if math.isinf(epsilon):
        settings["secure-aggregation"] = True  # the sum form without noise
        settings["init"] = "spread" if init == "private" else init
    elif mode == "central":
        settings.update({"dp": "central", "dp-epsilon": epsilon, "secure-aggregation": True})
    else:
        settings.update({"dp": "distributed", "dp-epsilon": epsilon, "secure-aggregation": True,
                         "secagg-threshold": threshold})
    if private_bounds and not math.isinf(epsilon):
        del settings["data-bounds"]  # estimated with a share of the budget
    if start_share and settings["init"] == "private":
        settings["dp-start-share"] = start_share
    return build_strategy(RunConfig.from_mapping(settings)).fit(InMemoryFederation(parts)).centroids


def secagg_cost(parts, k, bounds, neighbours):
    """The :class:`~fedcluster.strategies.private.SecAggCost` of one secure aggregation of a ``dwf``
    round's sums, counts, squared distances and rows (seed 0), as a private round asks it."""
    from fedcluster.config import RunConfig
    from fedcluster.client.memory import InMemoryFederation
    from fedcluster.config import build_strategy
    from fedcluster.messages import Request
    from fedcluster.privacy.checks import TotalCheck
    from fedcluster.privacy.kinds import SUMS
    from fedcluster.strategies.private import SecAggCost, SecureSum

    strategy = build_strategy(RunConfig.from_mapping({
        "k": k, "seed": 0, "init": "random", "data-bounds": bounds,
        "secure-aggregation": True, "secagg-neighbours": neighbours}))
    pooled = np.concatenate(parts)
    centroids = pooled[np.random.default_rng(0).choice(len(pooled), k, replace=False)]
    inner = Request(SUMS, {"chunk-size": 4096, "data-bounds": "", "dp-clip": 0.0,
                           "dp-client-noise": 0.0, "min-cluster-size": 2}, centroids)
    fields = ("sums", "counts", "sse", "n")
    cost = SecAggCost()
    SecureSum(strategy, InMemoryFederation(parts), list(range(len(parts))), inner, fields,
              k * pooled.shape[1] + k + 2, what="cost", cost=cost,
              verify=TotalCheck(fields, k, pooled.shape[1], strategy.options.secagg_fraction_bits)).run()
    return cost


def plain_round_cpu(parts, k, rounds) -> float:
    """CPU seconds per round of the same ``dwf`` run without secure aggregation (its start and
    final score included, as one more round each)."""
    from fedcluster.config import RunConfig
    from fedcluster.client.memory import InMemoryFederation
    from fedcluster.config import build_strategy

    strategy = build_strategy(RunConfig.from_mapping({
        "k": k, "seed": 0, "init": "random", "tol": 0.0, "num-server-rounds": rounds}))
    started = time.process_time()
    strategy.fit(InMemoryFederation(parts))
    return (time.process_time() - started) / (rounds + 2)


def print_secagg_cost(args) -> None:
    """The table of ``--secagg-cost``: per aggregation, the default graph beside SecAgg's."""
    from fedcluster.data import load_dataset, partition_indices
    from fedcluster.privacy.secagg import AUTO

    X = load_dataset("s1").X
    k = args.k or K["s1"]
    print("| clients | secagg-neighbours | degree d, threshold t | CPU s per aggregation "
          "(x plain round) | kB per client: to + from = total | request rounds |")
    print("|---|---|---|---|---|---|")
    for clients in (int(c) for c in args.secagg_cost.split(",")):
        parts = [X[i] for i in partition_indices(len(X), clients, "iid", seed=0)]
        plain = plain_round_cpu(parts, k, args.rounds)
        for name in args.neighbours.split(","):
            neighbours = AUTO if name == "auto" else int(name)
            label = "auto (default)" if neighbours == AUTO else \
                "0 (SecAgg)" if neighbours == 0 else str(neighbours)
            if neighbours == 0 and clients > args.full_up_to:
                print(f"| {clients} | {label} | {clients - 1}, - | not run (above --full-up-to "
                      f"{args.full_up_to}) | - | - |", flush=True)
                continue
            cost = secagg_cost(parts, k, BOUNDS["s1"], neighbours)
            per = cost.aggregations
            to, back = (cost.bytes_to_clients / per / clients / 1e3,
                        cost.bytes_from_clients / per / clients / 1e3)
            cpu = cost.cpu_seconds / per
            _, degree, threshold = cost.graph
            print(f"| {clients} | {label} | {degree}, {threshold} | {cpu:.2f} ({cpu / plain:.0f} x) "
                  f"| {to:.1f} + {back:.1f} = {to + back:.1f} | {cost.request_rounds / per:g} |",
                  flush=True)


def shown(values) -> str:
    """Mean / median of the runs that finished (NaN: the run failed, loudly), and how many failed."""
    if not values:
        return "-"
    done = [v for v in values if not math.isnan(v)]
    failed = f" ({len(values) - len(done)} of {len(values)} failed)" if len(done) < len(values) else ""
    return (f"{np.mean(done):.2f} / {np.median(done):.2f}" if done else "failed") + failed


def print_table(rows: list[dict], header: bool = True) -> None:
    if header:
        print("| data | split | epsilon | central DP (mean / median) | distributed DP | "
              "diffprivlib KMeans | central / diffprivlib | distributed / central |")
        print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        central, distributed, reference = row["central"], row["distributed"], row["reference"]
        ratio = f"{np.nanmean(distributed) / np.nanmean(central):.2f}" if distributed else "-"
        print(f"| {row['data']} | {row['split']} | {row['epsilon']} | {shown(central)} | "
              f"{shown(distributed)} | {shown(reference)} | "
              f"{np.nanmean(central) / np.mean(reference):.2f} | {ratio} |", flush=True)


def print_summary(rows: list[dict], epsilon: str) -> None:
    """Per data set at one epsilon: central / diffprivlib, distributed / central per split."""
    splits = list(dict.fromkeys(row["split"] for row in rows))
    print(f"| data | central / diffprivlib ({splits[0]}) | " + " | ".join(f"distributed / central ({split})"
                                                        for split in splits) + " |")
    print("|---|---|" + "---|" * len(splits))
    for name in dict.fromkeys(row["data"] for row in rows):
        mine = {row["split"]: row for row in rows if row["data"] == name and row["epsilon"] == epsilon}
        if not mine:
            continue
        first = next(iter(mine.values()))
        cells = [f"{np.nanmean(mine[split]['distributed']) / np.nanmean(mine[split]['central']):.2f}"
                 if split in mine and mine[split]["distributed"] else "-" for split in splits]
        print(f"| {name} | {np.nanmean(first['central']) / np.mean(first['reference']):.2f} | "
              + " | ".join(cells) + " |")


def footer(meta: dict) -> str:
    rows = f", {meta['rows']} rows (seeded subset, seed 0)" if meta.get("rows") else ""
    start = f", init {meta['init']}" if meta.get("init", "random") != "random" else ""
    if meta.get("start_share"):
        start += f" (dp-start-share {meta['start_share']:g})"
    # Files from before the automatic default ran their distributed runs at 0.5.
    if meta.get("distributed") and (threshold := meta.get("distributed_threshold", 0.5)):
        start += f", distributed runs' secagg-threshold {threshold:g}"
    elif meta.get("distributed"):
        start += ", distributed runs' secagg-threshold automatic (0)"
    bounds = f"{meta['bounds']} (DP runs: estimated)" if meta.get("private_bounds") else meta["bounds"]
    cost = "".join(f"; a {mode} run {low:.1f}-{high:.1f} CPU s (median {mid:.1f})"
                   for mode, (low, mid, high) in meta.get("run_cpu_s", {}).items())
    if "peak_rss_mib" in meta:
        cost += f"; process peak {meta['peak_rss_mib']:.0f} MiB"
    return (f"{meta['data']}: {meta['wall_s']:.0f} s; rounds {meta['rounds']}, {meta['clients']} "
            f"clients, k {meta['k']}{start}, bounds {bounds}{rows}, seeds 0-{meta['seeds'] - 1}"
            + (f" (distributed: 0-{meta['distributed_seeds'] - 1})" if meta["distributed"] else
               " (no distributed runs)") + cost)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="s1,s2",
                        help="comma-separated: s1..s4, g2-D-S, mnist, digits")
    parser.add_argument("--splits", default="iid,dirichlet:0.3")
    parser.add_argument("--epsilons", default=",".join(f"{e:g}" for e in EPSILONS))
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--k", type=int, default=0, help="0: the data set's own (K)")
    parser.add_argument("--rows", type=int, default=0,
                        help="a seeded subset (seed 0) of this many rows of each data set (0: all)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--init", default="random", choices=("random", "spread", "private"),
                        help="the start: random (uniform in the bounds), spread (packed apart; "
                        "both spend no budget) or private (a share of it; epsilon = inf runs "
                        "then start spread)")
    parser.add_argument("--start-share", type=float, default=0.0,
                        help="--init private: dp-start-share (0: the default)")
    parser.add_argument("--private-bounds", action="store_true",
                        help="DP runs without --data-bounds: estimated with a share of the budget "
                        "(epsilon = inf runs keep the declared ones)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--distributed-seeds", type=int, default=3,
                        help="seeds of the distributed runs (secure aggregation costs ~1 s a round)")
    parser.add_argument("--distributed-datasets", default="s1")
    parser.add_argument("--distributed-threshold", type=float, default=0.0,
                        help="the distributed runs' secagg-threshold (0, its default: all of "
                        "them below 20 clients); each client's noise share is sized for that "
                        "many survivors")
    parser.add_argument("--secagg-cost", default="",
                        help="numbers of clients, e.g. 10,30: measure secure aggregation instead")
    parser.add_argument("--neighbours", default="auto,0",
                        help="secagg-neighbours values of --secagg-cost (auto: the default, "
                             "chosen from the number of clients; 0: SecAgg)")
    parser.add_argument("--full-up-to", type=int, default=50,
                        help="--secagg-cost runs SecAgg (neighbours 0) up to this many clients")
    parser.add_argument("--json", default="", help="save each data set's runs (every seed) here; "
                        "with several data sets, one file each: PATH with {data} in it")
    parser.add_argument("--table", nargs="+", metavar="JSON",
                        help="print the table from saved --json files (globs) and run nothing")
    parser.add_argument("--summary-epsilon", default="1",
                        help="with --table: the epsilon of the summary table")
    args = parser.parse_args(argv)
    if args.table:
        paths = sorted({p for pattern in args.table for p in (glob.glob(pattern) or [pattern])})
        saved = sorted((json.load(open(p)) for p in paths),  # S-sets, G2 sets, then the rest
                       key=lambda run: (not run["meta"]["data"].startswith("s"),
                                        not run["meta"]["data"].startswith("g2-"),
                                        run["meta"]["data"]))
        rows = [row for run in saved for row in run["rows"]]
        print_table(rows)
        print()
        for run in saved:
            print(footer(run["meta"]) + "  ")
        print("\nAt epsilon " + args.summary_epsilon + " (ratios of the means over seeds):\n")
        print_summary(rows, args.summary_epsilon)
        return
    # The runs' per-round logs would drown the table; a caller (a test) gets its logging back.
    logging.disable(logging.CRITICAL)
    try:
        if args.secagg_cost:
            print_secagg_cost(args)
        else:
            run_grid(args, parser)
    finally:
        logging.disable(logging.NOTSET)


def run_grid(args, parser) -> None:
    """Every data set, split, epsilon and seed of ``args``: the tables, and the --json files."""
    from sklearn.cluster import KMeans as SKKMeans

    from fedcluster.data import load_dataset, partition_indices
    from fedcluster.federation.base import RunFailed
    from fedcluster.privacy.mechanism import parse_bounds

    KMeans = _diffprivlib_kmeans()
    epsilons = [float(e) for e in args.epsilons.split(",")]
    names = args.datasets.split(",")
    if args.json and len(names) > 1 and "{data}" not in args.json:
        parser.error("--json with several data sets needs {data} in the path")
    for name in names:
        started = time.time()
        data = load_dataset(name)
        X, labels = data.X, data.labels
        if args.rows and args.rows < len(X):
            keep = np.sort(np.random.default_rng(0).choice(len(X), args.rows, replace=False))
            X, labels = X[keep], labels[keep]
        k, bounds = args.k or k_of(name), bounds_of(name)
        low, high = (np.broadcast_to(v, X.shape[1]).copy() for v in parse_bounds(bounds))
        best = SKKMeans(k, n_init=20, random_state=0).fit(X).inertia_ / len(X)
        distributed_too = name in args.distributed_datasets.split(",")
        references: dict[float, list[float]] = {}  # the pooled data: the same for every split
        rows = []
        cpu_s: dict[str, list[float]] = {"central": [], "distributed": []}  # per fedcluster run

        def ratios(parts, epsilon, mode, seeds, **threshold):
            """Each seed's score over the centralized one; each run's CPU time to ``cpu_s``."""
            scores = []
            for s in range(seeds):
                started = time.process_time()
                try:
                    centroids = fedcluster_run(parts, k, bounds, epsilon, s, args.rounds, mode,
                                               args.init, args.private_bounds, args.start_share,
                                               **threshold)
                except RunFailed as failed:  # too few rows for the noise: said, not scored
                    print(f"{name} {mode} epsilon {epsilon:g} seed {s}: {failed}", flush=True)
                    scores.append(math.nan)
                    continue
                cpu_s[mode].append(time.process_time() - started)
                scores.append(score(X, centroids) / best)
            return scores

        for split in args.splits.split(","):
            parts = [X[i] for i in partition_indices(len(X), args.clients, split, labels=labels,
                                                     points=X, seed=0)]
            for epsilon in epsilons:
                central = ratios(parts, epsilon, "central", args.seeds)
                distributed = []
                if distributed_too and not math.isinf(epsilon):
                    distributed = ratios(parts, epsilon, "distributed", args.distributed_seeds,
                                         threshold=args.distributed_threshold)
                if epsilon not in references:
                    if math.isinf(epsilon):
                        references[epsilon] = [
                            score(X, SKKMeans(k, init="random", n_init=1, random_state=s)
                                  .fit(X).cluster_centers_) / best for s in range(args.seeds)]
                    else:
                        references[epsilon] = [
                            score(X, KMeans(n_clusters=k, epsilon=epsilon, bounds=(low, high),
                                            random_state=s).fit(X).cluster_centers_) / best
                            for s in range(args.seeds)]
                row = {"data": name, "split": split, "epsilon": f"{epsilon:g}", "central": central,
                       "distributed": distributed, "reference": references[epsilon]}
                rows.append(row)
                print_table([row], header=len(rows) == 1)
        meta = {"data": name, "rows": len(X) if args.rows else 0, "k": k, "bounds": bounds,
                "init": args.init, "private_bounds": args.private_bounds,
                "start_share": args.start_share,
                "distributed_threshold": args.distributed_threshold,
                "rounds": args.rounds, "clients": args.clients, "seeds": args.seeds,
                "distributed_seeds": args.distributed_seeds if distributed_too else 0,
                "distributed": distributed_too, "centralized_score": best,
                "wall_s": time.time() - started,
                # The runs are in memory (server and clients in this process): their CPU time
                # is this process's; the peak is the whole process's so far (the data, its
                # client copies, scikit-learn's and diffprivlib's fits too).
                "run_cpu_s": {mode: [min(t), float(np.median(t)), max(t)]
                              for mode, t in cpu_s.items() if t},
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
        print("\n" + footer(meta) + "\n", flush=True)
        if args.json:
            with open(args.json.replace("{data}", name), "w") as out:
                json.dump({"meta": meta, "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
