"""Per-feature moments for federated standardisation, and the elbow of a score curve (Flower-free).

A client summarises its rows by their count, per-feature mean and
population standard deviation (:func:`local_moments`); the server combines
the summaries into the moments of the pooled rows (:func:`combine_moments`)
without seeing a row. Both run on NumPy or CuPy (the namespace of the rows);
the results are on the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .backend import namespace_of, to_numpy

__all__ = ["Moments", "combine_moments", "farthest_from_chord", "local_moments", "standardize"]


@dataclass(frozen=True)
class Moments:
    """Count, per-feature mean and population standard deviation of a set of rows."""

    n: int
    mean: np.ndarray
    std: np.ndarray


def local_moments(X: Any) -> Moments:
    """The moments of the rows ``X`` (two passes: the mean, then the centred squares).

    Two passes rather than one sum of squares: ``sum(x^2)/n - mean^2`` loses
    every digit of a feature whose spread is small next to its mean.
    """
    xp = namespace_of(X)
    X = xp.asarray(X, dtype=xp.float64)
    mean = X.mean(axis=0)
    centred = X - mean
    std = xp.sqrt((centred * centred).mean(axis=0))
    return Moments(int(X.shape[0]), to_numpy(mean), to_numpy(std))


def combine_moments(parts: Sequence[Moments]) -> Moments:
    """The moments of the union of ``parts`` (Chan, Golub & LeVeque's pairwise update).

    Each part's centred sum of squares ``M2 = n * std^2`` is added with the
    correction ``n_a n_b / (n_a + n_b) * (mean_b - mean_a)^2`` for the
    distance between the running mean and the part's mean (Chan et al. 1979,
    "Updating formulae and a pairwise algorithm for computing sample
    variances"), never as ``E[x^2] - E[x]^2``, which cancels catastrophically
    when the features' means are large next to their spread. The result is
    the population standard deviation (divisor n), as NumPy's default
    ``std``. Parts are combined in the order given (the caller orders them
    by content so that the result does not depend on who answered first).
    """
    if not parts:
        raise ValueError("no moments to combine")
    n = 0
    mean = np.zeros_like(np.asarray(parts[0].mean, dtype=np.float64))
    m2 = np.zeros_like(mean)
    for part in parts:
        n_b = int(part.n)
        mean_b = np.asarray(part.mean, dtype=np.float64)
        m2_b = n_b * np.square(np.asarray(part.std, dtype=np.float64))
        total = n + n_b
        delta = mean_b - mean
        mean = mean + delta * (n_b / total)
        m2 = m2 + m2_b + np.square(delta) * (n * n_b / total)
        n = total
    return Moments(n, mean, np.sqrt(m2 / n))


def standardize(X: Any, shift: np.ndarray, scale: np.ndarray) -> Any:
    """``(X - shift) / scale`` in the namespace of ``X``, as float64."""
    xp = namespace_of(X)
    return (xp.asarray(X, dtype=xp.float64) - xp.asarray(shift)) / xp.asarray(scale)


def farthest_from_chord(x: Sequence[float], y: Sequence[float]) -> int:
    """The index of the point of a curve farthest from the chord between its ends.

    The elbow ("knee") of a decreasing score curve as in the Kneedle rule
    (Satopaa et al. 2011) without its smoothing: both axes are scaled to
    [0, 1] first, so that the units of the score do not tilt the choice; the
    distance is measured perpendicular to the chord. A curve of fewer than
    three points, or a straight one, has no elbow: its first point is
    returned.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if len(x) < 3:
        return 0
    span_x, span_y = np.ptp(x), np.ptp(y)
    u = (x - x[0]) / (span_x if span_x > 0 else 1.0)
    v = (y - y[0]) / (span_y if span_y > 0 else 1.0)
    chord = np.array([u[-1], v[-1]])
    length = float(np.hypot(*chord))
    if length == 0:
        return 0
    distance = np.abs(u * chord[1] - v * chord[0]) / length
    return int(np.argmax(distance))
