"""What a secure total must satisfy before anything uses it (no Flower import).

Secure aggregation hides every client's vector, so a client whose masked
vector is garbage (random bytes, zeros) or whose unmasking shares are wrong
turns the decoded total into garbage that no one can trace to it. The
server cannot check a client, but it can check the total: honest totals
obey rules that a garbage total breaks with overwhelming probability, and a
total that breaks one is never used (:class:`~fedcluster.strategies.private.SecureSum` fails the
round naming the participants).

The rules, for ``m`` survivors, ``f`` fraction bits, ``k`` clusters, ``d``
features; ``err = m 2^-(f+1)`` is the largest fixed-point error of one
decoded entry (:func:`~.secagg.encode` rounds each client's value once):

* every entry is finite and below ``m 2^(90 - f)`` in magnitude, the largest
  total of ``m`` encodable values: a garbage top word decodes to about
  ``2^(103 - f)`` and passes this with probability about ``m 2^-37`` per entry;
* exact totals (no DP, and central DP, whose noise the server adds after
  the check): the row number ``n`` is a whole number >= 0; the squared
  distances ``sse`` >= ``-err``; hard counts (a Lloyd step, a score: every
  count is a number of rows, encoded exactly) are whole numbers >= 0 that
  add up to at most ``n`` (exactly ``n`` but for the clusters that the
  clients' floor withholds, count 0, :func:`~fedcluster.local.floor.withhold_small_sums`); fuzzy supports (``ffcm-avg1``: ``sum_i u_ij^m``)
  are >= ``-err`` and add up to at most ``n + k err`` (``sum_j u_ij^m <=
  sum_j u_ij = 1`` for ``m > 1``, so a row adds at most 1 in all);
* where the rows are bounded (DP: sums of rows shifted to the box's centre
  and scaled into the ball of radius ``R``, :class:`~.mechanism.Clipping`),
  every cluster's sum has norm at most ``count R + err sqrt(d)`` (a row adds
  at most its weight times ``R``);
* distributed DP (sums and counts each carry the clients' noise, of total
  standard deviation ``sigma sqrt(s / t)`` per sum coordinate and
  ``(sigma / w) sqrt(s / t)`` per count, ``s`` survivors, threshold ``t``):
  every count >= ``-c sd_count - err``, and every sum's norm at most
  ``(max(count, 0) + c sd_count) R + c sd_sum sqrt(d) + err sqrt(d)``, with
  ``c`` = :data:`NOISE_MULTIPLES`: 8 standard deviations, so that an honest
  total fails by its noise with probability below ``2 Phi(-8)`` = 1.2e-15
  per count, and below that per sum (``P(chi_d > 8 sqrt(d)) <= 2 Phi(-8)``
  for every ``d >= 1``): below 1e-12 per value for any run's size.

A dishonest client can still shift the total within these rules (SecAgg does
not check a client's vector, only the total's consistency): the checks stop
garbage, not poisoning.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: Standard deviations of the noise a distributed-DP total may be off by (see the module docstring).
NOISE_MULTIPLES = 8.0
#: Relative slack for the float rounding of a client's clipped rows and their sum (each row's
#: norm is R up to a few ulps; 1e-9 is far above float64's 1e-16 per operation).
_FLOAT_SLACK = 1e-9
#: Largest magnitude of one encoded integer (:data:`~.secagg._LARGEST`), as a power of two.
_ENCODED_BITS = 90

#: ``verify(values, survivors, threshold)``: why the decoded total is impossible, "" if it is not.
#: The survivors and the threshold are known only once the aggregation ran (the fixed-point
#: error and the distributed noise grow with them), so :class:`~fedcluster.strategies.private.SecureSum` passes them.
Verify = Callable[[np.ndarray, int, int], str]


@dataclass(frozen=True)
class TotalCheck:
    """The rules of the module docstring for one aggregation's fields.

    Attributes
    ----------
    fields : tuple of str
        The packed fields, in :data:`~.secagg.FIELDS` order (a subset of
        ``sums``, ``counts``, ``sse``, ``n``).
    k, dim : int
        Clusters and features (``dim`` is unused without ``sums``).
    fraction_bits : int
        ``secagg-fraction-bits``: the fixed-point error.
    fuzzy : bool
        Counts are fuzzy supports (``ffcm-avg1``'s sums), not numbers of rows.
    radius : float or None
        ``R`` where the summed rows are clipped into a ball (DP); None: sums
        are not bounded (no DP: raw rows).
    sigma : float or None
        Distributed DP: the server-side ``sigma`` whose share each client adds
        (``sigma / sqrt(t)``); None: the total is exact.
    count_weight : float
        ``w`` (:attr:`~.mechanism.Clipping.count_weight`): the counts' noise is ``sigma / w``.
    """

    fields: tuple[str, ...]
    k: int
    dim: int
    fraction_bits: int
    fuzzy: bool = False
    radius: float | None = None
    sigma: float | None = None
    count_weight: float = 1.0

    def __call__(self, values: np.ndarray, survivors: int, threshold: int) -> str:
        """Why ``values`` cannot be an honest total of ``survivors`` clients ("" if they can)."""
        values = np.asarray(values, dtype=np.float64)
        err = survivors * 2.0 ** -(self.fraction_bits + 1)
        largest = survivors * 2.0 ** (_ENCODED_BITS - self.fraction_bits)
        if not np.all(np.isfinite(values)) or np.any(np.abs(values) >= largest):
            worst = float(np.max(np.abs(values)))
            return (f"a value of magnitude {worst:.3g} lies beyond what {survivors} encoded "
                    f"values can add up to ({largest:.3g})")
        parts = self._split(values)
        if self.sigma is not None:
            return self._noisy(parts, survivors, threshold, err)
        return self._exact(parts, err)

    def _split(self, values: np.ndarray) -> dict[str, np.ndarray]:
        sizes = {"sums": self.k * self.dim, "counts": self.k, "sse": 1, "n": 1}
        parts, start = {}, 0
        for name in self.fields:
            parts[name] = values[start:start + sizes[name]]
            start += sizes[name]
        if "sums" in parts:
            parts["sums"] = parts["sums"].reshape(self.k, self.dim)
        return parts

    def _exact(self, parts: dict[str, np.ndarray], err: float) -> str:
        n = float(parts["n"][0]) if "n" in parts else None
        if n is not None and (n < 0 or n != round(n)):
            return f"the row count is {n:.6g}, not a whole number >= 0"
        if "sse" in parts and parts["sse"][0] < -err:
            return f"the squared distances add up to {parts['sse'][0]:.6g} < 0"
        counts = parts.get("counts")
        if counts is not None:
            total = float(counts.sum())
            if self.fuzzy:
                if np.any(counts < -err):
                    return f"a fuzzy support is {counts.min():.6g} < 0"
                if n is not None and total > n + self.k * err:
                    return f"the fuzzy supports add up to {total:.6g}, more than the {n:.0f} rows declared"
            else:
                if np.any(counts < 0) or np.any(counts != np.round(counts)):
                    bad = counts[(counts < 0) | (counts != np.round(counts))][0]
                    return f"a count is {bad:.6g}, not a whole number >= 0"
                if n is not None and total > n:
                    return f"counts add up to {total:.6g}, more than the {n:.0f} rows declared"
            if self.radius is not None and "sums" in parts:
                return self._bounded(parts["sums"], counts, 0.0, 0.0, err)
        return ""

    def _noisy(self, parts: dict[str, np.ndarray], survivors: int, threshold: int, err: float) -> str:
        spread = math.sqrt(survivors / threshold)
        sd_sum, sd_count = self.sigma * spread, self.sigma / self.count_weight * spread
        counts = parts["counts"]
        floor = -NOISE_MULTIPLES * sd_count - err
        if np.any(counts < floor):
            return (f"a noisy count is {counts.min():.6g}, below {floor:.6g} ({NOISE_MULTIPLES:g} "
                    f"standard deviations of its noise)")
        if self.radius is not None and "sums" in parts:
            return self._bounded(parts["sums"], counts, sd_sum, sd_count, err)
        return ""

    def _bounded(self, sums: np.ndarray, counts: np.ndarray, sd_sum: float, sd_count: float,
                 err: float) -> str:
        """Each sum within its count's ball, widened by the noise's ``c`` standard deviations."""
        norms = np.linalg.norm(sums, axis=1)
        limits = sum_limits(counts, self.radius, self.dim, sd_sum, sd_count, err)
        over = np.flatnonzero(norms > limits)
        if over.size:
            j = int(over[0])
            return (f"cluster {j}'s sum has norm {norms[j]:.6g}, beyond its count "
                    f"{counts[j]:.6g} times the radius {self.radius:.6g} (limit {limits[j]:.6g})")
        return ""


def sum_limits(counts: np.ndarray, radius: float, dim: int, sd_sum: float, sd_count: float,
               err: float = 0.0) -> np.ndarray:
    """The largest norm each honest sum of rows clipped into the ball of ``radius`` can have:
    its count's rows times the radius, widened by :data:`NOISE_MULTIPLES` standard deviations of
    the noise on the count (``sd_count``) and on each sum coordinate (``sd_sum``), and by the
    fixed-point error ``err`` per coordinate (the module docstring's rule)."""
    root_d = math.sqrt(dim)
    return ((np.maximum(counts, 0.0) + NOISE_MULTIPLES * sd_count) * radius * (1 + _FLOAT_SLACK)
            + NOISE_MULTIPLES * sd_sum * root_d + err * root_d)
