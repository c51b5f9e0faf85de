"""Per-feature bounds estimated under DP, for a DP run without ``--data-bounds``.

Before its start such a run asks every client for a histogram of each
feature over one fixed, data-independent grid (:func:`feature_histogram`),
gets their total through secure aggregation, has it noised by the Gaussian
mechanism (OpenDP's discrete Gaussian, from the server under central DP, in
shares from the clients under distributed DP: :func:`noise_scale`), and
reads the bounds off the noisy total (:func:`bounds_from_histogram`:
post-processing). The release is one Gaussian mechanism of its own noise
multiplier, which :class:`~.accountant.Budget` composes with the rounds'.

The choices, none of them from a paper (diffprivlib's issue #20 asks for
private bounds; Google's DP library estimates bounds from log-scale
histograms of the same kind):

* **The grid**: bin edges ``0, +-10^e`` for ``e`` from :data:`LOWEST_EXP` to
  :data:`HIGHEST_EXP` in steps of ``1 / STEPS_PER_DECADE`` (8: a bin is 33 %
  wider than the one before), plus the two unbounded outer bins; a value in
  (-1e-6, 1e-6) falls in the bin around 0. Whatever the data's units, its
  bounds are found to within a bin, and no data decides the grid.
* **The rows' range**: beside the ``d`` features' histograms, two more over
  the same grid: of each row's smallest value (over its features) and of its
  largest. A feature whose own values are spread over many bins, none of
  which holds enough rows for the noise (on scikit-learn's digits, 1,797
  rows of 64 pixels, some pixels at epsilon 1), borrows the range of all the
  features instead: its low bound is read off the row minima, its high bound
  off the row maxima. So does, in part, a feature whose kept bins miss
  :data:`MISSED_SHARE` of the rows (the kept mass of the range's histograms
  counts them): a full bin beside a tail too thin for the noise (a digits
  pixel that is 0 in most rows and 1-16 in the rest; the noisy counts of the
  thin bins inside its box, near 0 between kept bins, count as held) would
  otherwise get the full bin's bounds and the rounds would clip the tail away (digits at epsilon
  1: 2.25 x the centralized score, 1.62 with the declared box ``0:16``); its
  box grows to hold the range. Each row adds one count to each of these too,
  so they cost as much noise as two more features, and their rows are far
  denser in the bins than a spread feature's.
* **Sensitivity**: one row adds 1 to one bin of each of the ``d + 2``
  histograms, so the L2 sensitivity is ``sqrt(d + 2)`` (unbounded DP, as the
  rounds'); the noise is ``sigma = z_b sqrt(d + 2)`` per bin.
* **The read-off**: bins whose noisy count is below :data:`KEEP_SDS`
  ``sigma`` are taken as empty (an empty bin passes this with probability
  ``Phi(-5)`` = 2.9e-7, so of the 290 empty bins of a feature one does in
  about 1 of 10^4 features), and so are bins below :data:`GROW_SDS`
  ``sigma`` beside them, outward from the kept bins (a tail bin of a few
  dozen rows is then kept, not clipped by chance; an empty bin beside the
  data passes with probability ``Phi(-2)`` = 2.3 %, widening the box by a
  bin), then the low bound is the lower edge of the bin where the kept
  mass passes the :data:`QUANTILE` quantile and the high bound the upper
  edge of the bin where it passes ``1 - QUANTILE``: rows beyond are clipped
  by the rounds (at most about that share of them). A feature with no kept
  mass takes the rows' range (above); where that has none either (too few
  rows for the noise at all) it gets the whole grid, ``+-10^HIGHEST_EXP``,
  which no clustering survives: the server then ends the run before its
  rounds (:meth:`~fedcluster.strategies.private.PrivateRounds.estimate_bounds`)
  rather than spend the budget on a model it should not trust.
* **A dishonest client** sends what it likes inside secure aggregation, and
  the server cannot see whose mass is whose. The step bounds what that can
  do instead: the total is never refused (negative or huge entries are
  read as they are, after the threshold), so a liar cannot get an honest
  client rejected, and fails the run only by cancelling the honest mass of
  some feature and of the rows' range (a negative count in every bin that
  holds rows: a denial of service any participant of secure aggregation
  has, by a total that fails its check); the bounds always lie on
  the grid, finite and ``low < high``, so at worst they are as wide as the
  grid (``+-10^HIGHEST_EXP``: the rounds' noise then swamps the sums) or,
  with more mass than all honest rows, off the data; a liar moves a bound
  only with more than :data:`QUANTILE` of the total mass beyond it.
"""

