"""DWF/EWF server kernels beyond the paper's weighted mean (eq. 3-5).

Two opt-in safeguards against careless or hostile clients (neither is in the
paper; each leaves the default aggregation untouched):

* :func:`cap_client_shares` clips each client's weight so that no client holds
  more than a given share of a cluster's total weight;
* :func:`robust_centroid_aggregate` replaces the weighted mean by a
  coordinate-wise trimmed mean or median over the clients that hold the cluster.

The spread check that names a client in other units is
:func:`fedcluster.numerics.outliers.spread_outliers` (the starts use it too).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...numerics._validation import check_all_finite
from ...numerics.backend import namespace_of


#: Robust aggregations of :func:`robust_centroid_aggregate`.
ROBUST_AGGREGATIONS = ("trimmed-mean", "median")


def _check_weights(weights: Any, name: str) -> Any:
    xp = namespace_of(weights)
    weights = xp.asarray(weights, dtype=xp.float64)
    if weights.ndim != 2 or weights.shape[0] < 1:
        raise ValueError(f"{name} must be a 2-D array of shape (n_clients, k) with n_clients >= 1, "
                         f"got shape {weights.shape}")
    check_all_finite(weights, name)
    if bool((weights < 0).any()):
        raise ValueError(f"{name} must be non-negative")
    return weights


def cap_client_shares(weights: Any, max_share: float) -> Any:
    """Clip each client's weight to at most ``max_share`` of its cluster's total (water-filling).

    Per cluster j the weights ``w_ij`` become ``min(w_ij, tau_j)``, with the
    level ``tau_j`` chosen so that after renormalisation the largest share is
    exactly ``max_share``: ``tau_j = max_share * sum_i min(w_ij, tau_j)``. The
    clipped weight goes to nobody; the clients below the level keep their
    weights, so their proportions to each other are those of eq. 7. A cluster
    where no client exceeds ``max_share`` keeps its weights unchanged (bit for
    bit).

    The cap can hold only when at least ``1 / max_share`` clients hold the
    cluster (weight > 0). With fewer holders every holder is clipped to the
    smallest holder's weight: the holders get equal shares ``1 / holders``,
    the smallest largest share possible (the limit of the water-filling as the
    level falls), and the cap is exceeded. A cluster nobody holds keeps its
    zero weights (the eq. 4 fallback of :func:`weighted_centroid_mean` then
    applies). Weights that are equal for all clients (EWF) are never changed.

    Parameters
    ----------
    weights : array of shape (m, k)
        Non-negative weights ``w_ij`` (counts for DWF).
    max_share : float
        The largest share of a cluster's weight one client may hold, in (0, 1];
        1 returns the weights unchanged.

    Returns
    -------
    array of shape (m, k), float64
        The clipped weights.
    """
    if isinstance(max_share, bool) or not 0.0 < max_share <= 1.0:
        raise ValueError(f"max_share must be in (0, 1], got {max_share!r}")
    xp = namespace_of(weights)
    weights = _check_weights(weights, "weights")
    if max_share >= 1.0:
        return weights
    m, k = weights.shape
    ordered = -xp.sort(-weights, axis=0)  # descending in each cluster
    clipped_total = xp.cumsum(ordered, axis=0) - ordered  # sum of the r largest, r = row
    rest = weights.sum(axis=0) - clipped_total  # sum of the others
    r = xp.arange(m, dtype=xp.float64)[:, None]
    room = 1.0 - max_share * r
    holders = (weights > 0).sum(axis=0)
    # Clip the r largest weights to tau_r = share * rest_r / (1 - share * r); the
    # answer is the smallest r whose (r+1)-th largest weight is below that level.
    level = max_share * rest / xp.where(room > 0, room, 1.0)
    valid = (room > 0) & (r < holders[None, :]) & (ordered <= level * (1.0 + 1e-12))
    first = xp.argmax(valid, axis=0)
    columns = xp.arange(k)
    tau = level[first, columns]
    smallest = xp.min(xp.where(weights > 0, weights, xp.inf), axis=0)
    tau = xp.where(valid.any(axis=0), tau, smallest)  # too few holders: equal shares
    tau = xp.where(holders > 0, tau, 0.0)
    return xp.minimum(weights, tau[None, :])


def robust_centroid_aggregate(local_centroids: Any, counts: Any, *, method: str,
                              trim_fraction: float = 0.0) -> Any:
    """Coordinate-wise trimmed mean or median of the local centroids, per cluster.

    Per cluster j and feature f the values ``c_ijf`` of the clients that hold
    the cluster (``counts[i, j] > 0``) are sorted; ``"trimmed-mean"`` drops the
    ``floor(trim_fraction * holders)`` smallest and as many largest and
    averages the rest, ``"median"`` takes the middle value (the mean of the two
    middle values for an even number of holders). Every holder counts once:
    the counts decide only who holds a cluster, so a client that inflates its
    counts gains nothing, and DWF and EWF weights give the same result. A
    cluster that no client holds gets the same statistic over all clients (the
    analogue of eq. 4's equal weights, so that one client's copy cannot move it
    either). ``trim_fraction = 0`` is the unweighted mean over the holders;
    with fewer than ``1 / trim_fraction`` holders nothing is trimmed.

    Parameters
    ----------
    local_centroids : array of shape (m, k, n_features)
        The clients' local centroids.
    counts : array of shape (m, k)
        The clients' points per cluster (only ``> 0`` matters).
    method : {"trimmed-mean", "median"}
        The statistic.
    trim_fraction : float
        Share of the holders cut from each end by ``"trimmed-mean"``, in [0, 0.5).

    Returns
    -------
    array of shape (k, n_features), float64
    """
    if method not in ROBUST_AGGREGATIONS:
        raise ValueError(f"method must be one of {ROBUST_AGGREGATIONS}, got {method!r}")
    if isinstance(trim_fraction, bool) or not 0.0 <= trim_fraction < 0.5:
        raise ValueError(f"trim_fraction must be in [0, 0.5), got {trim_fraction!r}")
    xp = namespace_of(local_centroids)
    local_centroids = xp.asarray(local_centroids, dtype=xp.float64)
    if local_centroids.ndim != 3 or local_centroids.shape[0] < 1:
        raise ValueError(
            "local_centroids must be a 3-D array of shape (n_clients, k, n_features) "
            f"with n_clients >= 1, got shape {local_centroids.shape}"
        )
    counts = _check_weights(counts, "counts")
    if counts.shape != local_centroids.shape[:2]:
        raise ValueError(f"counts must have shape (n_clients, k) = {local_centroids.shape[:2]}, "
                         f"got {counts.shape}")
    check_all_finite(local_centroids, "local_centroids")
    m = local_centroids.shape[0]
    holds = counts > 0
    held = holds.any(axis=0)
    use = xp.where(held[None, :], holds, True)
    n_use = use.sum(axis=0)
    # Non-holders sort after every real value and are never kept.
    ordered = xp.sort(xp.where(use[:, :, None], local_centroids, xp.inf), axis=0)
    if method == "median":
        cut = (n_use - 1) // 2
    else:
        cut = xp.floor(trim_fraction * n_use + 1e-9).astype(n_use.dtype)
    rank = xp.arange(m)[:, None]
    keep = (rank >= cut[None, :]) & (rank < (n_use - cut)[None, :])
    kept = (n_use - 2 * cut).astype(xp.float64)
    return xp.sum(xp.where(keep[:, :, None], ordered, 0.0), axis=0) / kept[:, None]
