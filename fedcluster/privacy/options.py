"""The privacy settings every method declares, and which methods can honour them.

Declared once here and added to :class:`fedcluster.options.Options`, so every
method's model, the run config, the command line and ``pyproject.toml`` have
them; :func:`check_privacy` refuses, with the reason, a combination that
cannot keep its promise (a method that needs each client's own centroids, a
start that sends them, a missing data bound).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any, Literal

from pydantic import Field

DP = Annotated[Literal["off", "central", "distributed"], Field(
    "off", description="differential privacy of the released centroids (dwf, ewf, fedkmeans, "
    "ffcm-avg1 in their one-step sum form): central (the server adds Gaussian noise to the "
    "secure totals) or distributed (each client adds its share); both need "
    "--secure-aggregation true")]
#: The largest ``dp-epsilon``: the accountant calibrates it in about 2 s and 80 MB
#: (300: 4 s; 1000: a minute; 10^6: 19.6 GB), and a larger epsilon protects next to nothing.
MAX_EPSILON = 100.0
#: ``dp-delta`` lies below this whatever the data (and below 1 / rows where they are known).
MAX_DELTA = 1e-2
#: The smallest nonzero ``dp-noise-multiplier``: one round of 0.05 spends epsilon 245 even at
#: delta 0.01, beyond :data:`MAX_EPSILON`; the closed-form epsilon fails below about 1e-100.
MIN_NOISE_MULTIPLIER = 0.05

DPEpsilon = Annotated[float, Field(
    1.0, gt=0.0, le=MAX_EPSILON, description="privacy budget epsilon of a whole DP run (every "
    "round counted; at most 100, which the accountant computes in seconds)")]
DPDelta = Annotated[float, Field(
    1e-5, gt=0.0, lt=MAX_DELTA, description="delta of the DP budget (below 0.01, and below "
    "1 / rows where the rows are known before the start)")]
DPNoiseMultiplier = Annotated[float, Field(
    0.0, ge=0.0, description="noise standard deviation over the sensitivity; 0: the smallest "
    "that lets --rounds rounds fit the budget; else (at least 0.05) the run stops when the "
    "budget is spent")]
DPClip = Annotated[float, Field(
    0.0, ge=0.0, description="DP: radius of the ball around the centre of --data-bounds into "
    "which every row is scaled (0: the box's half diagonal)")]
DataBounds = Annotated[str, Field(
    "", description="declared per-feature box of the data, 'LOW:HIGH' or 'l1,l2,..:h1,h2,..' "
    "(data-independent): rows are clipped into it under DP, and --init random or spread draws "
    "in it under DP or secure aggregation; empty under DP: estimated privately with "
    "--dp-bounds-share of the budget")]


def _budget_share(default: float, when: str, what: str) -> Any:
    """A setup step's share of the DP budget (of its privacy loss ``1 / z^2``; .accountant)."""
    return Annotated[float, Field(default, gt=0.0, lt=1.0, description=(
        f"DP {when}: the share of the budget (of its privacy loss 1/z^2) that {what}"))]


# The defaults are measured in BENCHMARKS.md ("The start and the bounds under DP").
DPBoundsShare = _budget_share(0.1, "without --data-bounds", "estimating the bounds spends")
DPStartShare = _budget_share(0.2, "with --init private", "the private start spends")
DPRounds = Annotated[int, Field(
    0, ge=0, description="DP with a calibrated noise multiplier: the rounds the budget is spread "
    "over (at most --rounds; the run stops after them); 0: one after --init private (its "
    "coreset is clustered already), else chosen from epsilon (5 + 2 log2(epsilon) between 2 "
    "and 5: 5 from epsilon 1 on)")]
SecureAggregation = Annotated[bool, Field(
    False, description="the server learns only the round's total of the clients' sums, counts "
    "and squared distances (SecAgg; dwf, ewf, fedkmeans, ffcm-avg1 in their one-step sum form)")]
