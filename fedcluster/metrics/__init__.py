"""Clustering quality measures, computed federatedly (Flower-free).

Each client computes sums over its own rows for the model's centroids
(:func:`local_statistics`); only those sums, per-cluster counts and a
cluster-by-label contingency table leave it. The server adds them and
derives the metrics (:func:`combine`), equal to the same metrics on the
pooled data. :mod:`fedcluster.metrics.pooled` holds the full silhouette,
which needs the pooled data (benchmarks only).

>>> stats = [local_statistics(X_i, centroids, y_i) for X_i, y_i in clients]  # doctest: +SKIP
>>> combine(stats, centroids, true_centres=true)["v_measure"]                 # doctest: +SKIP
"""

from .centres import centre_distance, knowledge_gap, normalised_knowledge_gap
from .federated import cluster_means, combine, contingency_metrics, sum_statistics
from .local import LocalStatistics, local_statistics
from .pooled import silhouette, silhouette_for_centroids

__all__ = [
    "LocalStatistics",
    "centre_distance",
    "cluster_means",
    "combine",
    "contingency_metrics",
    "knowledge_gap",
    "local_statistics",
    "normalised_knowledge_gap",
    "silhouette",
    "silhouette_for_centroids",
    "sum_statistics",
]
