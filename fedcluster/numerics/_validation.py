"""Parameter checks shared by the numerical kernels."""

from __future__ import annotations

import math
import numbers
from types import ModuleType
from typing import Any

import numpy as np

from .backend import namespace_of


def check_positive_int(value: Any, name: str) -> int:
    """Return `value` as an ``int`` after checking that it is an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer (>= 1), got {value!r}")
    return int(value)


def check_non_negative_float(value: Any, name: str) -> float:
    """Return `value` as a ``float`` after checking that it is finite and >= 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def check_all_finite(array: Any, name: str) -> None:
    """Raise if `array` holds NaN or infinity."""
    if not bool(namespace_of(array).isfinite(array).all()):
        raise ValueError(f"{name} must not contain NaN or infinity")


def check_data(X: Any) -> Any:
    """Return the samples `X` as a finite float32 or float64 array of shape (n, d).

    float32 is kept for speed; any other real dtype becomes float64.
    """
    X = as_samples(X)
    check_all_finite(X, "X")
    return X


def as_samples(X: Any) -> Any:
    """:func:`check_data` without the finiteness check (a pass over `X` that callers
    which detect NaN from their own results skip)."""
    xp = namespace_of(X)
    X = xp.asarray(X)
    if X.ndim != 2:
        raise ValueError(
            f"X must be a 2-D array of shape (n_samples, n_features), got shape {X.shape}"
        )
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must have at least one sample and one feature, got shape {X.shape}")
    if X.dtype.kind not in "biuf":
        raise ValueError(f"X must hold real numbers, got dtype {X.dtype}")
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(xp.float64)
    return X


def check_centroids(centroids: Any, n_features: int, xp: ModuleType, name: str) -> Any:
    """Return `centroids` as a finite float64 array of shape (k, n_features), k >= 1."""
    centroids = xp.asarray(centroids, dtype=xp.float64)
    if centroids.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D array of shape (k, n_features), got shape {centroids.shape}"
        )
    if centroids.shape[0] < 1:
        raise ValueError(
            f"{name} must hold at least one centroid (k >= 1), got shape {centroids.shape}"
        )
    if centroids.shape[1] != n_features:
        raise ValueError(
            f"{name} has {centroids.shape[1]} features but X has {n_features}; they must match"
        )
    check_all_finite(centroids, name)
    return centroids


def check_sample_weight(sample_weight: Any, n_samples: int, xp: ModuleType) -> Any:
    """Return finite non-negative float64 weights of shape (n_samples,); ``None`` means ones."""
    if sample_weight is None:
        return xp.ones(n_samples, dtype=xp.float64)
    sample_weight = xp.asarray(sample_weight, dtype=xp.float64)
    if sample_weight.shape != (n_samples,):
        raise ValueError(
            f"sample_weight must have shape (n_samples,) = ({n_samples},), "
            f"got {sample_weight.shape}"
        )
    check_all_finite(sample_weight, "sample_weight")
    if bool((sample_weight < 0).any()):
        raise ValueError("sample_weight must be non-negative")
    return sample_weight