from __future__ import annotations

import math

import numpy as np

#: The grid's smallest and largest magnitudes, as powers of ten.
LOWEST_EXP = -6
HIGHEST_EXP = 12
#: Bin edges per power of ten.
STEPS_PER_DECADE = 8
#: Bins below this many noise standard deviations are taken as empty ...
KEEP_SDS = 5.0
#: ... unless beside a kept bin and above this many.
GROW_SDS = 2.0
#: The share of the kept mass left beyond each bound.
QUANTILE = 0.005
#: The share of the rows a feature's kept bins may miss before its box grows to the rows' range.
MISSED_SHARE = 0.05


def grid_edges() -> np.ndarray:
    """The bin edges, increasing: ``-10^HIGHEST_EXP .. -10^LOWEST_EXP, 10^LOWEST_EXP .. 10^HIGHEST_EXP``."""
    magnitudes = 10.0 ** np.linspace(LOWEST_EXP, HIGHEST_EXP,
                                     (HIGHEST_EXP - LOWEST_EXP) * STEPS_PER_DECADE + 1)
    return np.concatenate([-magnitudes[::-1], magnitudes])


#: Bins per feature: one more than the edges (the two outer bins are unbounded).
BINS = len(grid_edges()) + 1
#: Histograms beyond the features': of the rows' smallest and of their largest values.
RANGE_HISTOGRAMS = 2


def histograms(dim: int) -> int:
    """The number of histograms for ``dim`` features: one each, and the rows' range."""
    return dim + RANGE_HISTOGRAMS


def feature_histogram(X: np.ndarray) -> np.ndarray:
    """Counts of rows per bin of :func:`grid_edges`, shape (d + 2, :data:`BINS`): each
    feature's, then those of each row's smallest and largest value."""
    X = np.asarray(X, dtype=np.float64)
    if X.shape[1]:
        X = np.column_stack([X, X.min(axis=1), X.max(axis=1)])
    bins = np.searchsorted(grid_edges(), X, side="right")  # bin j: [edge j-1, edge j)
    offsets = np.arange(X.shape[1]) * BINS
    return np.bincount((bins + offsets).ravel(), minlength=X.shape[1] * BINS
                       ).reshape(X.shape[1], BINS).astype(np.float64)


def sensitivity(dim: int) -> float:
    """The histograms' L2 sensitivity to one row: ``sqrt(d + 2)``."""
    return math.sqrt(histograms(dim))


def noise_scale(noise_multiplier: float, dim: int, threshold: int = 1) -> float:
    """The noise per bin: ``z_b sqrt(d + 2)``, and a client's share of it ``/ sqrt(t)`` (distributed)."""
    return noise_multiplier * sensitivity(dim) / math.sqrt(threshold)


