"""The clients' side of a private round: the sum step, its distributed noise, the protocol stages.

:func:`sums_request` answers ``train.sums``, one Lloyd step in sum form
(:mod:`.mechanism`): per global centroid, the sum of the nearest rows
(clipped and shifted when the request declares ``data-bounds`` for DP) and
their number, with the sum of squared distances. A method whose sum form
weighs rows differently (``ffcm-avg1``: by fuzzy memberships) answers its
own request kind through the same :func:`sum_form_reply`. Under distributed DP
(``dp-client-noise`` > 0) the client adds its share of the Gaussian noise to
the sums and counts, drawn from the operating system's entropy (never from a
server seed: a server that knew the seed could subtract the noise) and sends
no squared distances. :func:`secure_stage` runs the stages of secure
aggregation (:mod:`.secagg`) with the client's session state.

The privacy floor (``min-cluster-size``) is not applied cluster by cluster
here: withholding a cluster of fewer than p rows makes one row decide whether
p rows' sum is sent, which voids the DP sensitivity bound. These replies
therefore leave a client only masked, inside secure aggregation's stages
(:func:`~.options.check_privacy` refuses DP without it); the client still
needs p rows to answer at all.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, MutableMapping
from typing import Any

import numpy as np

from ..client.privacy import check_rows
from ..client.steps import chunk_size, min_cluster_size, need_centroids, non_negative
from ..messages import ClientSummary, Request, request_option, request_setting
from ..numerics import assign, cluster_stats, namespace_of, to_numpy
from ..options import Options
from .kinds import CLIENT_NOISE_KEY
from .mechanism import Clipping, add_noise, clipped_sums
from .secagg import client_stage



#: The assignment behind a sum-form reply: ``(X, given centroids, clipping or None, config)`` ->
#: per-cluster sums (of the clipped, shifted rows under a clipping), counts (or a method's
#: weights of the rows, such as fuzzy supports) and the sum of squared distances.
SumStep = Callable[[Any, np.ndarray, Clipping | None, dict], tuple[np.ndarray, np.ndarray, float]]


def sum_form_reply(X, centroids, config: dict, step: SumStep) -> ClientSummary:
    """A reply in sum form, whatever the step's assignment: floor, clipping, the client's noise.

    Reads ``data-bounds`` and ``dp-clip`` (the clipping, when bounds are
    given: ``step`` then sums clipped, shifted rows) and ``dp-client-noise``
    (0: none; its Gaussian share goes on the sums and counts through the
    same :func:`~.mechanism.add_noise` as the server's, and the squared
    distances are withheld), besides the floor. Every method's sum form
    (:func:`sums_request`, ``ffcm-avg1``'s fuzzy sums) answers through here,
    so the clipping and the noise are one code path.
    """
    given = need_centroids(centroids)
    check_rows(int(X.shape[0]), min_cluster_size(config))
    bounds = request_option(config, Options, "data-bounds")
    noise = request_setting(config, CLIENT_NOISE_KEY, float, non_negative)
    clip = request_option(config, Options, "dp-clip")
    clipping = Clipping.declared(bounds, clip, given.shape[1]) if bounds else None
    sums, counts, sse = step(X, given, clipping, config)
    if clipping is not None and noise > 0:
        rng = np.random.default_rng(secrets.randbits(128))
        sums, counts = add_noise(sums, counts, noise, clipping.count_weight, rng)
        sse = float("nan")  # an un-noised total: not released under DP
    return ClientSummary(n=int(X.shape[0]), sums=sums, counts=counts, sse=sse)


def sums_request(X, centroids, config: dict) -> ClientSummary:
    """Per-cluster sums and counts of the rows nearest each global centroid (one Lloyd step).

    Reads ``chunk-size`` besides what :func:`sum_form_reply` reads.
    """
    return sum_form_reply(X, centroids, config, _nearest_sums)


def _nearest_sums(X, given: np.ndarray, clipping: Clipping | None, config: dict
                  ) -> tuple[np.ndarray, np.ndarray, float]:
    """Sums and counts of each centroid's nearest rows (clipped under a clipping), and the SSE."""
    xp = namespace_of(X)
    if clipping is None:
        stats = cluster_stats(X, xp.asarray(given), chunk_size=chunk_size(config))
        return to_numpy(stats.sums), to_numpy(stats.counts), float(stats.inertia)
    labels, sqdist = assign(X, xp.asarray(given), chunk_size=chunk_size(config))
    sums, counts = clipped_sums(to_numpy(X), to_numpy(labels), len(given), clipping)
    return sums, counts, float(to_numpy(sqdist).sum())


def dimension_request(X) -> ClientSummary:
    """The number of features only (a start in a declared box needs it; ``n`` is 0)."""
    return ClientSummary(n=0, payload={"dimension": int(X.shape[1])})


def secure_stage(request: Request, session: MutableMapping[str, Any], node: int,
                 inner: Callable[[Request], ClientSummary]) -> ClientSummary:
    """A secure-aggregation stage (:func:`.secagg.client_stage`)."""
    return client_stage(request, session, node, inner)
