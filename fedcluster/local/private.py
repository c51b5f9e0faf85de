"""The clients' side of a private round: the sum step, its distributed noise, the protocol stages.

:func:`sums_request` answers ``train.sums``, one Lloyd step in sum form
(:mod:`fedcluster.privacy.mechanism`): per global centroid, the sum of the nearest rows
(clipped and shifted when the request declares ``data-bounds`` for DP) and
their number, with the sum of squared distances. A method whose sum form
weighs rows differently (``ffcm-avg1``: by fuzzy memberships) answers its
own request kind through the same :func:`sum_form_reply`. Under distributed DP
(``dp-client-noise`` > 0) the client adds its share of the noise to the sums
and counts, a discrete Gaussian on the fixed-point grid ``2^-f`` of secure
aggregation (:func:`~fedcluster.privacy.mechanism.add_noise`: OpenDP's sampler and secure
generator, never a server seed, which would let the server subtract the
noise), and sends no squared distances. Its share lies on the grid, so the
fixed-point encoding keeps it exactly and the masked total of the shares is
a sum of discrete Gaussians: close to a discrete Gaussian, not exactly one
(Kairouz, Liu & Steinke 2021); see :mod:`fedcluster.strategies.private` for what the accountant
counts. :func:`histogram_request` answers the bounds step of a DP run
without declared bounds (:mod:`fedcluster.privacy.bounds`): each feature's counts over a fixed
grid; :func:`cell_sums_request` the private start's (:mod:`fedcluster.privacy.start`): the
clipped sum and the number of the rows nearest each cell; both with their
share of the step's noise under distributed DP. :func:`secure_stage` runs the stages of secure aggregation
(:mod:`fedcluster.privacy.secagg`) with the client's session state.

What the server can and cannot make a client do (:func:`check_dp_request`,
before any step runs): a data owner states its own floor in its SuperNode's
``--node-config`` (:data:`NODE_MAX_EPSILON`, :data:`NODE_MIN_NOISE`,
:data:`NODE_REQUIRE`), and a request below it is refused with the reason.
Whatever its floor, a client answers a request that claims DP only in sum
form (or a setup step's: :data:`SETUP_STEPS`), only inside secure
aggregation's masked stage, only with ``data-bounds`` (declared or
estimated; the bounds step needs none), and only if the request's noise
multiplier spends at most its ``dp-epsilon`` over its ``dp-rounds`` after
the setup steps' multiplier (:func:`~fedcluster.privacy.accountant.fits`, the accountant's
own test; a setup step's own multiplier must be at least that); under
``dp = distributed`` it never sends a share with less noise than it
computes itself: ``z Delta / sqrt(t)``, with ``Delta`` from the request's
clipping (a setup step's: its own multiplier times its sensitivity) and
``t`` the threshold the client accepted at the share stage (not a number
the masked request states). A setup step's counts (and the private start's
sums) are never sent outside DP and secure aggregation. What it cannot
check: that the server adds central noise, or runs no more rounds than it
said (each request is judged alone).

The privacy floor (``min-cluster-size``) in the sum form: without DP it is
applied cluster by cluster as in every other reply (:func:`~.floor.withhold_small_sums`):
a cluster of fewer than p rows (for ``ffcm-avg1``: whose crisp cluster has
fewer) is withheld, sums and count 0, because the server unmasks the totals
and releases ``sums / counts``: a cluster that one client's single row fills
would otherwise be that row, in the server's hands and in the model. Under DP
it is not: withholding a cluster of fewer than p rows makes one row decide
whether p rows' sum is sent, which voids the sensitivity bound, and the noise
covers what the floor would. DP replies therefore leave a client only masked,
inside secure aggregation's stages (:func:`~fedcluster.privacy.options.check_privacy`
refuses DP without it). Either way the client needs p rows to answer at all.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..messages import ClientSummary, ProtocolError, Request, request_option, request_setting
from ..numerics import assign, cluster_stats, namespace_of, to_numpy
from ..options import Options
from ..privacy import secagg_names
from ..privacy.accountant import fits
from ..privacy.bounds import feature_histogram
from ..privacy.bounds import sensitivity as histogram_sensitivity
from ..privacy.kinds import (CELL_SUMS, CLIENT_NOISE_KEY, HISTOGRAM, ROUNDS_KEY, SETUP_NOISE_KEY,
                             STEP_NOISE_KEY)
from ..privacy.mechanism import (Clipping, add_noise, client_noise_scale, clipped_sums,
                                 discrete_gaussian)
from ..privacy.options import MIN_NOISE_MULTIPLIER
from .floor import check_rows, withhold_small_sums
from .steps import chunk_size, min_cluster_size, need_centroids, non_negative

#: Node-config key: the largest ``dp-epsilon`` this data owner accepts for a run.
NODE_MAX_EPSILON = "dp-max-epsilon"
#: Node-config key: the smallest noise multiplier ``z`` this data owner accepts.
NODE_MIN_NOISE = "dp-min-noise-multiplier"
#: Node-config key: ``"any"`` (answer only requests under central or distributed DP) or
#: ``"distributed"`` (only distributed DP, the noise the client adds and checks itself).
NODE_REQUIRE = "dp-require"
#: ``dp-require`` -> the request's ``dp`` modes it accepts.
DP_MODES = {"any": ("central", "distributed"), "distributed": ("distributed",)}


@dataclass(frozen=True)
class Masking:
    """What secure aggregation tells the step it wraps (the masked stage only).

    ``threshold``: the ``t`` this client accepted at the share stage (from
    its own session, not from the masked request); ``fraction_bits``: the
    fixed-point grid ``2^-fraction_bits`` of the aggregation.
    """

    threshold: int
    fraction_bits: int


#: The assignment behind a sum-form reply: ``(X, given centroids, clipping or None, config)`` ->
#: per-cluster sums (of the clipped, shifted rows under a clipping), counts (or a method's
#: weights of the rows, such as fuzzy supports), the rows nearest each centroid (what the
#: floor counts) and the sum of squared distances.
SumStep = Callable[[Any, np.ndarray, Clipping | None, dict],
                   tuple[np.ndarray, np.ndarray, np.ndarray, float]]


def sum_form_reply(X, centroids, config: dict, step: SumStep) -> ClientSummary:
    """A reply in sum form, whatever the step's assignment: floor, clipping, the client's noise.

    Reads ``data-bounds`` and ``dp-clip`` (the clipping, when bounds are
    given: ``step`` then sums clipped, shifted rows), ``dp-client-noise``
    (0: none; its discrete Gaussian share goes on the sums and counts
    through the same :func:`~fedcluster.privacy.mechanism.add_noise` as the server's, and the
    squared distances are withheld) and ``secagg-fraction-bits``, the grid
    of the noise (set by :func:`fedcluster.client.respond.respond` from the
    masked stage; :data:`~fedcluster.privacy.secagg_names.DEFAULT_FRACTION_BITS` when absent),
    besides the floor (per cluster without DP, see the module docstring). The request was held to the client's floor before
    (:func:`check_dp_request`). Every method's sum form (:func:`sums_request`,
    ``ffcm-avg1``'s fuzzy sums) answers through here, so the clipping and the
    noise are one code path.
    """
    given = need_centroids(centroids)
    p = min_cluster_size(config)
    check_rows(int(X.shape[0]), p)
    dp_off = "dp" not in config or request_option(config, Options, "dp") == "off"
    bounds = request_option(config, Options, "data-bounds")
    noise = request_setting(config, CLIENT_NOISE_KEY, float, non_negative)
    clip = request_option(config, Options, "dp-clip")
    bits = config.get(secagg_names.BITS_KEY, secagg_names.DEFAULT_FRACTION_BITS)
    clipping = Clipping.declared(bounds, clip, given.shape[1]) if bounds else None
    sums, counts, sizes, sse = step(X, given, clipping, config)
    if dp_off:
        sums, counts = withhold_small_sums(X, sums, counts, sizes, p)
    if clipping is not None and noise > 0:
        sums, counts = add_noise(sums, counts, noise, clipping.count_weight, bits)
        sse = float("nan")  # an un-noised total: not released under DP
    return ClientSummary(n=int(X.shape[0]), sums=sums, counts=counts, sse=sse)


def check_dp_request(sum_form: bool, config: Mapping[str, Any], node_config: Mapping[str, Any],
                     masking: Masking | None, dim: int, setup_sensitivity: float = 0.0) -> None:
    """Refuse a request below this client's DP floor (see the module docstring).

    ``sum_form``: whether the request's kind is a sum form or a setup step's
    (``setup_sensitivity``: that step's L2 sensitivity, 0 for a round's
    request: :data:`SETUP_STEPS`); ``config`` its
    settings (``dp``, and under DP ``dp-epsilon``, ``dp-delta``,
    ``dp-noise-multiplier``, ``dp-rounds``, ``data-bounds``, ``dp-clip``,
    ``dp-client-noise``); ``node_config`` the data owner's floor;
    ``masking`` what the masked stage around the request says (None
    outside secure aggregation); ``dim`` the number of features.

    Raises
    ------
    ProtocolError
        Naming the setting and the floor it falls below (the client then
        sends an error reply with that reason).
    """
    demand = node_config.get(NODE_REQUIRE, "")
    if demand not in ("", *DP_MODES):
        raise ProtocolError(f"node config '{NODE_REQUIRE}' must be one of {', '.join(DP_MODES)}, "
                            f"got {demand!r}")
    max_epsilon = _node_number(node_config, NODE_MAX_EPSILON, absent=math.inf)
    min_noise = _node_number(node_config, NODE_MIN_NOISE, absent=0.0)
    mode = request_option(config, Options, "dp") if "dp" in config else "off"
    if mode == "off":
        if demand:
            raise ProtocolError(f"this client answers only requests under differential privacy "
                                f"(node config {NODE_REQUIRE} = {demand}); this one has dp = off")
        return
    if demand and mode not in DP_MODES[demand]:
        raise ProtocolError(f"this client answers only dp = distributed (node config "
                            f"{NODE_REQUIRE} = {demand}); this request has dp = {mode}")
    if not sum_form:
        raise ProtocolError(f"dp = {mode} covers the sum form of a round only")
    if masking is None:
        raise ProtocolError(f"dp = {mode}: this client sends its sums only masked, inside "
                            "secure aggregation")
    epsilon = request_option(config, Options, "dp-epsilon")
    delta = request_option(config, Options, "dp-delta")
    z = request_setting(config, "dp-noise-multiplier", float, lambda v: v >= MIN_NOISE_MULTIPLIER)
    rounds = request_setting(config, ROUNDS_KEY, int, lambda v: v >= 1)
    usable = lambda v: v == 0 or v >= MIN_NOISE_MULTIPLIER  # noqa: E731
    setup = request_setting(config, SETUP_NOISE_KEY, float, usable) \
        if SETUP_NOISE_KEY in config else 0.0
    step = request_setting(config, STEP_NOISE_KEY, float, usable) if setup_sensitivity else 0.0
    # The setup's multiplier composes the steps' ((sum 1 / z^2)^(-1/2)): of one step it is that
    # step's up to the last bits of float rounding, which must not refuse it.
    if setup_sensitivity and not (setup and step >= setup * (1 - 1e-12)):
        raise ProtocolError(f"{STEP_NOISE_KEY} {step:g} is not counted by the run's setup "
                            f"steps ({SETUP_NOISE_KEY} {setup:g}: it must be at least that)")
    if epsilon > max_epsilon:
        raise ProtocolError(f"dp-epsilon {epsilon:g} is above this client's floor: node config "
                            f"{NODE_MAX_EPSILON} = {max_epsilon:g}")
    for name, value in (("noise multiplier", z), ("setup step noise multiplier", step)):
        if value and value < min_noise:
            raise ProtocolError(f"{name} {value:g} is below this client's floor: node config "
                                f"{NODE_MIN_NOISE} = {min_noise:g}")
    if not fits(z, rounds, delta, epsilon, setup):
        raise ProtocolError(f"noise multiplier {z:g} over {rounds} round(s)"
                            + (f" after the setup steps' {setup:g}" if setup else "")
                            + f" spends more than dp-epsilon {epsilon:g} at dp-delta {delta:g}")
    if setup_sensitivity:
        if mode == "distributed":
            _check_share(config, step * setup_sensitivity / math.sqrt(masking.threshold),
                         f"setup step noise multiplier {step:g} x sensitivity "
                         f"{setup_sensitivity:g}", masking)
        return
    bounds = request_option(config, Options, "data-bounds")
    if not bounds:
        raise ProtocolError(f"dp = {mode} needs data-bounds: without them no row is clipped")
    if mode == "distributed":
        clipping = Clipping.declared(bounds, request_option(config, Options, "dp-clip"), dim)
        _check_share(config, client_noise_scale(z, clipping, masking.threshold),
                     f"noise multiplier {z:g} x sensitivity {clipping.sensitivity:g}", masking)


def _check_share(config: Mapping[str, Any], own: float, why: str, masking: Masking) -> None:
    """Refuse a request whose ``dp-client-noise`` is below the client's own share ``own``."""
    noise = request_setting(config, CLIENT_NOISE_KEY, float, non_negative)
    if not noise >= own:
        raise ProtocolError(f"dp-client-noise {noise:g} is below this client's own share {own:g} "
                            f"({why} / sqrt(threshold {masking.threshold}))")


