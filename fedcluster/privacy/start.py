"""A private start (``init = private``): a DP histogram over cells of the bounds, clustered by the server.

The server lays :func:`cell_count` cells over the DP run's bounds (declared
or estimated: :mod:`.bounds`), the points of a scrambled Halton sequence
(:func:`cells`; a cell is the region nearest its point), and asks every
client for the number of its rows nearest each point; their total, through
secure aggregation, gets the Gaussian mechanism's noise (from the server
under central DP, in shares from the clients under distributed DP), and the
server runs weighted k-means over the cells' points with the noisy counts as
weights (:func:`centres_from_counts`: post-processing). The release is one
Gaussian mechanism of its own multiplier ``z_s``, for ``dp-start-share`` of
the budget (:mod:`.accountant`).

It is a DP coreset of the data in the spirit of Google's practical DP
clustering (a noisy histogram over a partition of the space, then
non-private clustering of its weighted cells); the choices made here:

* **The partition**: Voronoi cells of low-discrepancy points rather than a
  regular grid or LSH buckets, so its size is chosen freely at any
  dimension: :data:`CELLS_PER_CENTRE` ``k`` cells, at least
  :data:`CELLS_MIN` and at most :data:`CELLS_MAX`. More cells place the
  centres more finely and spread each cluster's rows thinner against the
  same noise.
* **Sensitivity**: a row adds 1 to one count (it is counted where it lies,
  not clipped), so the L2 sensitivity is 1 and the noise per count is
  ``z_s``: far less than a Lloyd round's, whose sums carry the data's scale.
* **The read-off**: counts below :data:`KEEP_SDS` noise deviations are
  taken as empty (post-processing), and weighted k-means (k-means++,
  :data:`N_INIT` starts, Lloyd to convergence) runs over the cells kept;
  with fewer than ``k`` cells kept the start falls back to the spread start
  (:func:`~fedcluster.numerics.spread_in_box`) with a warning: the budget is
  spent either way.
* **A dishonest client** can add counts anywhere (the total is never refused,
  so it cannot fail the run or get an honest client rejected); it then moves
  the start, which the rounds' Lloyd steps go on from, as a liar's sums
  would move a round.
"""

from __future__ import annotations

import numpy as np

#: Cells per centre, and at least / at most this many in all.
CELLS_PER_CENTRE = 32
CELLS_MIN = 128
CELLS_MAX = 4096
#: Counts below this many noise standard deviations are taken as empty.
KEEP_SDS = 3.0
#: Restarts of the server's weighted k-means over the cells.
N_INIT = 10


def cell_count(k: int) -> int:
    """The number of cells of a start of ``k`` centres."""
    return int(np.clip(CELLS_PER_CENTRE * k, CELLS_MIN, CELLS_MAX))


def cells(low: np.ndarray, high: np.ndarray, k: int, *, rng: np.random.Generator) -> np.ndarray:
    """The cells' points: a scrambled Halton sequence in the box (scramble from ``rng``)."""
    from scipy.stats import qmc

    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    return low + qmc.Halton(d=low.size, scramble=True, seed=rng).random(cell_count(k)) * (high - low)


def centres_from_counts(points: np.ndarray, counts: np.ndarray, sigma: float, k: int, *,
                        rng: np.random.Generator) -> np.ndarray | None:
    """Weighted k-means of the cells' points by their noisy counts; None with fewer than ``k``
    cells above the threshold (the caller falls back)."""
    from ..numerics import kmeans

    counts = np.nan_to_num(np.asarray(counts, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    kept = counts >= max(KEEP_SDS * sigma, np.finfo(np.float64).tiny)
    if np.count_nonzero(kept) < k:
        return None
    result = kmeans(points[kept], k, rng=rng, sample_weight=counts[kept], n_init=N_INIT,
                    max_iter=300, tol=1e-9)
    return np.array(result.centroids, dtype=np.float64)
