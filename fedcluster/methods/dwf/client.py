"""The DWF/EWF client step: local Lloyd steps from the global centroids (Algorithm 2)."""

from __future__ import annotations

from ...local.floor import check_rows, withhold_small
from ...local.steps import chunk_size, min_cluster_size, need_centroids
from ...messages import ClientSummary, request_option
from ...numerics import lloyd, namespace_of, to_numpy
from .options import DWFOptions


#: The request kind of this step (Flower routes "<category>.<action>").
LLOYD = "train"


def lloyd_request(X, centroids, config: dict) -> ClientSummary:
    """Up to ``local-steps`` Lloyd steps from the global centroids (DWF Algorithm 2).

    The counts are the numbers of local points assigned to each *global*
    centroid (the DWF weights, eq. 7) and ``sse`` is the local sum of squared
    distances to the global centroids; both come from the first assignment.
    Empty clusters keep their global centroid. Privacy floor: a cluster of
    fewer than ``min-cluster-size`` rows, in the first assignment or in the
    last (the one behind the sent centroid), or whose centroid equals a value
    fewer local rows hold, is withheld like an empty one: its global centroid
    goes back with count 0, which the server's weighted mean leaves out
    (eq. 4-5). A client of fewer than ``min-cluster-size * k`` rows thus sends
    the clusters it can and withholds the others.
    """
    xp = namespace_of(X)
    given = need_centroids(centroids)
    p = min_cluster_size(config)
    check_rows(int(X.shape[0]), p)
    result = lloyd(
        X,
        xp.asarray(given),
        max_iter=request_option(config, DWFOptions, "local-steps"),
        tol=request_option(config, DWFOptions, "tol"),
        chunk_size=chunk_size(config),
    )
    sent, counts = withhold_small(X, to_numpy(result.centroids), to_numpy(result.first.counts),
                                  to_numpy(result.counts), p, given)
    return ClientSummary(n=int(X.shape[0]), centroids=sent, counts=counts,
                         sse=float(result.first.inertia))
