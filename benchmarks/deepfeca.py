"""DeepFeCA against the paper's federated baselines on MNIST (the shape of its Table 3, small).

MNIST (a seeded subset of the training images, and of the test images for the
linear evaluation), the small CNN, 10 clients split IID, Dirichlet(0.3) and
Dirichlet(0.1) by label; T rounds of E local epochs. Step (a) of each round is
FeCA (DeepFeCA) or one of the paper's baselines in its place (M-Avg, k-FED,
FFCM avg1 and avg2 with one round); the references are centralized
DeepCluster (one client holding every training image; with one client k-FED
with k' = k is that client's k-means) and the randomly initialised network.
Every run is over the in-memory federation, whose clients answer as the real
ClientApp does.

Measures: linear-evaluation accuracy (a linear classifier on the frozen
features of the training subset, accuracy on the test subset), and purity and
NMI of k-means with 10 clusters on the normalised test features.

    python benchmarks/deepfeca.py --seeds 0 1 --json benchmarks/results/deepfeca-mnist/results.json

What BENCHMARKS.md reports (a 2-core machine shared with other work):

    python benchmarks/deepfeca.py --train 2000 --test 1000 --downsample 2 --rounds 3 \
        --epochs 1 --k 20 --seeds 0 --json benchmarks/results/deepfeca-mnist/seed0.json

``--threads`` sets torch's threads (1 by default: a shared 2-core machine).
The package imports nothing from here.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from fedcluster.data import load_dataset, partition_indices
from fedcluster.client.memory import InMemoryFederation
from fedcluster.methods.deepfeca.strategy import DeepFeCA
from fedcluster.methods.deepfeca.evaluation import (kmeans_quality, linear_evaluation,
                                                    network_features, network_spec_of)

SPLITS = ("iid", "dirichlet:0.3", "dirichlet:0.1")
CLUSTERINGS = ("feca", "mavg", "kfed", "ffcm-avg1", "ffcm-avg2")
NAMES = {"feca": "DeepFeCA", "mavg": "M-Avg", "kfed": "k-FED", "ffcm-avg1": "FFCM avg1",
         "ffcm-avg2": "FFCM avg2"}


def pooled(X: np.ndarray, factor: int) -> np.ndarray:
    """28x28 images averaged over factor x factor blocks (factor 1: unchanged)."""
    side = 28 // factor
    return X.reshape(-1, side, factor, side, factor).mean(axis=(2, 4)).reshape(len(X), -1)


def measure(weights, spec, train, test) -> dict:
    train_feats = network_features(weights, spec, train.X)
    test_feats = network_features(weights, spec, test.X)
    quality = kmeans_quality(test_feats, test.labels, 10)
    return {"linear_eval": linear_evaluation(train_feats, train.labels, test_feats, test.labels),
            **quality}


def report(paths: list[Path]) -> str:
    """The markdown table of BENCHMARKS.md: mean (min-max) over seeds, per split and method."""
    rows = [row for path in paths for row in json.loads(path.read_text())["rows"]]
    methods = ["random network", "Centralized DeepCluster", *NAMES.values()]
    lines = ["| method | " + " | ".join(f"{s} linear eval | {s} NMI" for s in SPLITS) + " |",
             "|---|" + "---|" * (2 * len(SPLITS))]
    for method in methods:
        cells = []
        for split in SPLITS:
            found = [r for r in rows if r["method"] == method and r["split"] in (split, "-")]
            for key in ("linear_eval", "nmi"):
                values = [100 * r[key] if key == "linear_eval" else r[key] for r in found]
                digits = 1 if key == "linear_eval" else 3
                cells.append(f"{np.mean(values):.{digits}f} ({min(values):.{digits}f}-"
                             f"{max(values):.{digits}f})" if values else "")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    seeds = sorted({r["seed"] for r in rows})
    return "\n".join(lines) + f"\n\nseeds {seeds}; a reference (random, centralized) has no split."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--train", type=int, default=4000, help="training images (a subset)")
    parser.add_argument("--test", type=int, default=2000, help="test images (a subset)")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=4, help="T")
    parser.add_argument("--epochs", type=int, default=2, help="E")
    parser.add_argument("--k", type=int, default=30, help="pseudo-classes")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--downsample", type=int, default=1,
                        help="average-pool the 28x28 images by this factor (2: 14x14)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--report", type=Path, nargs="+",
                        help="print the table of these result files instead of running")
    args = parser.parse_args()
    if args.report:
        print(report(args.report))
        return

    import torch

    torch.set_num_threads(args.threads)
    full, full_test = load_dataset("mnist"), load_dataset("mnist-test")
    side = 28 // args.downsample
    settings = dict(k=args.k, num_server_rounds=args.rounds, local_steps=args.epochs,
                    image_shape=f"1,{side},{side}", network="small-cnn")
    rows = []
    for seed in args.seeds:
        rng = np.random.default_rng(seed)
        pick = np.sort(rng.choice(len(full.X), args.train, replace=False))
        pick_test = np.sort(rng.choice(len(full_test.X), args.test, replace=False))
        train = type(full)("mnist-subset", pooled(full.X[pick], args.downsample),
                           full.labels[pick], None, full.citation)
        test = type(full)("mnist-test-subset", pooled(full_test.X[pick_test], args.downsample),
                          full_test.labels[pick_test], None, full.citation)

        def run(name, split, clustering, parts):
            start = time.perf_counter()
            strategy = DeepFeCA(seed=seed, feature_clustering=clustering, **settings)
            result = strategy.fit(InMemoryFederation(parts))
            row = {"seed": seed, "split": split, "method": name,
                   **measure(result.arrays, network_spec_of(strategy.settings), train, test),
                   "seconds": time.perf_counter() - start}
            rows.append(row)
            print(json.dumps(row), flush=True)

        spec = network_spec_of(DeepFeCA(**settings).settings)
        random_weights = DeepFeCA(seed=seed, **settings).initial_weights(
            int(np.random.default_rng([seed, 0]).integers(2**31)))
        rows.append({"seed": seed, "split": "-", "method": "random network",
                     **measure(random_weights, spec, train, test), "seconds": 0.0})
        print(json.dumps(rows[-1]), flush=True)
        run("Centralized DeepCluster", "-", "kfed", [train.X])
        for split in SPLITS:
            parts = [train.X[i] for i in partition_indices(len(train.X), args.clients, split,
                                                           labels=train.labels, seed=seed)]
            print(f"# {split}: client sizes {sorted(len(p) for p in parts)}", flush=True)
            for clustering in CLUSTERINGS:
                run(NAMES[clustering], split, clustering, parts)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"settings": vars(args) | {"json": str(args.json)},
                                         "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