def _node_number(node_config: Mapping[str, Any], key: str, absent: float) -> float:
    """A positive number of the node config; ``absent`` (no floor) when the key is not there."""
    if key not in node_config:
        return absent
    value = node_config[key]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise ProtocolError(f"node config '{key}' must be a positive number, got {value!r}")
    return float(value)


def sums_request(X, centroids, config: dict) -> ClientSummary:
    """Per-cluster sums and counts of the rows nearest each global centroid (one Lloyd step).

    Reads ``chunk-size`` besides what :func:`sum_form_reply` reads.
    """
    return sum_form_reply(X, centroids, config, _nearest_sums)


def _nearest_sums(X, given: np.ndarray, clipping: Clipping | None, config: dict
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Sums and counts of each centroid's nearest rows (clipped under a clipping), the counts
    again as the floor's sizes, and the SSE."""
    xp = namespace_of(X)
    if clipping is None:
        stats = cluster_stats(X, xp.asarray(given), chunk_size=chunk_size(config))
        counts = to_numpy(stats.counts)
        return to_numpy(stats.sums), counts, counts, float(stats.inertia)
    labels, sqdist = assign(X, xp.asarray(given), chunk_size=chunk_size(config))
    sums, counts = clipped_sums(to_numpy(X), to_numpy(labels), len(given), clipping)
    return sums, counts, counts, float(to_numpy(sqdist).sum())


def _setup_reply(X, counts: np.ndarray, config: dict, sums: np.ndarray | None = None,
                 count_weight: float = 1.0) -> ClientSummary:
    """A setup step's counts (flat; with ``sums``, the private start's), with this client's noise
    share (``dp-client-noise`` on each sum coordinate, that over ``count_weight`` on each count;
    counts alone: ``dp-client-noise`` each, through the same sampler).

    Sent only under DP and masked (the request was held to the client's
    floor before, :func:`check_dp_request`): counts in the clear would show
    single rows in their sparse bins or cells, sums the rows themselves.
    """
    if secagg_names.BITS_KEY not in config or config.get("dp", "off") == "off":
        raise ProtocolError("counts and sums of a setup step are sent only under DP, inside "
                            "secure aggregation")
    noise = request_setting(config, CLIENT_NOISE_KEY, float, non_negative)
    bits = config[secagg_names.BITS_KEY]
    if sums is None:
        if noise > 0:
            counts = discrete_gaussian(counts, noise, bits)
        return ClientSummary(n=int(X.shape[0]), counts=np.ravel(counts))
    if noise > 0:
        sums, counts = add_noise(sums, counts, noise, count_weight, bits)
    return ClientSummary(n=int(X.shape[0]), sums=sums, counts=counts)


def histogram_request(X, centroids, config: dict) -> ClientSummary:
    """Each feature's counts over the bounds grid (:func:`~fedcluster.privacy.bounds.feature_histogram`)."""
    return _setup_reply(X, feature_histogram(to_numpy(X)), config)


def _cell_clipping(config: Mapping[str, Any], dim: int) -> Clipping:
    """The clipping of a private start's request: its ``data-bounds`` and ``dp-clip`` (required:
    without them no row's contribution is bounded)."""
    bounds = request_option(config, Options, "data-bounds")
    if not bounds:
        raise ProtocolError("a private start's request needs data-bounds: without them no row "
                            "is clipped")
    try:
        return Clipping.declared(bounds, request_option(config, Options, "dp-clip"), dim)
    except ValueError as exc:
        raise ProtocolError(str(exc)) from None


def cell_sums_request(X, centroids, config: dict) -> ClientSummary:
    """Per cell the request carries (:mod:`fedcluster.privacy.start`), the sum of the rows nearest it,
    clipped and shifted as a round's (:func:`~fedcluster.privacy.mechanism.clipped_sums`), and their
    number: a row adds its clipped vector to one sum and 1 to one count, the sensitivity of a
    Lloyd step's sum form (:attr:`~fedcluster.privacy.mechanism.Clipping.sensitivity`)."""
    cells = need_centroids(centroids)
    clipping = _cell_clipping(config, cells.shape[1])
    labels, _ = assign(X, namespace_of(X).asarray(cells), chunk_size=chunk_size(config))
    sums, counts = clipped_sums(to_numpy(X), to_numpy(labels), len(cells), clipping)
    return _setup_reply(X, counts, config, sums, clipping.count_weight)


#: The setup steps' request kinds -> their L2 sensitivity to one row, from the dimension and the
#: request's config (the private start's: its clipping's).
SETUP_STEPS: dict[str, Callable[[int, Mapping[str, Any]], float]] = {
    HISTOGRAM: lambda dim, config: histogram_sensitivity(dim),
    CELL_SUMS: lambda dim, config: _cell_clipping(config, dim).sensitivity,
}


def dimension_request(X) -> ClientSummary:
    """The number of features only (a start in a declared box needs it; ``n`` is 0)."""
    return ClientSummary(n=0, payload={"dimension": int(X.shape[1])})


def secure_stage(request: Request, session: MutableMapping[str, Any], node: int,
                 inner: Callable[[Request, Masking | None], ClientSummary]) -> ClientSummary:
    """A secure-aggregation stage (:func:`.secagg.client_stage`).

    ``inner(request, masking)`` answers the masked stage's own request;
    :class:`Masking` holds the threshold this client accepted at the share
    stage, read from its session state (stored by :mod:`fedcluster.privacy.secagg` as JSON
    under :data:`~fedcluster.privacy.secagg_names.STATE_KEY`; None when it holds none, which the DP
    check refuses), and the stage's fraction bits (which
    :func:`~fedcluster.privacy.secagg.client_stage` checks before it calls ``inner``).
    """
    # The protocol's module (and its cryptography) is loaded by the first stage a client runs,
    # not by every client process: most runs never aggregate securely.
    from ..privacy import secagg

    masking = None
    if request.kind == secagg_names.MASKED:
        text = session.get(secagg_names.STATE_KEY)
        threshold = json.loads(text).get("threshold") if isinstance(text, str) else None
        bits = request.config.get(secagg_names.BITS_KEY)
        if isinstance(threshold, int) and isinstance(bits, int):
            masking = Masking(threshold, bits)
    return secagg.client_stage(request, session, node, lambda wrapped: inner(wrapped, masking))
