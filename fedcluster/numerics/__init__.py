"""Flower-free numerical core of fedcluster: k-means kernels and DWF aggregation.

Every kernel accepts NumPy or CuPy arrays and returns arrays of the same kind.
"""

from .aggregate import frobenius_movement, momentum_update, movement_tolerance, weighted_centroid_mean
from .backend import get_namespace, namespace_of, to_numpy
from .kfed import farthest_point_seeds, kfed_centres
from .kmeans import kmeans
from .lloyd import (
    DEFAULT_CHUNK_SIZE,
    ClusterStats,
    LloydResult,
    assign,
    cluster_stats,
    lloyd,
    update_centroids,
)
from .seeding import kmeans_plusplus, random_in_box
from .spread import spread_in_box

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "ClusterStats",
    "LloydResult",
    "assign",
    "cluster_stats",
    "farthest_point_seeds",
    "frobenius_movement",
    "get_namespace",
    "kfed_centres",
    "kmeans",
    "kmeans_plusplus",
    "lloyd",
    "momentum_update",
    "movement_tolerance",
    "namespace_of",
    "random_in_box",
    "spread_in_box",
    "to_numpy",
    "update_centroids",
    "weighted_centroid_mean",
]
