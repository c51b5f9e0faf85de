"""Server-side aggregation of the DWF federated k-means paper (eq. 3-6, Algorithm 3).

The weighted mean of local centroids (:func:`weighted_centroid_mean`), the
momentum update (:func:`momentum_update`), the movement that stops a run
(:func:`frobenius_movement`) and the tolerance it is compared with
(:func:`movement_tolerance`), shared by the methods that average centroids
(DWF/EWF, FFCM avg1, federated mini-batch k-means). DWF's opt-in safeguards
against careless or hostile clients are in :mod:`fedcluster.methods.dwf.kernels`.
"""

from __future__ import annotations

import math
from typing import Any


from ._validation import check_all_finite
from .backend import namespace_of

__all__ = ["frobenius_movement", "momentum_update", "movement_tolerance", "weighted_centroid_mean"]


def weighted_centroid_mean(local_centroids: Any, weights: Any) -> Any:
    """Aggregate the clients' local centroids cluster by cluster (eq. 3-5).

    Parameters
    ----------
    local_centroids : array of shape (m, k, n_features)
        Local centroids ``c_ij`` of the m participating clients.
    weights : array of shape (m, k)
        Non-negative weights ``w_ij``: the clients' cluster counts for DWF
        k-means, ones for EWF k-means (eq. 8).

    Returns
    -------
    array of shape (k, n_features), float64
        ``D_j = sum_i lambda_ij c_ij`` with ``lambda_ij = w_ij / sum_i w_ij``
        when that sum is positive and ``1 / m`` otherwise (eq. 4): a cluster
        no participant has data for gets the plain mean over all participants.
    """
    xp = namespace_of(local_centroids)
    local_centroids = xp.asarray(local_centroids, dtype=xp.float64)
    weights = xp.asarray(weights, dtype=xp.float64)
    if local_centroids.ndim != 3 or local_centroids.shape[0] < 1:
        raise ValueError(
            "local_centroids must be a 3-D array of shape (n_clients, k, n_features) "
            f"with n_clients >= 1, got shape {local_centroids.shape}"
        )
    if weights.shape != local_centroids.shape[:2]:
        raise ValueError(
            f"weights must have shape (n_clients, k) = {local_centroids.shape[:2]}, "
            f"got {weights.shape}"
        )
    check_all_finite(local_centroids, "local_centroids")
    check_all_finite(weights, "weights")
    if bool((weights < 0).any()):
        raise ValueError("weights must be non-negative")

    totals = weights.sum(axis=0)
    weighted = totals > 0
    lambdas = xp.where(
        weighted, weights / xp.where(weighted, totals, 1.0), 1.0 / weights.shape[0]
    )
    return xp.sum(lambdas[:, :, None] * local_centroids, axis=0)


def momentum_update(
    current: Any, previous: Any, aggregate: Any, *, lr: float, momentum: float
) -> Any:
    """Move the global centroids towards the aggregate with momentum (eq. 6).

    Parameters
    ----------
    current : array of shape (k, n_features)
        Global centroids ``C(t)``.
    previous : array of shape (k, n_features)
        Global centroids ``C(t-1)``; pass `current` in the first round, where
        the paper sets ``C(-1) = C(0)``.
    aggregate : array of shape (k, n_features)
        Aggregated local centroids ``D`` from :func:`weighted_centroid_mean`.
    lr : float
        Learning rate, ``0 < lr <= 1``.
    momentum : float
        Momentum, ``0 <= momentum < 1``.

    Returns
    -------
    array of shape (k, n_features), float64
        ``C(t+1) = C(t) + lr (D - C(t)) + momentum (C(t) - C(t-1))``.
    """
    if not 0 < lr <= 1:
        raise ValueError(f"lr must satisfy 0 < lr <= 1, got {lr!r}")
    if not 0 <= momentum < 1:
        raise ValueError(f"momentum must satisfy 0 <= momentum < 1, got {momentum!r}")
    xp = namespace_of(current)
    current, previous, aggregate = (
        xp.asarray(a, dtype=xp.float64) for a in (current, previous, aggregate)
    )
    if not current.shape == previous.shape == aggregate.shape:
        raise ValueError(
            "current, previous and aggregate must have the same shape, got "
            f"{current.shape}, {previous.shape} and {aggregate.shape}"
        )
    return current + lr * (aggregate - current) + momentum * (current - previous)


def frobenius_movement(a: Any, b: Any) -> float:
    """Return the Frobenius norm ``||a - b||_F`` of the movement between two centroid sets."""
    xp = namespace_of(a)
    a = xp.asarray(a, dtype=xp.float64)
    b = xp.asarray(b, dtype=xp.float64)
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    # A sum of squares, not linalg.norm: norm's BLAS dot wakes the BLAS threads,
    # which then spin on the cores that the next Lloyd pass runs on.
    diff = a - b
    return math.sqrt(float((diff * diff).sum()))


def movement_tolerance(tol: float, mean_variance: float | None = None) -> float:
    """The centroid movement below which a run has converged.

    Without ``mean_variance`` (``tol-scale = absolute``) it is ``tol`` itself,
    in the data's units. With it (``tol-scale = variance``, ``mean_variance``
    the mean over features of the pooled rows' population variance) it is
    ``sqrt(tol * mean_variance)``: a movement below it is one whose square is
    below ``tol * mean_variance``, scikit-learn's ``KMeans`` rule (its ``tol``
    times ``np.mean(np.var(X, axis=0))``, compared with the squared shift of
    the centres), so the same ``tol`` means the same on data of any scale.
    Returned as a distance so that one comparison, ``movement < tolerance``,
    serves both scales and the clients' local steps. ``tol = 0`` gives 0:
    every round runs.
    """
    if mean_variance is None:
        return float(tol)
    if not mean_variance >= 0:
        raise ValueError(f"mean_variance must be >= 0, got {mean_variance}")
    return math.sqrt(float(tol) * float(mean_variance))


