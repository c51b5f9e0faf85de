"""Differentially private Lloyd steps in their sum form: clipping, sensitivity, noise.

A Lloyd step needs, per cluster, the sum of the rows nearest its centroid and
their number. Each client computes both on its own rows (:func:`clipped_sums`);
the server adds them up through secure aggregation
(:mod:`fedcluster.privacy.secagg`) and, for differential privacy, the totals
get discrete Gaussian noise (:func:`add_noise`: OpenDP's sampler, on the
fixed-point grid of secure aggregation; from the server under central DP,
in shares from the clients under distributed DP); the new centroids are the
noisy sums over the noisy counts (:func:`centroids_from_totals`). No Flower
import.

The choices the literature leaves open, as fedcluster makes them:

* **Neighbouring data sets**: one row added or removed (unbounded DP), on any
  client. The guarantee is per row, not per client.
* **Bounding a row's contribution** (data-independent, declared by the user):
  every row is clipped coordinate-wise into the box ``data-bounds`` (for
  example ``0:1e6``, or one value per feature ``0,0:1e6,1e6``), then shifted
  to the box's centre ``c``, then scaled into the ball of radius ``R`` around
  it (``dp-clip``; 0 means the box's half diagonal, the smallest ball that
  holds the whole box). Sums are sums of the shifted rows ``x' = clip(x) - c``,
  so ``||x'|| <= R``. A row is assigned to its nearest centroid by its
  unclipped value: which cluster it joins does not change the bound.
* **Sensitivity and the split of the noise between sums and counts**: one row
  changes one cluster's sum by ``x'`` and its count by 1. The server releases
  the sums and the counts scaled by ``w`` as one vector, whose L2 sensitivity
  is ``Delta = sqrt(R^2 + w^2)``, with one Gaussian mechanism of scale
  ``sigma = z * Delta`` (``z``: the noise multiplier): each sum coordinate
  gets noise of scale ``sigma``, each count of scale ``sigma / w``, both
  discrete Gaussians on the grid ``2^-f`` (``f``: ``secagg-fraction-bits``).
  ``w = R / d^(1/4)`` minimises the expected squared error of a noisy centroid
  ``(S + e) / (N + f)`` to first order for a centroid at distance ``R`` from
  the centre (the error is ``(d sigma_S^2 + ||c'||^2 sigma_N^2) / N^2``;
  minimising over ``w^2`` gives ``w^2 = R ||c'|| / sqrt(d)``).
* **The noise** is OpenDP's discrete Gaussian (only its sampler: the privacy
  is counted by :mod:`.accountant`), drawn from OpenDP's cryptographically
  secure generator, not from the run's seed: it cannot be drawn again by
  anyone who knows the settings, and a run under DP is not reproducible.
  Canonne, Kamath & Steinke (2020, "The discrete Gaussian for differential
  privacy") show that the discrete Gaussian of scale ``sigma`` has the
  concentrated-DP guarantee of the continuous one (``rho = Delta^2 / (2
  sigma^2)``, for vectors on a grid too) and an approximate-DP curve that is
  no worse in their comparisons; the accountant counts it as the continuous
  Gaussian of scale ``sigma``. The values are rounded to the grid before the
  noise: a row then moves the released vector by up to ``sqrt(n) 2^-f`` more
  than ``Delta`` (``n`` values; below ``1e-5`` for ``f = 24`` and ``n`` up to
  10^4), which the accountant does not count.
* **Soft assignments** (``ffcm-avg1``, :func:`fedcluster.methods.ffcm.client.fuzzy_sums_request`):
  a row adds ``u_j^m x'`` to every cluster's sum and ``u_j^m`` to its count,
  with memberships ``u_j`` in [0, 1] that sum to 1 and ``m > 1``. The change
  of (sums, ``w`` counts) has L2 norm ``sqrt(sum_j u_j^(2m)) sqrt(||x'||^2 + w^2)
  <= Delta``, as ``sum_j u_j^(2m) <= sum_j u_j = 1``: the bound of the hard
  assignment, so the same noise and accountant apply.
* **Noisy counts below 1** (zero or negative after noise): the cluster keeps
  its current centroid (dividing by a count near zero would throw it anywhere).
  Every new centroid is then projected into the declared box: post-processing,
  free of privacy cost.
* **What is released per round**: only the noisy sums and counts (and what is
  computed from them). The round's squared distances and the number of rows
  are not released under DP: the history's round scores are NaN and the final
  score is not computed (it would be a release without noise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: A noisy count below this keeps the cluster's current centroid.
MIN_NOISY_COUNT = 1.0


class BoundsError(ValueError):
    """A ``data-bounds`` text that cannot be read, or that does not fit the data."""


def parse_bounds(text: str) -> tuple[np.ndarray, np.ndarray]:
    """``"LOW:HIGH"`` or ``"l1,l2,...:h1,h2,..."`` as two float64 arrays (1 or d values).

    Raises
    ------
    BoundsError
        Not two parts, values that are not finite numbers, parts of different
        lengths, or a low value that is not below its high value.
    """
    parts = str(text).split(":")
    if len(parts) != 2:
        raise BoundsError(f"data-bounds {text!r} is not 'LOW:HIGH' (or 'l1,l2,...:h1,h2,...')")
    try:
        low, high = (np.array([float(v) for v in part.split(",")], dtype=np.float64) for part in parts)
    except ValueError:
        raise BoundsError(f"data-bounds {text!r} holds a value that is not a number") from None
    if low.shape != high.shape:
        raise BoundsError(f"data-bounds {text!r}: {low.size} low and {high.size} high values")
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise BoundsError(f"data-bounds {text!r} holds a value that is not finite")
    if np.any(low >= high):
        raise BoundsError(f"data-bounds {text!r}: every low value must be below its high value")
    return low, high


@dataclass(frozen=True)
class Clipping:
    """The declared box and ball that bound one row's contribution (see the module docstring).

    Attributes
    ----------
    low, high : ndarray of shape (d,)
        The box.
    radius : float
        ``R``, the radius of the ball around the box's centre.
    """

    low: np.ndarray
    high: np.ndarray
    radius: float

    @classmethod
    def declared(cls, bounds: str, clip: float, dim: int) -> Clipping:
        """The clipping of ``data-bounds`` and ``dp-clip`` (0: the half diagonal) for ``dim`` features."""
        low, high = parse_bounds(bounds)
        if low.size not in (1, dim):
            raise BoundsError(f"data-bounds {bounds!r} gives {low.size} values per side; the data "
                              f"has {dim} features (give 1 or {dim})")
        low, high = np.broadcast_to(low, (dim,)).copy(), np.broadcast_to(high, (dim,)).copy()
        half_diagonal = float(np.linalg.norm(high - low) / 2)
        if not np.isfinite(clip) or clip < 0:
            raise BoundsError(f"dp-clip must be a finite number >= 0, got {clip!r}")
        radius = half_diagonal if clip == 0 else min(float(clip), half_diagonal)
        return cls(low, high, radius)

    @property
    def centre(self) -> np.ndarray:
        return (self.low + self.high) / 2

    @property
    def count_weight(self) -> float:
        """``w = R / d^(1/4)``: the scale of the counts in the released vector."""
        return self.radius / len(self.low) ** 0.25

    @property
    def sensitivity(self) -> float:
        """``Delta = sqrt(R^2 + w^2)``: the L2 sensitivity of (sums, w counts) to one row."""
        return float(np.hypot(self.radius, self.count_weight))

    def clip(self, X: np.ndarray) -> np.ndarray:
        """Rows clipped into the box, shifted to its centre and scaled into the ball (``x'``)."""
        shifted = np.clip(np.asarray(X, dtype=np.float64), self.low, self.high) - self.centre
        norms = np.linalg.norm(shifted, axis=1)
        scale = np.minimum(1.0, self.radius / np.where(norms > 0, norms, 1.0))
        return shifted * scale[:, None]

    def project(self, centroids: np.ndarray) -> np.ndarray:
        """Centroids moved into the box (post-processing of a noisy release)."""
        return np.clip(centroids, self.low, self.high)


def clipped_sums(X: np.ndarray, labels: np.ndarray, k: int, clipping: Clipping | None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster sums of the clipped, shifted rows and per-cluster counts.

    Without ``clipping`` the sums are of the rows themselves (secure
    aggregation without DP needs no bound).
    """
    rows = np.asarray(X, dtype=np.float64) if clipping is None else clipping.clip(X)
    sums = np.zeros((k, rows.shape[1]), dtype=np.float64)
    np.add.at(sums, labels, rows)
    counts = np.bincount(labels, minlength=k).astype(np.float64)
    return sums, counts


def _opendp():
    try:
        import opendp.prelude as dp
    except ImportError:  # pragma: no cover - depends on the installation
        raise ImportError("differential privacy (dp = central or distributed) draws its noise "
                          "with OpenDP: pip install 'fedcluster[dp]'") from None
    dp.enable_features("contrib")  # OpenDP's label for mechanisms outside its vetted core
    return dp


def discrete_gaussian(values: np.ndarray, scale: float, grid_bits: int) -> np.ndarray:
    """``values`` plus OpenDP's discrete Gaussian of ``scale`` on the grid ``2^-grid_bits``."""
    dp = _opendp()
    flat = np.asarray(values, dtype=np.float64).ravel()
    measurement = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=float, nan=False), size=flat.size),
        dp.l2_distance(T=float), scale=float(scale), k=-int(grid_bits))
    return np.array(measurement(flat.tolist()), dtype=np.float64).reshape(np.shape(values))


