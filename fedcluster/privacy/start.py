"""A private start (``init = private``): a DP coreset of noisy cell means, clustered by the server.

The server lays :func:`cell_count` cells over the DP run's bounds (declared
or estimated: :mod:`.bounds`), the points of a scrambled Halton sequence,
moved onto the sphere where the rows lie when the bounds were estimated in
many dimensions (:func:`cells`; a cell is the region nearest its point), and asks every
client, per cell, for the sum of its rows nearest the point, clipped and
shifted exactly as a Lloyd round's sum form clips them
(:class:`~.mechanism.Clipping`), and their number. Their totals, through
secure aggregation, get the rounds' Gaussian mechanism
(:func:`~.mechanism.add_noise`: from the server under central DP, in shares
from the clients under distributed DP), and the server runs weighted k-means
over the cells' noisy means with the noisy counts as weights
(:func:`centres_from_cells`: post-processing). The release is one Gaussian
mechanism of its own multiplier ``z_s``, for ``dp-start-share`` of the budget
(:mod:`.accountant`).

It is a DP coreset in the sense of Google's practical DP clustering (a noisy
sum and count per cell of a partition, each cell represented by its noisy
mean, then non-private clustering of the weighted representatives); the
choices made here:

* **The partition**: Voronoi cells of low-discrepancy points drawn by the
  server (its seeded generator scrambles them: the server's randomness, not
  the data's) rather than Google's tree of LSH splits, which needs one
  release per level of the tree. The cells need not fit the data: a
  representative is the mean of the rows in its cell, which lies in the
  cluster the cell holds, wherever the cell's point lies (in 100 dimensions
  no cell point lies near a cluster; the counts-only start that placed
  centres at the points scored worse than one centre there). But which
  rows share a cell matters, and in many dimensions points uniform in the
  box do not split the data: a row goes to the point ``p`` that maximises
  ``x . p - ||p||^2 / 2``, the points' norms differ more than their
  products with a row, and the data fall into the few cells nearest the
  box's centre (100-D, ``k`` = 64: about 120 of 2,048 cells occupied, 20 of
  them by two clusters, 5-9 clusters with no cell of their own). So when
  the bounds were estimated and the box's points lie on a shell themselves
  (their distances from the centre vary by less than :data:`SHELL_SPREAD`
  of their mean: a cube's vary by ``1 / sqrt(5 d)``, so above about 20
  features), every point is moved along its ray from the box's centre to
  the rows' root-mean-square distance from it (:func:`~.bounds.rms_distance`,
  read off the bounds step's histogram: no budget): on that sphere the norms
  are equal and a row goes to the point nearest in direction, a
  random-hyperplane partition of the data's shell. Moving only every second
  point (the first version) keeps the box covered but fails where the rows
  lie far outside the box points' own shell: on MNIST (sparse rows, R^2
  about 3 x the box points' squared distance from the centre) the unmoved
  points took every row, 1-3 of 320 cells passed the noise and 3 of 24 runs
  ended at 3.4-5.8 x the centralized score; with every point moved, 6 of 6
  at 1.05-1.08. In few dimensions the box's points already spread over the
  data, and a ring of points there cuts clusters in wedges (S1, 2-D, with
  every second point moved: 2.42 x the centralized score against 1.23
  without). Measured (``BENCHMARKS.md``, "Beside Google's"): ``k`` = 64
  ends at 0.043 normalised after one round (3 seeds; 0.049 with every
  second point moved), against 0.11 (seed 0) from the box's points alone. Declared bounds come with no
  histogram: their cells are the box's points alone. The number of cells is
  :data:`CELLS_PER_CENTRE` ``k``, at least :data:`CELLS_MIN` and at most
  :data:`CELLS_MAX`, and at most :data:`VALUES_MAX` values ``cells (d + 1)``
  in all (what a client masks and the server noises: 2,048 cells of 101
  values at ``k`` = 64 in 100 dimensions, 0.2 M values). More cells split
  fewer clusters' rows into one cell and spread each cluster thinner against
  the same noise; measured from the box's points alone: 100-D, ``k`` = 64:
  512 / 1,024 / 2,048 cells start at 0.27 / 0.25 / 0.17 normalised.
* **Sensitivity**: a row adds its clipped, shifted vector (norm at most
  ``R``) to one cell's sum and 1 to its count, as in a Lloyd round, so the
  release is the rounds' mechanism: (sums, ``w`` counts) with L2
  sensitivity ``Delta = sqrt(R^2 + w^2)``
  (:attr:`~.mechanism.Clipping.sensitivity`), noise ``z_s Delta`` on each sum
  coordinate and ``z_s Delta / w`` on each count.
* **The read-off** (:func:`centres_from_cells`): a cell is kept when its
  noisy count is at least :data:`KEEP_SDS` count noise deviations and its
  sum lies within the rule a secure total of clipped sums obeys
  (:func:`~.checks.sum_limits`: norm at most count ``R`` plus the noise's
  allowance); its representative is the noisy mean shrunk towards the cell's
  point by inverse variances: the mean's noise ``d sigma^2 / count^2``
  against the squared distance from the point to the nearest other point
  (how far the cell's rows may lie from its point). Where cells are fine and
  rows few (S1, 2-D: the noise of a mean of a hundred rows is larger than a
  cell) the point dominates, as in a counts-only histogram; where cells are
  coarse (100-D) the mean does. Weighted k-means (k-means++,
  :data:`N_INIT` starts, Lloyd to convergence) runs over the kept cells;
  its centres are projected into the box. With fewer than ``k`` cells kept
  every kept representative is a centre and the others are spread apart in
  the box (:func:`~fedcluster.numerics.spread_in_box`, the no-budget start),
  with a warning: where the cells follow the data (the sphere above, ``k``
  = 64 in 100-D) a cluster fills one or two cells, the noise may keep fewer
  than ``k`` of them, and each still holds a cluster (measured: a run that
  fell back to the spread start altogether scored 0.735, one centre's
  objective, where its other seeds scored 0.05).
* **A dishonest client** can add counts and sums within the rule anywhere
  (the total is never refused, so it cannot fail the run or get an honest
  client rejected): a cell beyond the rule is dropped, so a liar moves a
  representative at most as far as rows of the box could, and the start,
  which the rounds' Lloyd steps go on from, at most as a liar's sums move a
  round.
"""