def _kept_counts(histogram: np.ndarray, sigma: float) -> np.ndarray:
    """The noisy counts of the bins taken as holding rows (see the module docstring), others 0."""
    counts = np.nan_to_num(np.asarray(histogram, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    kept = counts >= KEEP_SDS * sigma
    # Grow the kept bins into their neighbours above GROW_SDS: a tail bin of a few dozen rows
    # would otherwise be dropped by the noise now and then, and its rows clipped.
    while True:
        beside = np.zeros_like(kept)
        beside[:, 1:] |= kept[:, :-1]
        beside[:, :-1] |= kept[:, 1:]
        grown = kept | (beside & (counts >= GROW_SDS * sigma))
        if np.array_equal(grown, kept):
            break
        kept = grown
    return np.where(kept, np.maximum(counts, 0.0), 0.0)


def bounds_from_histogram(histogram: np.ndarray, sigma: float
                          ) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Per-feature low and high bounds from the noisy (d + 2, BINS) histograms (see the module
    docstring).

    Returns the bounds, the number of features that took the rows' range (no
    bin of their own above the threshold, or bins that miss :data:`MISSED_SHARE`
    of the rows: their box then grows to hold the range) and the number that
    got the whole grid (no range either).
    """
    kept = _kept_counts(histogram, sigma)
    low, high, empty = _quantile_bounds(kept)
    features = len(low) - RANGE_HISTOGRAMS
    lacking = int(empty[:features].sum())
    if empty[features:].any():  # the rows' minima or their maxima lost in the noise: no range
        return low[:features], high[:features], 0, lacking
    range_low, range_high = low[features], high[features + 1]
    low, high, empty = low[:features], high[:features], empty[:features]
    rows = kept[features:].sum(axis=1).max()
    missing = ~empty & (_held(histogram[:features], kept[:features], low, high)
                        < (1 - MISSED_SHARE) * rows)
    low = np.where(empty, range_low, np.where(missing, np.minimum(low, range_low), low))
    high = np.where(empty, range_high, np.where(missing, np.maximum(high, range_high), high))
    return low, high, int(empty.sum() + missing.sum()), 0


def _held(histogram: np.ndarray, kept: np.ndarray, low: np.ndarray, high: np.ndarray
          ) -> np.ndarray:
    """Each feature's rows inside its box, as the noise lets them be counted: its kept bins'
    mass, and the noisy counts of the thin bins between them (near 0, say), which the box
    holds as well; the rows of thin bins beyond it are the ones the rounds would clip."""
    edges = grid_edges()
    inside = ((np.concatenate([[-np.inf], edges])[None, :] >= low[:, None])
              & (np.concatenate([edges, [np.inf]])[None, :] <= high[:, None]))
    counts = np.nan_to_num(np.asarray(histogram, dtype=np.float64), nan=0.0, posinf=0.0,
                           neginf=0.0)
    thin_inside = np.where(inside & (kept == 0), counts, 0.0).sum(axis=1)
    return kept.sum(axis=1) + np.maximum(thin_inside, 0.0)


def _quantile_bounds(kept: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each histogram's quantile bounds of its kept mass; the whole grid, flagged, where none."""
    edges = grid_edges()
    total = kept.sum(axis=1)
    cumulative = np.cumsum(kept, axis=1)
    # Mass in an unbounded outer bin counts as in the grid's outermost bounded one, bin j
    # being [edge j-1, edge j): the bounds stay finite and low < high, whatever the counts.
    first = np.clip(np.argmax(cumulative > QUANTILE * total[:, None], axis=1), 1, BINS - 2)
    last = np.clip(np.argmax(cumulative >= (1 - QUANTILE) * total[:, None], axis=1), 1, BINS - 2)
    empty = total <= 0
    return (np.where(empty, edges[0], edges[first - 1]), np.where(empty, edges[-1], edges[last]),
            empty)


def rms_distance(histogram: np.ndarray, sigma: float, low: np.ndarray, high: np.ndarray) -> float:
    """The rows' root-mean-square distance from the centre of the box ``low``-``high``, read off
    the noisy (d + 2, BINS) histograms (post-processing, no budget).

    ``E ||x - c||^2`` is the sum over the features of ``E (x_j - c_j)^2``,
    which each feature's histogram gives alone (whatever the features'
    dependence): the kept bins' counts (as :func:`bounds_from_histogram`
    keeps them) weigh each bin's middle, clipped into the box as the rows
    are. The middle of a bin is within 1/7 of its value of the rows in it
    (a bin is 33 % wider than the one before). A feature with no kept bin
    (its bounds the rows' range) counts as spread evenly over its bounds,
    ``(high - low)^2 / 12``. It only places the private start's cells (:func:`~.start.cells`), so a
    liar's mass, which moves it as it moves the bounds, costs at most the
    start's fit, never privacy.
    """
    edges = grid_edges()
    middles = np.concatenate([[edges[0]], (edges[:-1] + edges[1:]) / 2, [edges[-1]]])
    low, high = np.asarray(low), np.asarray(high)
    kept = _kept_counts(np.asarray(histogram)[:len(low)], sigma)
    centre = (low + high) / 2
    squares = (np.clip(middles[None, :], low[:, None], high[:, None]) - centre[:, None]) ** 2
    total = kept.sum(axis=1)
    spread = np.where(total > 0, (kept * squares).sum(axis=1) / np.where(total > 0, total, 1.0),
                      (high - low) ** 2 / 12)
    return float(np.sqrt(spread.sum()))


def bounds_text(low: np.ndarray, high: np.ndarray) -> str:
    """``data-bounds`` text of per-feature bounds (read back exactly by :func:`~.mechanism.parse_bounds`)."""
    return ",".join(map(repr, map(float, low))) + ":" + ",".join(map(repr, map(float, high)))


def describe(low: np.ndarray, high: np.ndarray) -> str:
    """The bounds for a log line: every feature's up to 4 features, else their extremes."""
    if low.size <= 4:
        return ", ".join(f"[{a:.4g}, {b:.4g}]" for a, b in zip(low, high))
    return f"{low.size} features, lows {low.min():.4g} .. {low.max():.4g}, highs {high.min():.4g} .. {high.max():.4g}"
