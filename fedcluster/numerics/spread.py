"""A data-independent start whose centres lie spread apart in a box (``init = spread``).

Uniform draws in a box (:func:`~.seeding.random_in_box`) put some centres
next to each other and some in a corner; Lloyd's steps then merge the close
ones and leave the far ones without a point, which under DP no later round
repairs (DP-Lloyd's main error on S1 and G2 is its start, not its noise).
:func:`spread_in_box` instead gives the centres of a centroidal Voronoi
tessellation of the box: the ``k`` points that minimise the mean squared
distance of a uniform point of the box to its nearest one, i.e. the k-means
solution for data that fill the box evenly. They lie apart from each other
and away from the faces (each at the middle of its cell), and no row is
looked at, so no privacy budget is spent.

Measured (5 Lloyd steps on the pooled data from the start, mean over seeds
0-9 of the score over the centralized score): S1 in ``0:1e6``, k = 15:
uniform 2.46, this start 1.55 (a greedy max-min packing: 2.09); g2-16-30 in
``0:1100``, k = 2: uniform 1.84 (the two Gaussians merged in 3 seeds of 10),
this start 1.00 in every seed.

The choices, none of them from a paper:

* **The uniform box as points**: ``max(CANDIDATES_MIN, CANDIDATES_PER_CENTRE
  k)`` points of a scrambled Halton sequence (scipy's ``qmc.Halton``; low
  discrepancy, so they cover the box evenly at any dimension), scaled into
  the box; the scramble is drawn from the run's generator, so a seed fixes
  the start.
* **The tessellation**: :func:`~.kmeans.kmeans` over those points (one
  k-means++ start, Lloyd to :data:`LLOYD_TOL` or :data:`LLOYD_STEPS` steps;
  a local optimum, which is all a start needs).
* Distances are in the box's own units (k-means' units), not scaled per
  feature.
"""

from __future__ import annotations

import numpy as np

#: Points of the box per centre, and at least this many in all.
CANDIDATES_PER_CENTRE = 64
CANDIDATES_MIN = 1024
#: Lloyd's steps and tolerance of the tessellation.
LLOYD_STEPS = 100
LLOYD_TOL = 1e-6


def spread_in_box(low: np.ndarray, high: np.ndarray, k: int, *, rng: np.random.Generator
                  ) -> np.ndarray:
    """``k`` centres spread apart in the box ``[low, high]`` (see the module docstring).

    Parameters
    ----------
    low, high : arrays of shape (d,)
        The box, ``low < high`` per feature (checked by the caller).
    k : int
        Number of centres, at least 1.
    rng : numpy.random.Generator
        Draws the Halton sequence's scramble and the k-means++ seeding.

    Returns
    -------
    ndarray of shape (k, d), float64
    """
    from scipy.stats import qmc

    from .kmeans import kmeans

    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    count = max(CANDIDATES_MIN, CANDIDATES_PER_CENTRE * k)
    points = low + qmc.Halton(d=low.size, scramble=True, seed=rng).random(count) * (high - low)
    result = kmeans(points, k, rng=rng, max_iter=LLOYD_STEPS, tol=LLOYD_TOL)
    return np.array(result.centroids, dtype=np.float64)