from __future__ import annotations

import numpy as np

from .checks import sum_limits
from .mechanism import Clipping

#: Cells per centre, and at least / at most this many in all.
CELLS_PER_CENTRE = 32
CELLS_MIN = 128
CELLS_MAX = 4096
#: At most this many values (sums and counts of all cells) in a client's reply.
VALUES_MAX = 2**18
#: Counts below this many noise standard deviations are taken as empty.
KEEP_SDS = 3.0
#: The box's points are moved to the rows' sphere only where their own distances from the box's
#: centre vary by less than this share of their mean (a cube's: ``1 / sqrt(5 d)``, so above
#: about 20 features).
SHELL_SPREAD = 0.1
#: Restarts of the server's weighted k-means over the cells.
N_INIT = 10


def cell_count(k: int, dim: int) -> int:
    """The number of cells of a start of ``k`` centres in ``dim`` features."""
    return int(min(np.clip(CELLS_PER_CENTRE * k, CELLS_MIN, CELLS_MAX), VALUES_MAX // (dim + 1)))


def cells(low: np.ndarray, high: np.ndarray, k: int, *, rng: np.random.Generator,
          radius: float = 0.0) -> np.ndarray:
    """The cells' points: a scrambled Halton sequence in the box (scramble from ``rng``); where
    their distances from the box's centre vary by less than :data:`SHELL_SPREAD` of their mean,
    every point moved along its ray from the centre to the distance ``radius`` (0: none;
    see the module docstring, "The partition")."""
    from scipy.stats import qmc

    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    points = low + qmc.Halton(d=low.size, scramble=True, seed=rng).random(
        cell_count(k, low.size)) * (high - low)
    centre = (low + high) / 2
    lengths = np.linalg.norm(points - centre, axis=1)
    if radius > 0 and lengths.std() < SHELL_SPREAD * lengths.mean():
        rays = (points - centre) / np.where(lengths > 0, lengths, 1.0)[:, None]
        points = centre + radius * rays
    return points


def centres_from_cells(points: np.ndarray, sums: np.ndarray, counts: np.ndarray,
                       clipping: Clipping, sigma: float, k: int, *,
                       rng: np.random.Generator) -> np.ndarray:
    """Weighted k-means of the kept cells' representatives by their noisy counts (see the
    module docstring); ``sigma`` is the noise's standard deviation on a sum coordinate. With
    fewer than ``k`` cells kept, the representatives themselves (the caller adds the rest)."""
    from scipy.spatial import cKDTree

    from ..numerics import kmeans

    # A liar's non-finite values read as empty cells (the total is never refused).
    sums, counts = (np.nan_to_num(np.asarray(v, dtype=np.float64), nan=0.0, posinf=0.0,
                                  neginf=0.0) for v in (sums, counts))
    dim = points.shape[1]
    sd_count = sigma / clipping.count_weight
    kept = (counts >= max(KEEP_SDS * sd_count, np.finfo(np.float64).tiny)) & (
        np.linalg.norm(sums, axis=1) <= sum_limits(counts, clipping.radius, dim, sigma, sd_count))
    means = clipping.centre + sums[kept] / counts[kept, None]
    spread = cKDTree(points).query(points, 2)[0][kept, 1] ** 2
    noise = dim * sigma ** 2 / counts[kept] ** 2
    # noise > 0 (a DP run's sigma is at least the least multiplier's), so the sum is too.
    representatives = clipping.project(
        (means * spread[:, None] + points[kept] * noise[:, None]) / (spread + noise)[:, None])
    if len(representatives) < k:
        return representatives
    result = kmeans(representatives, k, rng=rng, sample_weight=counts[kept], n_init=N_INIT,
                    max_iter=300, tol=1e-9)
    return clipping.project(np.array(result.centroids, dtype=np.float64))
