"""Cluster scikit-learn's digits held by five data owners, and compare with pooled k-means.

Run it from the repository root (``pip install ".[bench]"`` brings scikit-learn and
matplotlib):

    python examples/digits_five_owners.py [OUT_DIR]

Step by step, as one would in a notebook:

1. split the 1797 images (8 x 8 pixels, 64 features) over five owners, each holding
   mostly two or three digits (Dirichlet 0.3 over the labels: a skewed federation);
2. fit ``FederatedKMeans`` with k = 10 (DWF, in this process): each owner computes on its
   own rows, only centroids, counts and sums of squared distances travel;
3. fit scikit-learn's ``KMeans`` on the pooled rows, what one could do if the data
   could be pooled;
4. compare the two: the mean squared distance over all rows and each one's agreement
   with the true digits (adjusted Rand index);
5. write the run's ``report.html`` into OUT_DIR (default ``digits-report``): open it
   in a browser.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score

from fedcluster import FederatedKMeans
from fedcluster.data import load_dataset, partition_indices
from fedcluster.report import write_report

K, OWNERS, SEED = 10, 5, 0


def main(out_dir: str = "digits-report") -> dict[str, float]:
    # 1. the owners' parts
    digits = load_dataset("digits")
    owners = partition_indices(len(digits.X), OWNERS, "dirichlet:0.3", labels=digits.labels,
                               seed=SEED)
    parts = [digits.X[rows] for rows in owners]
    for i, rows in enumerate(owners):
        held = np.bincount(digits.labels[rows], minlength=10)
        print(f"owner {i}: {len(rows)} images, mostly digits {np.argsort(held)[::-1][:3].tolist()}")

    # 2. the federated fit; labels_ holds each owner's assignments, computed at that owner
    federated = FederatedKMeans(n_clusters=K, random_state=SEED).fit(parts)
    federated_labels = np.empty(len(digits.X), dtype=int)
    for rows, labels in zip(owners, federated.labels_):
        federated_labels[rows] = labels

    # 3. pooled k-means, for comparison only
    pooled = KMeans(n_clusters=K, n_init=10, random_state=SEED).fit(digits.X)

    # 4. the comparison, on every row
    figures = {
        "federated_msd": -federated.score(digits.X) / len(digits.X),
        "pooled_msd": pooled.inertia_ / len(digits.X),
        "federated_ari": adjusted_rand_score(digits.labels, federated_labels),
        "pooled_ari": adjusted_rand_score(digits.labels, pooled.labels_),
    }
    print(f"mean squared distance: federated {figures['federated_msd']:.2f}, pooled "
          f"{figures['pooled_msd']:.2f} (ratio {figures['federated_msd'] / figures['pooled_msd']:.3f})")
    print(f"adjusted Rand index against the digits: federated {figures['federated_ari']:.3f}, "
          f"pooled {figures['pooled_ari']:.3f}")

    # 5. the run's report
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    print(f"report: {write_report(federated.result_, out_dir)}")
    return figures


if __name__ == "__main__":
    main(*sys.argv[1:2])