#: ``secagg-threshold`` left to the run: :func:`threshold_setting` chooses it.
AUTO_THRESHOLD = 0.0
SecAggThreshold = Annotated[float, Field(
    AUTO_THRESHOLD, ge=0.0, le=1.0, description="share of a round's participants (with "
    "--secagg-neighbours: of each participant and its neighbours) whose key shares rebuild a "
    "mask (at least a majority); up to the rest may drop out mid-round, each client's "
    "distributed noise is sized for that many; 0: all of them under --dp distributed with "
    "SecAgg's complete graph (below 20 participants, or --secagg-neighbours 0: the noise then "
    "totals central's, and a participant lost mid-round makes the aggregation start again "
    "without it), else 0.5")]
SecAggNeighbours = Annotated[int, Field(
    -1, ge=-1, description="SecAgg+: each participant exchanges keys, key shares and masks with "
    "this many others only, its neighbours in a ring the server draws anew each aggregation "
    "(odd: one more; 0: with every other participant, plain SecAgg); -1: chosen from the number "
    "of participants after Bell et al. (SecAgg below 20, then O(log m): 6 at 50, 34 at 1000), "
    "with the threshold their analysis needs when 0.05 of them may be corrupt and 0.05 drop out; "
    "--secagg-threshold then applies to each neighbourhood")]
SecAggFractionBits = Annotated[int, Field(
    24, ge=0, le=60, description="fixed-point fraction bits of secure aggregation (precision "
    "2^-(bits+1) per value and client; values up to 2^(90 - bits))")]


def threshold_setting(options: Any) -> tuple[float, bool]:
    """The ``secagg-threshold`` fraction in force, and whether the threshold is every participant
    wherever the graph is SecAgg's complete one (:func:`~.secagg.graph_rule`).

    A threshold the user sets is theirs: their trade of dropouts tolerated
    against noise. :data:`AUTO_THRESHOLD` is a majority (0.5), except under
    ``dp = distributed`` on the complete graph (below 20 participants, or
    ``secagg-neighbours`` 0), where it is all ``m`` participants. Each client's
    noise share is sized for the threshold (``sigma / sqrt(t)``, so that any
    ``t`` survivors' total holds the accountant's variance), so a total of all
    ``m`` carries ``m / t`` times central's variance, and with ``t = m``
    exactly central's: the server can then unmask nothing but the total of all
    of them, and a participant lost mid-round makes the aggregation start again
    without it before anything is released
    (:meth:`~fedcluster.strategies.private.SecureSum.enough`). On SecAgg+'s
    sparse graph the noise is a neighbourhood's (``m / t`` is large whatever
    ``t``) and a threshold of a whole neighbourhood would make any one of many
    participants lost restart the aggregation, so the majority stays.
    """
    if options.secagg_threshold != AUTO_THRESHOLD:
        return options.secagg_threshold, False
    return 0.5, options.dp == "distributed"


def privacy_on(options: Any) -> bool:
    """Whether a run uses DP or secure aggregation."""
    return options.dp != "off" or options.secure_aggregation


