"""What a client computes for federated standardisation and the choice of k.

:func:`transformed` applies a request's standardisation to the rows before
any step (:func:`.respond.respond`), so every method clusters standardised
rows without knowing it.

:func:`moments_request` answers the moments request (the run's first when
it standardises) and :func:`silhouette_request` the silhouette request of a
k-selection run. Both reply with statistics of all the client's rows, at
least ``min-cluster-size`` of them (and at least
:data:`.privacy.MOMENTS_MIN_ROWS` for the moments), which
:func:`.privacy.check_reply` verifies before the reply leaves; no row, and
no statistic of a subset of rows, leaves the client.
"""

from __future__ import annotations

import numpy as np

from ..data import DataError
from ..messages import ClientSummary, ProtocolError, Request, finite_array, request_setting
from ..metrics.local import local_statistics
from ..numerics.moments import local_moments, standardize
from .floor import MOMENTS_MIN_ROWS, check_rows
from .steps import chunk_size, min_cluster_size, need_centroids


def moments_request(X, centroids, config: dict) -> ClientSummary:
    """The number of rows and the per-feature mean and population standard deviation.

    Equivalent to the per-feature sum and sum of squares (sum = n mean,
    sum of squares = n (std^2 + mean^2)), but each value is bounded by the
    data's own magnitude, so the server's magnitude checks apply unchanged,
    and the centred form keeps the digits the raw sum of squares would lose.
    """
    check_rows(int(X.shape[0]), max(min_cluster_size(config), MOMENTS_MIN_ROWS))
    moments = local_moments(X)
    return ClientSummary(n=moments.n, mean=moments.mean, std=moments.std)


def silhouette_request(X, centroids, config: dict) -> ClientSummary:
    """The sum over all local rows of their simplified silhouette for the global centroids.

    A row's value is ``(b - a) / max(a, b)``, ``a`` its distance to the
    nearest centroid and ``b`` to the second nearest (0 when both are 0):
    Hruschka, Campello & de Castro (2004)'s simplified silhouette, as used
    for federated evaluation by Wang et al. and Garst & Reinders. Only that
    sum, the row count and the sum of squared distances to the nearest
    centroid (as in the score request) leave the client; the server divides.
    """
    centroids = need_centroids(centroids)
    k = request_setting(config, "k", int, lambda v: v >= 2)
    if len(centroids) != k:
        raise ProtocolError(f"silhouette request of k = {k} carries {len(centroids)} centroids")
    check_rows(int(X.shape[0]), min_cluster_size(config))
    stats = local_statistics(X, centroids, chunk_size=chunk_size(config))
    return ClientSummary(n=stats.n, sse=stats.sse, silhouette=stats.silhouette_sum)


def transformed(X, request: Request):
    """The rows a request is about: ``X`` itself, or ``(X - shift) / scale`` if it carries a transform.

    The transform is checked like the centroids a request carries: finite,
    within the protocol's magnitude bound, one value per feature, and every
    scale positive.

    Raises
    ------
    ProtocolError
        A transform with one of its two arrays, or a bad one.
    DataError
        The transform has another dimension than the rows.
    """
    if request.shift is None and request.scale is None:
        return X
    if request.shift is None or request.scale is None:
        raise ProtocolError("request transform needs both 'shift' and 'scale'")
    shift = finite_array(np.asarray(request.shift), "request shift", ndim=1)
    scale = finite_array(np.asarray(request.scale), "request scale", ndim=1)
    if shift.shape != scale.shape:
        raise ProtocolError(f"request shift {shift.shape} and scale {scale.shape} differ in shape")
    if np.any(scale <= 0):
        raise ProtocolError("request scale has values <= 0")
    if X.shape[1] != shift.shape[0]:
        raise DataError(f"client data has dimension {X.shape[1]}, the run's transform "
                        f"{shift.shape[0]}")
    return standardize(X, shift, scale)
