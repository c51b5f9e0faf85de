"""fedcluster's central DP beside Google's practical DP clustering on its synthetic set.

    python benchmarks/dp_anchor.py                         # k = 8, 16, 32, 64, seed 0
    python benchmarks/dp_anchor.py --ks 16,64 --seeds 3 --json results/dp-anchor/run.json
    python benchmarks/dp_anchor.py --ks 16,64 --epsilon 100   # the same pipeline, little noise
    python benchmarks/dp_anchor.py --ks 64 --init true          # the rounds alone, from the true centres

The data is ``google-synthetic`` (:func:`fedcluster.data.make_google_synthetic`,
data seed 0): 100,000 x 100, 64 Gaussians, the set of the README of
``google/differential-privacy``, ``learning/clustering``. For each k and seed:
``dwf`` with ``dp = central`` over secure aggregation, 10 in-memory clients
(IID split, seed 0), epsilon 1, delta 1e-6, no declared bounds (estimated
privately) and the private start (the DP coreset; ``--init``), every other setting (rounds, budget
split) left to fedcluster; beside it scikit-learn's non-private k-means++
(``KMeans``, 1 start, the seed as its random state) on the pooled data.

The objective is Google's normalised k-means objective: the mean over all
points of the squared distance to the nearest centre (its README: "average
squared distances of the data to their closest center"), computed here on the
pooled data (the DP run does not release it). Google's figures are read off
its plot ``Synthetic_vary_k_loss.png`` (mean of 20 runs), :data:`GOOGLE`.
The objective of one centre at the mean is printed first: a run near
it has learned nothing. Each DP run's wall time, its CPU time (of this process: the server
and every in-memory client) and the process's peak resident memory so far are printed beside
it. ``--epsilon`` runs the same pipeline at another epsilon
(the largest, 100, separates what the noise costs from what the private
bounds, start and rounds cost); Google's columns stay those of epsilon 1.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time

import numpy as np

#: Google's plotted normalised objective at epsilon 1, delta 1e-6: k -> (its DP clustering,
#: non-private k-means++).
GOOGLE = {8: (0.65, 0.62), 16: (0.56, 0.51), 32: (0.38, 0.32), 64: (0.07, 0.015)}
DELTA = 1e-6
CLIENTS = 10


def objective(X: np.ndarray, centres: np.ndarray) -> float:
    """Mean squared distance of the rows of ``X`` to their nearest centre."""
    from fedcluster.numerics import cluster_stats

    return float(cluster_stats(X, np.asarray(centres)).inertia) / len(X)


def private_centres(parts: list[np.ndarray], k: int, seed: int, epsilon: float,
                    init: str) -> np.ndarray:
    from fedcluster.client.memory import InMemoryFederation
    from fedcluster.config import RunConfig, build_strategy

    settings = {"algorithm": "dwf", "k": k, "seed": seed, "dp": "central", "dp-epsilon": epsilon,
                "dp-delta": DELTA, "secure-aggregation": True, "init": init}
    return build_strategy(RunConfig.from_mapping(settings)).fit(InMemoryFederation(parts)).centroids


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ks", default="8,16,32,64")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--init", default="private",
                        help="the DP run's start: private (the DP coreset; the default here), spread, or a (k, d) "
                             "array file (public centres; 'true' writes the generating centres "
                             "to a temporary file: an oracle start, to measure the rounds alone)")
    parser.add_argument("--json", help="save every run here")
    args = parser.parse_args(argv)
    from sklearn.cluster import KMeans

    from fedcluster.data import load_dataset, partition_indices

    data = load_dataset("google-synthetic", seed=0)
    X = data.X
    init = args.init
    ks = [int(v) for v in args.ks.split(",")]
    if init == "true" and set(ks) != {len(data.true_centers)}:
        parser.error(f"--init true needs --ks {len(data.true_centers)} (the generating centres)")
    if init == "true":
        init = tempfile.NamedTemporaryFile(suffix=".npy", delete=False).name
        np.save(init, data.true_centers)
    parts = [X[i] for i in partition_indices(len(X), CLIENTS, "iid", seed=0)]
    one_centre = float(X.var(axis=0).sum())  # the objective of the mean alone: nothing learned
    print(f"one centre (the mean): {one_centre:.4f}", flush=True)
    runs = []
    print(f"{'k':>3} {'seed':>4} {'fedcluster DP':>13} {'Google DP':>9} {'k-means++':>9} "
          f"{'Google k-means++':>16} {'DP s':>6} {'CPU s':>6} {'peak MiB':>8}", flush=True)
    for k in ks:
        for seed in range(args.seeds):
            started, cpu_started = time.time(), time.process_time()
            dp = objective(X, private_centres(parts, k, seed, args.epsilon, init))
            seconds, cpu = time.time() - started, time.process_time() - cpu_started
            plain = objective(X, KMeans(k, n_init=1, random_state=seed).fit(X).cluster_centers_)
            run = {"k": k, "seed": seed, "dp": dp, "kmeans++": plain, "dp_wall_s": seconds,
                   "dp_cpu_s": cpu, "peak_mib": peak_mib(), "google_dp": GOOGLE[k][0],
                   "google_kmeans++": GOOGLE[k][1]}
            runs.append(run)
            print(f"{k:>3} {seed:>4} {dp:>13.4f} {GOOGLE[k][0]:>9.3f} {plain:>9.4f} "
                  f"{GOOGLE[k][1]:>16.3f} {seconds:>6.1f} {cpu:>6.1f} {run['peak_mib']:>8.0f}", flush=True)
    if args.json:
        meta = {"data": "google-synthetic", "data_seed": 0, "clients": CLIENTS, "split": "iid",
                "epsilon": args.epsilon, "init": args.init, "delta": DELTA, "dp": "central", "secure_aggregation": True,
                "one_centre": one_centre}
        with open(args.json, "w") as out:
            json.dump({"meta": meta, "runs": runs}, out, indent=1)


if __name__ == "__main__":
    main()
