"""The client step of federated fuzzy c-means (FFCM, Stallmann & Wilbik, paper ``001``)."""

from __future__ import annotations

from ...numerics import namespace_of, to_numpy
from .kernels import fuzzy_step
from ...messages import ClientSummary, request_option
from ...client.privacy import check_rows, withhold_small
from ...client.steps import chunk_size, min_cluster_size, need_centroids
from .options import FFCMOptions


#: The request kind of this step (Flower routes "<category>.<action>").
FUZZY = "train.fuzzy"


def round_request(X, centroids, config: dict) -> ClientSummary:
    """Memberships, local centres and supports against the global centres (steps 3-4).

    Reads ``fuzzifier`` (m > 1) and ``chunk-size``. Replies with the local
    centres of eq. 6 (``centroids``), the supports ``W_j`` of eq. 7
    (``weights``), the crisp counts and the crisp sum of squared distances to
    the nearest global centre (``counts``, ``sse``: the same score as every
    other method reports, so the history's round scores compare).

    Privacy floor: a fuzzy centre is a weighted mean of all local rows, but one
    whose crisp cluster has fewer than ``min-cluster-size`` rows is dominated
    by those few rows; it is withheld (the global centre goes back with
    support and count 0, so eq. 8 and 9 leave this client out of it). A
    choice of fedcluster's; the paper sends every centre.
    """
    xp = namespace_of(X)
    given = need_centroids(centroids)
    p = min_cluster_size(config)
    check_rows(int(X.shape[0]), p, len(given))
    step = fuzzy_step(
        X,
        xp.asarray(given),
        fuzzifier=request_option(config, FFCMOptions, "fuzzifier"),
        chunk_size=chunk_size(config),
    )
    counts = to_numpy(step.counts)
    centres, counts, supports = withhold_small(to_numpy(step.centres), counts, counts, p, given,
                                               to_numpy(step.supports))
    return ClientSummary(n=int(X.shape[0]), centroids=centres, counts=counts, sse=step.inertia,
                         weights=supports)
