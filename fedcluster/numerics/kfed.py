"""k-FED's server step (Dennis, Li & Smith, ICML 2021), Flower-free.

Every client sends the centres of its local k'-means; the server starts from
the centres of one client chosen at random ("pick any device"), adds the
received centre farthest from those chosen so far until it has ``k``
(farthest-point traversal), assigns every received centre to its nearest
seed and returns the mean of each group: one round of Lloyd's method over the
received centres, as k-FED's central step does (Algorithm 2 of Dennis, Li &
Smith; the k-FED code the FeCA authors ran for their baseline also stops after
one Lloyd iteration). The centres are unweighted, as in k-FED: the clients'
counts are not needed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .distance import sq_distances
from .lloyd import lloyd

__all__ = ["farthest_point_seeds", "kfed_centres"]


def farthest_point_seeds(points: np.ndarray, start: np.ndarray, k: int) -> np.ndarray:
    """Extend ``start`` with the farthest points of ``points`` until there are ``k``.

    Each step adds the point whose distance to its nearest chosen seed is
    largest (ties: the first such point).
    """
    points = np.asarray(points, dtype=np.float64)
    seeds = [np.asarray(c, dtype=np.float64) for c in start]
    if not seeds or len(seeds) > k:
        raise ValueError(f"need between 1 and k = {k} starting seeds, got {len(seeds)}")
    nearest = sq_distances(points, np.array(seeds), summation="pairwise").min(axis=1)
    while len(seeds) < k:
        far = int(np.argmax(nearest))
        seeds.append(points[far])
        nearest = np.minimum(nearest, sq_distances(points, points[far:far + 1],
                                                   summation="pairwise")[:, 0])
    return np.array(seeds)


def kfed_centres(
    local_centres: Sequence[np.ndarray],
    k: int,
    *,
    rng: np.random.Generator,
) -> np.ndarray:
    """k global centres from the clients' local centres (k-FED's central step).

    Parameters
    ----------
    local_centres : sequence of ndarray of shape (k_i, d)
        One array per client.
    k : int
        Number of global centres.
    rng : numpy.random.Generator
        Chooses the client whose centres start the traversal (and, when that
        client has more than k centres, the one of them that starts it).

    Returns
    -------
    ndarray of shape (k, d)
        The means of the received centres grouped by their nearest seed, in
        the order the seeds were chosen.

    Raises
    ------
    ValueError
        Fewer than ``k`` distinct centres were received, or shapes disagree.
    """
    if not local_centres:
        raise ValueError("no client sent centres")
    arrays = [np.asarray(c, dtype=np.float64) for c in local_centres]
    if any(a.ndim != 2 or a.shape[1] != arrays[0].shape[1] or len(a) == 0 for a in arrays):
        raise ValueError("every client's centres must be a non-empty (k_i, d) array with one d")
    points = np.concatenate(arrays)
    distinct = np.unique(points, axis=0).shape[0]
    if distinct < k:
        raise ValueError(f"k-FED received {distinct} distinct centres, fewer than k = {k}")
    first = arrays[int(rng.integers(len(arrays)))]
    start = first if len(first) <= k else first[[int(rng.integers(len(first)))]]
    seeds = farthest_point_seeds(points, start, k)
    return np.asarray(lloyd(points, seeds, max_iter=1).centroids)
