"""Hungarian matching of one centroid set to another.

The l2-distance between two centroid sets of Xu et al. (paper ``004``, Table 1;
:func:`fedcluster.metrics.centre_distance`) is the root of the summed squared
distances under the best one-to-one matching: :func:`match_to_reference`
finds that matching, :func:`match_order` uses it to keep centroid ``j`` of one
round centroid ``j`` of the next (FKM, FFCM avg2). M-Avg, which averages
matched sets, is :mod:`fedcluster.methods.mavg.kernels`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .backend import to_numpy
from .distance import sq_distances

__all__ = ["match_order", "match_to_reference"]


def _as_set(centroids: Any, name: str, dim: int | None = None) -> np.ndarray:
    centroids = np.asarray(to_numpy(centroids), dtype=np.float64)
    if centroids.ndim != 2 or centroids.shape[0] < 1 or (dim is not None and centroids.shape[1] != dim):
        wanted = f"(k, {dim})" if dim is not None else "(k, d)"
        raise ValueError(
            f"{name} must be a non-empty array of shape {wanted}, got shape {centroids.shape}")
    if not np.all(np.isfinite(centroids)):
        raise ValueError(f"{name} must not contain NaN or infinity")
    return centroids


def match_to_reference(centroids: Any, reference: Any) -> np.ndarray:
    """The one-to-one matching of ``centroids`` to ``reference`` with the least total squared distance.

    Parameters
    ----------
    centroids : array of shape (k_m, d)
        One client's centroids, ``k_m <= k``: a smaller set is matched to a
        subset of the reference.
    reference : array of shape (k, d)
        The reference centroids.

    Returns
    -------
    ndarray of int, shape (k_m,)
        The reference slot of each centroid, all distinct.
    """
    reference = _as_set(reference, "reference")
    centroids = _as_set(centroids, "centroids", reference.shape[1])
    if len(centroids) > len(reference):
        raise ValueError(f"cannot match {len(centroids)} centroids one-to-one to {len(reference)} slots")
    # Imported here: scipy.optimize costs about a second to import, and only the servers of
    # M-Avg and FFCM avg2 match centroids (every client process would pay it otherwise).
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(sq_distances(centroids, reference))
    slots = np.empty(len(centroids), dtype=np.int64)
    slots[rows] = cols
    return slots


def match_order(new: Any, reference: Any) -> np.ndarray:
    """Reorder ``new`` so that row ``j`` is the one matched to ``reference[j]``.

    Both hold ``k`` centroids; the matching is :func:`match_to_reference`'s.
    Strategies that recompute their centroids from scratch each round use it so
    that a centroid keeps its index from round to round and the movement
    between rounds measures how far the centroids moved, not how they were
    numbered.
    """
    new = _as_set(new, "new")
    if len(new) != len(_as_set(reference, "reference")):
        raise ValueError(f"need as many centroids as the reference, got {len(new)} and {len(reference)}")
    ordered = np.empty_like(new)
    ordered[match_to_reference(new, reference)] = new
    return ordered


