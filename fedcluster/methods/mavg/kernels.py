"""Match averaging of local centroid sets: M-Avg, the baseline of Xu et al., "Jigsaw Game" (``004``).

The paper describes M-Avg in one sentence: it "matches different sets of
centroids from clients by minimizing their l2-distances and returns the means
of matched centroids". The paper's l2-distance between two centroid sets is
the one of its Table 1 (:func:`fedcluster.metrics.centre_distance`): the root
of the summed squared distances under the best one-to-one matching. So a
client's set is matched to a reference set by the Hungarian assignment on
squared distances (:func:`match_to_reference`), and matched centroids are
averaged without weights.

Where the paper is silent, :func:`match_average` alternates the two steps to
a fixed point: match every set to the current reference, replace each
reference centroid by the mean of the centroids matched to it, repeat until no
matching changes. Each step can only lower the total squared distance of the
matched centroids to their means, so the result depends little on the starting
reference; :func:`best_match_average` still starts from every set that has the
most centroids and keeps the lowest total, so that no single client's set is
privileged and the outcome does not depend on the order of the sets (except
for exact ties, which go to the first).

Means of matched centroids can fall where no data is: on non-IID clients a
slot may average centroids of different true clusters. :func:`fill_empty_slots`
replaces the slots found empty by the local centroids the other slots represent
worst (see :class:`fedcluster.methods.mavg.strategy.MatchAveraging`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ...numerics._validation import check_positive_int
from ...numerics.backend import to_numpy
from ...numerics.distance import sq_distances
from ...numerics.matching import _as_set, match_to_reference


class MatchResult(NamedTuple):
    """Outcome of :func:`match_average`.

    Attributes
    ----------
    centroids : ndarray of shape (k, d)
        The averaged centroids, one per reference slot.
    slots : list of ndarray
        For each input set, the slot each of its centroids is matched to.
    cost : float
        Sum of the squared distances of all matched centroids to their slot's centroid.
    n_iter : int
        Matching rounds run (the last one confirmed the fixed point, unless
        ``max_iter`` was reached).
    """

    centroids: np.ndarray
    slots: list[np.ndarray]
    cost: float
    n_iter: int


def match_average(local_sets: Sequence[Any], reference: Any, *, max_iter: int = 100) -> MatchResult:
    """Match every set to the reference and average, until the matching no longer changes.

    Parameters
    ----------
    local_sets : sequence of arrays of shape (k_m, d)
        The clients' centroids, each with at most as many as ``reference``.
    reference : array of shape (k, d)
        The starting reference.
    max_iter : int, default=100
        Largest number of matching rounds.

    Returns
    -------
    MatchResult
        A slot no centroid is matched to keeps its reference centroid.
    """
    max_iter = check_positive_int(max_iter, "max_iter")
    current = _as_set(reference, "reference").copy()
    sets = [_as_set(s, f"local_sets[{i}]", current.shape[1]) for i, s in enumerate(local_sets)]
    if not sets:
        raise ValueError("no centroid sets to match")
    stacked = np.concatenate(sets)
    slots: list[np.ndarray] = []
    for n_iter in range(1, max_iter + 1):
        new_slots = [match_to_reference(s, current) for s in sets]
        if slots and all(np.array_equal(a, b) for a, b in zip(slots, new_slots)):
            break
        slots = new_slots
        flat = np.concatenate(slots)
        counts = np.bincount(flat, minlength=len(current))
        sums = np.zeros_like(current)
        np.add.at(sums, flat, stacked)
        filled = counts > 0
        current[filled] = sums[filled] / counts[filled, None]
    flat = np.concatenate(slots)
    cost = float(np.sum((stacked - current[flat]) ** 2))
    return MatchResult(current, slots, cost, n_iter)


def best_match_average(local_sets: Sequence[Any], *, max_iter: int = 100) -> MatchResult:
    """:func:`match_average` from each largest set as reference; the lowest cost wins.

    Parameters
    ----------
    local_sets : sequence of arrays of shape (k_m, d)
        The clients' centroids, in an order that does not depend on the
        clients (ties of the cost go to the first starting set).
    max_iter : int, default=100
        Largest number of matching rounds per start.

    Returns
    -------
    MatchResult
        With as many centroids as the largest set.
    """
    sets = [_as_set(s, f"local_sets[{i}]") for i, s in enumerate(local_sets)]
    if not sets:
        raise ValueError("no centroid sets to match")
    largest = max(len(s) for s in sets)
    best: MatchResult | None = None
    for start in (s for s in sets if len(s) == largest):
        result = match_average(sets, start, max_iter=max_iter)
        if best is None or result.cost < best.cost:
            best = result
    return best


def fill_empty_slots(centroids: Any, empty: Any, local_centroids: Any, local_counts: Any,
                     used: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Put the worst-represented local centroids into the empty slots.

    The empty slots are filled one at a time, in index order. Each takes the
    local centroid not yet used with the largest ``count * d2``, where ``d2``
    is its squared distance to the nearest centroid that is not empty (the
    slots that hold points and those filled so far): the local cluster whose
    points the global centroids serve worst (the deterministic, greedy form of
    k-means++ seeding over the clients' centroids weighted by their counts).

    Parameters
    ----------
    centroids : array of shape (k, d)
        The global centroids.
    empty : array of shape (k,), bool
        Slots to fill.
    local_centroids : array of shape (m, d)
        All clients' local centroids, in an order that does not depend on the
        clients (ties go to the first).
    local_counts : array of shape (m,)
        Their counts (> 0).
    used : array of shape (m,), bool, optional
        Local centroids placed before, not to be placed again.

    Returns
    -------
    centroids : ndarray of shape (k, d), float64
        With the filled slots replaced; a slot stays as it was when no unused
        local centroid lies away from the other centroids (``count * d2 = 0``).
    used : ndarray of shape (m,), bool
        ``used`` with the local centroids placed now.
    """
    new = _as_set(centroids, "centroids").copy()
    local = _as_set(local_centroids, "local_centroids", new.shape[1])
    empty = np.asarray(to_numpy(empty), dtype=bool)
    counts = np.asarray(to_numpy(local_counts), dtype=np.float64)
    used = np.zeros(len(local), dtype=bool) if used is None else np.array(to_numpy(used), dtype=bool)
    if empty.shape != (len(new),):
        raise ValueError(f"empty must have shape ({len(new)},), got {empty.shape}")
    if counts.shape != (len(local),) or used.shape != (len(local),):
        raise ValueError(f"local_counts and used must have shape ({len(local)},), "
                         f"got {counts.shape} and {used.shape}")
    if not np.all(np.isfinite(counts)) or np.any(counts < 0):
        raise ValueError("local_counts must be finite and >= 0")
    anchors = new[~empty]
    d2 = (sq_distances(local, anchors).min(axis=1) if len(anchors)
          else np.full(len(local), np.inf))
    for slot in np.flatnonzero(empty):
        gain = np.where(used, -1.0, counts * d2)
        best = int(np.argmax(gain))
        if not gain[best] > 0:
            break
        new[slot] = local[best]
        used[best] = True
        d2 = np.minimum(d2, sq_distances(local, local[best:best + 1])[:, 0])
    return new, used