def check_privacy(options: Any, sum_forms: Collection[str] | None) -> None:
    """Refuse settings under which DP or secure aggregation cannot hold (ValueError, one reason).

    ``sum_forms`` are the methods whose server needs only per-cluster totals
    (the sum form of a Lloyd step; for ffcm-avg1, of its fuzzy step:
    membership-weighted sums and supports, eq. 8), as the registry declares
    them (:data:`fedcluster.methods.SUM_FORMS`); None: the method is not
    checked (the registry is not loaded, so no method's strategy can run).
    """
    if getattr(options, "init", "") == "private" and options.dp == "off":
        raise ValueError("init = private is the start of a DP run (its noisy histogram needs "
                         "dp = central or distributed); without DP use spread or local-kmeans")
    if not privacy_on(options):
        return
    what = f"dp = {options.dp}" if options.dp != "off" else "secure-aggregation"
    algorithm = options.algorithm
    if sum_forms is not None and algorithm not in sum_forms:
        raise ValueError(
            f"{what} is not available for {algorithm}: its server needs each client's own "
            f"centroids, which secure aggregation hides and DP cannot bound; use one of "
            f"{', '.join(sum_forms)}")
    if getattr(options, "local_steps", 1) != 1:
        raise ValueError(f"{what} needs local-steps = 1 (the sum form of one Lloyd step), "
                         f"got {options.local_steps}")
    if getattr(options, "batch_size", 0) != 0:
        raise ValueError(f"{what} needs batch-size = 0 (one batch of all rows), "
                         f"got {options.batch_size}")
    if getattr(options, "aggregation", "mean") != "mean" or \
            getattr(options, "max_client_share", 1.0) != 1.0:
        raise ValueError(f"{what} needs aggregation = mean and max-client-share = 1: robust "
                         "aggregation needs each client's own centroids")
    if getattr(options, "tol_scale", "absolute") == "variance":
        raise ValueError(f"{what} needs tol-scale = absolute: tol-scale = variance asks each "
                         "client for the unnoised mean and variance of its rows")
    init = getattr(options, "init", "random")
    if init in ("local-kmeans", "kfed"):
        raise ValueError(f"{what} needs init = private (under DP), random or spread (in "
                         f"--data-bounds) or an array file: init = {init} sends each client's "
                         "local centroids")
    if options.dp != "off" or init in ("random", "spread"):
        # Under DP without them the bounds are estimated with a share of the budget (.bounds).
        if not options.data_bounds and options.dp == "off":
            raise ValueError(f"{what} needs data-bounds, the declared box of the data "
                             "(e.g. '0:1e6'): a random start draws in it without asking the "
                             "clients")
        if options.data_bounds:
            from .mechanism import parse_bounds

            parse_bounds(options.data_bounds)
    if options.score != "exact":
        raise ValueError(f"{what} needs score = exact: the clients' own means are not released")
    if options.dp != "off" and options.n_init != 1:
        raise ValueError(f"{what} needs n-init = 1: comparing restarts would release scores "
                         "without noise")
    # DP's sum form has no floor per cluster (a floor would void the sensitivity bound), so
    # without masks a client's sum over a cluster of one row would be that row, clipped and shifted.
    if options.dp != "off" and not options.data_bounds and \
            options.dp_bounds_share + (options.dp_start_share if init == "private" else 0) >= 1:
        raise ValueError(f"dp-bounds-share {options.dp_bounds_share:g} and dp-start-share "
                         f"{options.dp_start_share:g} leave the rounds no budget: their sum must "
                         f"be below 1")
    if options.dp != "off" and 0 < options.dp_noise_multiplier < MIN_NOISE_MULTIPLIER:
        raise ValueError(f"dp-noise-multiplier {options.dp_noise_multiplier:g} is below "
                         f"{MIN_NOISE_MULTIPLIER:g} (0: calibrate it): one round alone would "
                         f"spend more than dp-epsilon can be ({MAX_EPSILON:g})")
    if options.dp != "off" and options.dp_noise_multiplier > 0:
        from .accountant import analytic_epsilon

        # Refused here, not by the accountant's first round: a tiny multiplier's own epsilon
        # would also cost the accountant gigabytes to compute exactly.
        if (alone := analytic_epsilon(options.dp_noise_multiplier, 1, options.dp_delta)) > \
                options.dp_epsilon:
            raise ValueError(f"dp-noise-multiplier {options.dp_noise_multiplier:g} spends epsilon "
                             f"{alone:.4g} in one round at dp-delta {options.dp_delta:g}, more "
                             f"than dp-epsilon {options.dp_epsilon:g}: raise it, or give 0 to "
                             f"calibrate it")
    if options.dp != "off" and not options.secure_aggregation:
        raise ValueError(f"dp = {options.dp} needs secure-aggregation = true: the server must see "
                         "only the total of the clients' sums (a client's own sum over a cluster "
                         "of one row would be that row)")


def check_delta_for_rows(options: Any, rows: int) -> None:
    """Refuse ``dp-delta >= 1 / rows`` for a DP run over ``rows`` rows in all (ValueError).

    A mechanism may release one row of ``rows`` in the clear with probability
    ``delta`` per row and still be ``(0, delta)``-DP: with ``delta >= 1 / rows``
    that is a row on average. Checked where the rows are known before the
    start (the command line's simulation, :meth:`FederatedKMeans.fit
    <fedcluster.estimator.FederatedKMeans.fit>`); a deployment's server never
    learns the number of rows.
    """
    if options.dp != "off" and rows > 0 and options.dp_delta >= 1 / rows:
        raise ValueError(f"dp-delta {options.dp_delta:g} is not below 1 / rows = {1 / rows:.3g} "
                         f"({rows} rows in all): give a smaller --dp-delta")
