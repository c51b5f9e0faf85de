"""The client step of federated fuzzy c-means (FFCM, Stallmann & Wilbik, paper ``001``)."""

from __future__ import annotations

import numpy as np

from ...numerics import namespace_of, to_numpy
from .kernels import fuzzy_step, fuzzy_sums
from ...messages import ClientSummary, request_option
from ...local.floor import check_rows, withhold_small
from ...local.steps import chunk_size, min_cluster_size, need_centroids
from ...local.private import sum_form_reply
from ...privacy.mechanism import Clipping
from .options import FFCMOptions


#: The request kind of this step (Flower routes "<category>.<action>").
FUZZY = "train.fuzzy"
#: The request kind of avg1's sum form, under DP or secure aggregation.
FUZZY_SUMS = "train.fuzzy_sums"


def round_request(X, centroids, config: dict) -> ClientSummary:
    """Memberships, local centres and supports against the global centres (steps 3-4).

    Reads ``fuzzifier`` (m > 1) and ``chunk-size``. Replies with the local
    centres of eq. 6 (``centroids``), the supports ``W_j`` of eq. 7
    (``weights``), the crisp counts and the crisp sum of squared distances to
    the nearest global centre (``counts``, ``sse``: the same score as every
    other method reports, so the history's round scores compare).

    Privacy floor: a fuzzy centre is a weighted mean of all local rows, but one
    whose crisp cluster has fewer than ``min-cluster-size`` rows is dominated
    by those few rows; it is withheld, as is a centre equal to a value fewer
    local rows hold (the global centre goes back with
    support and count 0, so eq. 8 and 9 leave this client out of it). A
    choice of fedcluster's; the paper sends every centre.
    """
    xp = namespace_of(X)
    given = need_centroids(centroids)
    p = min_cluster_size(config)
    check_rows(int(X.shape[0]), p)
    step = fuzzy_step(
        X,
        xp.asarray(given),
        fuzzifier=request_option(config, FFCMOptions, "fuzzifier"),
        chunk_size=chunk_size(config),
    )
    counts = to_numpy(step.counts)
    centres, counts, supports = withhold_small(X, to_numpy(step.centres), counts, counts, p, given,
                                               to_numpy(step.supports))
    return ClientSummary(n=int(X.shape[0]), centroids=centres, counts=counts, sse=step.inertia,
                         weights=supports)


def fuzzy_sums_request(X, centroids, config: dict) -> ClientSummary:
    """avg1 in sum form: per global centre ``sum_i u_ij^m x_i`` and ``W_j = sum_i u_ij^m``.

    With one step per round, eq. 8's support-weighted mean of the local
    centres ``c_j = sum_i u_ij^m x_i / W_j`` (eq. 6) is the total of the
    clients' sums over the total of their supports: the server needs only
    totals, which secure aggregation and DP can give it. The reply's
    ``sums`` are the numerators, its ``counts`` the supports (fractional
    "fuzzy counts"), ``sse`` the crisp squared distances to the nearest
    global centre (the score every method reports). Reads ``fuzzifier`` and
    ``chunk-size``, and what :func:`~fedcluster.local.private.sum_form_reply`
    reads: under DP (``data-bounds``) each row enters the sums clipped and
    shifted, ``x'``, exactly as in dwf's sum form, with the same client noise.

    Sensitivity (DP): the memberships ``u_i`` of a row depend on that row and
    the public centres only, lie in [0, 1] and sum to 1, so with ``m > 1``
    ``sum_j u_ij^(2m) <= sum_j u_ij = 1``. Adding or removing the row moves the
    released vector (sums, ``w`` counts) of :func:`~fedcluster.privacy.mechanism.add_noise`
    by ``(u_ij^m x'_i, w u_ij^m)_j``, of L2 norm
    ``sqrt(sum_j u_ij^(2m)) sqrt(||x'_i||^2 + w^2) <= sqrt(R^2 + w^2)``, the
    sensitivity ``Delta`` of a hard (one-hot) assignment
    (:attr:`~fedcluster.privacy.mechanism.Clipping.sensitivity`): the same
    Gaussian mechanism, noise and accountant hold. The server's check that
    ``||sums_j|| <= counts_j R`` holds too (``||sum_i u_ij^m x'_i|| <= R W_j``).

    The floor as in dwf's sum form (:mod:`fedcluster.local.private`): without DP a
    centre whose crisp cluster has fewer than ``min-cluster-size`` rows is
    withheld (sums and support 0), as the plain avg1 client withholds it;
    under DP none is.
    """
    return sum_form_reply(X, centroids, config, _fuzzy_totals)


def _fuzzy_totals(X, given: np.ndarray, clipping: Clipping | None, config: dict
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Fuzzy sums (of the clipped, shifted rows under a clipping), supports, crisp counts and
    the crisp SSE.

    The memberships are of the rows themselves, as dwf assigns a row by its
    unclipped value: which centres it weighs on does not change the bound.
    """
    xp = namespace_of(X)
    summed = None if clipping is None else (lambda rows: xp.asarray(clipping.clip(to_numpy(rows))))
    step = fuzzy_sums(X, xp.asarray(given),
                      fuzzifier=request_option(config, FFCMOptions, "fuzzifier"),
                      chunk_size=chunk_size(config), summed=summed)
    return to_numpy(step.sums), to_numpy(step.supports), to_numpy(step.counts), step.inertia