def add_noise(sums: np.ndarray, counts: np.ndarray, sigma: float, count_weight: float,
              grid_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """The Gaussian mechanism on (sums, w counts), as a discrete Gaussian on a fixed-point grid.

    Each sum gets noise of scale ``sigma``, each count of scale ``sigma / w``;
    the values are rounded to the grid ``2^-grid_bits`` (the run's
    ``secagg-fraction-bits``, so that a noisy value is exactly a fixed-point
    number of secure aggregation) and the noise is OpenDP's discrete
    Gaussian on that grid (``make_gaussian`` with ``k = -grid_bits``): drawn
    from OpenDP's cryptographically secure generator with exact arithmetic,
    never from a seed of the run, so nobody, the server included, can draw
    the same noise again and subtract it. What the accountant may count for
    it, and the rounding it does not count: the module docstring, "The
    noise".
    """
    noisy_sums = discrete_gaussian(sums, sigma, grid_bits)
    noisy_counts = discrete_gaussian(counts, sigma / count_weight, grid_bits)
    return noisy_sums, noisy_counts


def client_noise_scale(noise_multiplier: float, clipping: Clipping, threshold: int) -> float:
    """A client's share of distributed noise: ``z Delta / sqrt(t)`` (``t``: the SecAgg threshold).

    The server asks for it and the client computes it again from the
    request's settings and the threshold it accepted; one expression, so the
    two agree to the last bit.
    """
    return noise_multiplier * clipping.sensitivity / math.sqrt(threshold)


def centroids_from_totals(sums: np.ndarray, counts: np.ndarray, current: np.ndarray,
                          clipping: Clipping | None, min_count: float = MIN_NOISY_COUNT
                          ) -> np.ndarray:
    """The Lloyd step's new centroids from (noisy) totals.

    ``centre + sums / counts`` where the count is at least ``min_count``; the
    current centroid elsewhere; then projected into the box. Without
    ``clipping`` (no DP: exact totals) the sums are of the rows themselves,
    every cluster of positive count takes ``sums / counts`` and one of count
    0 keeps its centroid, as the plain methods' weighted means do: the
    threshold ``min_count`` guards against noise only, and a fuzzy support
    (``ffcm-avg1``) may rightly lie below 1.
    """
    counts = np.asarray(counts, dtype=np.float64)
    current = np.asarray(current, dtype=np.float64)
    enough = counts >= min_count if clipping is not None else counts > 0
    means = np.asarray(sums, dtype=np.float64) / np.where(enough, counts, 1.0)[:, None]
    if clipping is None:
        return np.where(enough[:, None], means, current)
    return clipping.project(np.where(enough[:, None], clipping.centre + means, current))
