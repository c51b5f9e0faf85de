"""The server's side of the federated metrics: add the clients' statistics, derive the metrics.

Every metric here is computed from sums that the clients computed on their
own rows (:func:`fedcluster.metrics.local.local_statistics`), and equals the
same metric computed on the pooled rows, to rounding. The keys of
:func:`combine`:

``n``, ``score``, ``sse``
    Rows; SSE / n, the DWF paper's score (``000``, 3.3); the sum of squared
    distances of the rows to their nearest centroid (the k-means objective).
``accuracy``, ``purity``
    The same number: the sum over clusters of the count of the cluster's most
    frequent label, divided by n. ``accuracy`` is the DWF paper's accuracy with
    its majority mapping (each predicted cluster mapped to its most frequent
    true label, the authors' ``map_pred_to_true``); ``purity`` is the
    standard purity.
``cluster_purity``
    The unweighted mean over non-empty clusters of majority count / cluster
    size: one reading of the FeCA paper's "average Purity for all clusters"
    (``004``, section 6); the other reading is ``purity``.
``homogeneity``, ``completeness``, ``v_measure``, ``nmi``, ``ari``
    As scikit-learn's ``homogeneity_completeness_v_measure`` (natural log,
    beta = 1; DWF paper), ``normalized_mutual_info_score`` (arithmetic mean of
    the entropies, the FeCA paper's ``2 I / (H(X) + H(Y))``) and
    ``adjusted_rand_score`` (Garst paper, ``002``), edge cases included.
``davies_bouldin``
    Mean over non-empty clusters ``i`` of the largest ``(S_i + S_j) / ||r_i -
    r_j||``, ``S_i`` the mean distance of cluster ``i``'s rows to its
    reference centre ``r_i``. With the centroids as reference (the default)
    it is the Triebe paper's index (``003``, its authors' ``davies_bouldin``);
    with the cluster means (:func:`cluster_means`, a second pass) it is
    scikit-learn's ``davies_bouldin_score``; at a Lloyd fixed point the two
    agree.
``mean_intra_distance``
    Mean Euclidean distance of a row to its reference centre (Triebe paper,
    2.2).
``simplified_silhouette``
    Mean over rows of ``(b - a) / max(a, b)``, ``a`` the distance to the own
    reference centre, ``b`` to the nearest other one (all ``k`` centres
    count, empty clusters' too); Hruschka et al. 2004, as in the Garst paper.
``ffcm_within_sse``, ``ffcm_outside_sse``
    Sum of Euclidean distances of the rows to their own (to the other ``k -
    1``) reference centres, divided by ``n * d``: the numbers of the FFCM
    paper's Tables 2-4 (``001``; see below).
``ffcm_within_sse_squared``, ``ffcm_outside_sse_squared``
    The same with squared distances (to the centroids for the within sum):
    the formulas as the FFCM paper prints them.
``centre_distance``
    l2 distance to the true centres after optimal one-to-one matching (FeCA
    paper, Table 1).
``knowledge_gap``, ``normalised_knowledge_gap``
    Sum over the centroids of the distance to the nearest true centre; the
    second divided by ``sqrt(d)`` (FFCM paper, Table 5).
``empty_clusters``
    Centroids no row is nearest to.

The label metrics need every client's contingency table (only per-cluster
label counts leave a client) and are absent when there are no labels;
``centre_distance`` and the knowledge gaps need ``true_centres`` and are
absent without; the Davies-Bouldin index needs two non-empty clusters and the silhouette two
centroids. Absent means the key is missing, never NaN.

FFCM's within/outside "SSE": the paper prints squared distances divided by
``N * d``, but the numbers of its Tables 2-4 are plain Euclidean distances
divided by ``N * d`` (its authors' ``within_cluster_sse`` sums ``cdist``
distances; case 3, four unit-variance clusters 10 apart, gives 0.63 =
E||z|| / 2 for a 2-D standard normal ``z``, where squared distances would
give 1.0). ``ffcm_within_sse`` and ``ffcm_outside_sse`` are that measure,
the ``_squared`` keys the printed formulas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from ..numerics.distance import sq_distances
from .centres import centre_distance, knowledge_gap, normalised_knowledge_gap
from .local import LocalStatistics

__all__ = [
    "cluster_means",
    "combine",
    "contingency_metrics",
    "sum_statistics",
]


def sum_statistics(stats: Sequence[LocalStatistics]) -> LocalStatistics:
    """Add the statistics of several clients (the server's only use of them).

    The result is the statistics of the union of their rows: ``label_values``
    is the union of the clients' vocabularies, and ``contingency`` the sum of
    their tables on it.

    Raises
    ------
    ValueError
        If ``stats`` is empty, the clients disagree on ``k`` or ``d``, or some
        sent a contingency table and others did not.
    """
    stats = list(stats)
    if not stats:
        raise ValueError("no client statistics to combine")
    k, d = stats[0].sums.shape
    for s in stats:
        if s.sums.shape != (k, d):
            raise ValueError(f"clients disagree on (k, d): {(k, d)} and {s.sums.shape}")
    labelled = [s.contingency is not None for s in stats]
    if any(labelled) and not all(labelled):
        raise ValueError(
            f"{labelled.count(False)} of {len(stats)} clients sent no contingency table; "
            "label metrics need every client's labels"
        )
    vocabulary = table = None
    if all(labelled):
        vocabulary = np.unique(np.concatenate([s.label_values for s in stats]))
        table = np.zeros((k, len(vocabulary)), dtype=np.int64)
        for s in stats:
            table[:, np.searchsorted(vocabulary, s.label_values)] += s.contingency
    cluster_sse = np.sum([s.cluster_sse for s in stats], axis=0)
    return LocalStatistics(
        n=int(sum(s.n for s in stats)),
        counts=np.sum([s.counts for s in stats], axis=0).astype(np.int64),
        sums=np.sum([s.sums for s in stats], axis=0),
        cluster_sse=cluster_sse,
        sse=float(math.fsum(s.sse for s in stats)),
        distance_sums=np.sum([s.distance_sums for s in stats], axis=0),
        outside_distance=math.fsum(s.outside_distance for s in stats),
        outside_sse=math.fsum(s.outside_sse for s in stats),
        silhouette_sum=math.fsum(s.silhouette_sum for s in stats),
        label_values=vocabulary,
        contingency=table,
    )


def cluster_means(
    stats: Sequence[LocalStatistics] | LocalStatistics, centroids: ArrayLike
) -> np.ndarray:
    """Cluster means from the clients' sums and counts; an empty cluster keeps its centroid.

    The ``reference`` of a second pass of :func:`local_statistics` that makes
    ``davies_bouldin`` and ``simplified_silhouette`` those of the pooled
    assignment measured to cluster means (scikit-learn's Davies-Bouldin;
    Garst & Reinders' federated simplified silhouette).
    """
    total = stats if isinstance(stats, LocalStatistics) else sum_statistics(stats)
    centroids = np.asarray(centroids, dtype=np.float64)
    if centroids.shape != total.sums.shape:
        raise ValueError(f"centroids must have shape {total.sums.shape}, got {centroids.shape}")
    filled = total.counts > 0
    safe = np.where(filled, total.counts, 1)
    return np.where(filled[:, None], total.sums / safe[:, None], centroids)


def combine(
    stats: Sequence[LocalStatistics],
    centroids: ArrayLike,
    *,
    true_centres: ArrayLike | None = None,
    reference: ArrayLike | None = None,
) -> dict[str, float]:
    """Combine the clients' statistics into the metrics of the module table.

    Parameters
    ----------
    stats : sequence of LocalStatistics
        One per client, all computed for ``centroids`` (and ``reference``).
    centroids : array of shape (k, d)
        The centroids the statistics were computed for.
    true_centres : array of shape (k*, d), optional
        Known generating centres; adds ``centre_distance``,
        ``knowledge_gap`` and ``normalised_knowledge_gap`` (of ``centroids``).
    reference : array of shape (k, d), optional
        The ``reference`` the clients measured plain distances to, if not
        the centroids; the Davies-Bouldin index separates these centres.

    Returns
    -------
    dict of str to float
        The metrics that the statistics allow; see the module table.
    """
    total = sum_statistics(stats)
    k, d = total.k, total.dimension
    centroids = np.asarray(centroids, dtype=np.float64)
    if centroids.shape != (k, d):
        raise ValueError(f"centroids must have shape {(k, d)}, got {centroids.shape}")
    centres = centroids if reference is None else np.asarray(reference, dtype=np.float64)
    if centres.shape != (k, d):
        raise ValueError(f"reference must have shape {(k, d)}, got {centres.shape}")
    n = total.n
    if n == 0:
        raise ValueError("the clients hold no rows")
    nd = n * d
    out: dict[str, float] = {
        "n": float(n),
        "score": total.sse / n,
        "sse": total.sse,
        "empty_clusters": float(np.count_nonzero(total.counts == 0)),
        "mean_intra_distance": float(total.distance_sums.sum()) / n,
        "ffcm_within_sse": float(total.distance_sums.sum()) / nd,
        "ffcm_outside_sse": total.outside_distance / nd,
        "ffcm_within_sse_squared": total.sse / nd,
        "ffcm_outside_sse_squared": total.outside_sse / nd,
    }
    if k >= 2:
        out["simplified_silhouette"] = total.silhouette_sum / n
    filled = total.counts > 0
    if np.count_nonzero(filled) >= 2:
        out["davies_bouldin"] = _davies_bouldin(
            total.distance_sums[filled] / total.counts[filled], centres[filled])
    if total.contingency is not None:
        out.update(contingency_metrics(total.contingency))
    if true_centres is not None:
        out["centre_distance"] = centre_distance(centroids, true_centres)
        out["knowledge_gap"] = knowledge_gap(centroids, true_centres)
        out["normalised_knowledge_gap"] = normalised_knowledge_gap(centroids, true_centres)
    return out


def _davies_bouldin(spread: np.ndarray, centres: np.ndarray) -> float:
    """Davies-Bouldin index from mean distances and centres, with scikit-learn's edge cases."""
    separation = np.sqrt(sq_distances(centres, centres, summation="pairwise"))
    if np.allclose(spread, 0.0) or np.allclose(separation, 0.0):
        return 0.0
    separation[separation == 0] = np.inf
    ratios = (spread[:, None] + spread[None, :]) / separation
    return float(np.mean(np.max(ratios, axis=1)))


def contingency_metrics(table: ArrayLike) -> dict[str, float]:
    """Label metrics from a cluster-by-label contingency table (rows: clusters, columns: labels).

    Empty rows and columns (clusters without rows, labels without rows) are
    ignored, as scikit-learn, which only sees the labels present, ignores
    them. The formulas follow scikit-learn's ``mutual_info_score``,
    ``homogeneity_completeness_v_measure``, ``normalized_mutual_info_score``
    (arithmetic mean) and ``adjusted_rand_score``, edge cases included.
    """
    table = np.asarray(table, dtype=np.int64)
    if table.ndim != 2 or (table < 0).any():
        raise ValueError(
            f"a contingency table must be a 2-D array of counts, got shape {table.shape}")
    table = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0]
    n = int(table.sum())
    if n == 0:
        raise ValueError("the contingency table is empty")
    majority = table.max(axis=1)
    sizes = table.sum(axis=1)
    # scikit-learn's orientation: rows = true classes, columns = predicted clusters.
    classes_by_clusters = table.T
    class_counts = classes_by_clusters.sum(axis=1)
    cluster_counts = classes_by_clusters.sum(axis=0)
    entropy_c = _entropy(class_counts)
    entropy_k = _entropy(cluster_counts)
    mi = _mutual_info(classes_by_clusters)
    homogeneity = mi / entropy_c if entropy_c else 1.0
    completeness = mi / entropy_k if entropy_k else 1.0
    v_measure = 0.0 if homogeneity + completeness == 0.0 else (
        2.0 * homogeneity * completeness / (homogeneity + completeness))
    if len(class_counts) == len(cluster_counts) == 1:
        nmi = 1.0
    elif mi == 0:
        nmi = 0.0
    else:
        nmi = mi / float(np.mean([entropy_c, entropy_k]))
    return {
        "accuracy": float(majority.sum()) / n,
        "purity": float(majority.sum()) / n,
        "cluster_purity": float(np.mean(majority / sizes)),
        "homogeneity": float(homogeneity),
        "completeness": float(completeness),
        "v_measure": float(v_measure),
        "nmi": float(nmi),
        "ari": _adjusted_rand(classes_by_clusters),
    }


def _entropy(counts: np.ndarray) -> float:
    """Entropy (natural log) of a labelling given its class counts (all > 0)."""
    if counts.size <= 1:
        return 0.0
    pi = counts.astype(np.float64)
    total = pi.sum()
    return float(-np.sum((pi / total) * (np.log(pi) - math.log(total))))


def _mutual_info(table: np.ndarray) -> float:
    """Mutual information of a contingency table without empty rows or columns."""
    if table.shape[0] == 1 or table.shape[1] == 1:
        return 0.0
    nzx, nzy = np.nonzero(table)
    nz_val = table[nzx, nzy].astype(np.float64)
    total = float(table.sum())
    pi = table.sum(axis=1)
    pj = table.sum(axis=0)
    log_nz = np.log(nz_val)
    share = nz_val / total
    outer = pi[nzx].astype(np.int64) * pj[nzy].astype(np.int64)
    log_outer = -np.log(outer) + math.log(pi.sum()) + math.log(pj.sum())
    mi = share * (log_nz - math.log(total)) + share * log_outer
    mi = np.where(np.abs(mi) < np.finfo(mi.dtype).eps, 0.0, mi)
    return float(np.clip(mi.sum(), 0.0, None))


def _adjusted_rand(table: np.ndarray) -> float:
    """Adjusted Rand index from a contingency table (exact integer pair counts)."""
    n = int(table.sum())
    rows = [int(v) for v in table.sum(axis=1)]
    cols = [int(v) for v in table.sum(axis=0)]
    cells = [[int(v) for v in row] for row in table]
    sum_squares = sum(v * v for row in cells for v in row)
    tp = sum_squares - n
    fp = sum(v * cols[j] for row in cells for j, v in enumerate(row)) - sum_squares
    fn = sum(v * rows[i] for i, row in enumerate(cells) for v in row) - sum_squares
    tn = n * n - fp - fn - sum_squares
    if fn == 0 and fp == 0:
        return 1.0
    return 2.0 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn))
