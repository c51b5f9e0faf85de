"""The FeCA client step (Algorithm 2 and Algorithm 4 or 3 of the Jigsaw Game paper, ``004``).

The client runs k-means++ and Lloyd on its rows (the ``query.local_kmeans``
computation, :func:`~fedcluster.local.steps.local_kmeans`), removes
one-fit-many centroids, assigns a radius to each remaining centroid and sends
the centroid-radius pairs with their cluster sizes
(:func:`fedcluster.methods.feca.kernels.feca_client_update`).
"""

from __future__ import annotations

from ...numerics import namespace_of
from .kernels import feca_client_update
from ...messages import ClientSummary, request_option
from ...local.steps import chunk_size, local_kmeans, min_cluster_size
from .options import FeCAOptions


#: The request kind of this step (Flower routes "<category>.<action>").
FECA = "query.feca"


def feca_request(X, centroids, config: dict) -> ClientSummary:
    """Local k-means, then FeCA's refinement and radii.

    Request settings: those of ``query.local_kmeans`` (``k``, ``seed``,
    ``max-iter``, ``tol``, ``chunk-size``) and ``radius`` (``"algorithm4"`` or
    ``"theoretical"``). The reply carries the kept centroids, their ``radii``
    and ``counts`` (the rows each centroid is the mean of); the request's
    global centroids, if any, are not used. Privacy floor: the local
    clusters of fewer than ``min-cluster-size`` rows (and those whose
    centroid equals a value fewer local rows hold) are withheld, and their
    rows belong to no cluster sent, so they set no radius; each radius is a
    statistic of at least p rows of its own cluster (see
    :mod:`.kernels`, "Radii and the privacy floor"). A client all of whose
    local clusters are small sends no pair. The server groups whatever
    centroid-radius pairs it gets.
    """
    radius = request_option(config, FeCAOptions, "radius")
    local, sizes, sendable = local_kmeans(X, config)
    update = feca_client_update(X, namespace_of(X).asarray(local), sizes, sendable=sendable,
                                min_rows=min_cluster_size(config), radius=radius,
                                chunk_size=chunk_size(config))
    return ClientSummary(n=int(X.shape[0]), centroids=update.centroids, counts=update.counts,
                         radii=update.radii)
