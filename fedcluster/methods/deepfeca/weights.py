"""FedAvg of network weights (Algorithm 6, line 10), in NumPy: no PyTorch, no Flower."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import numpy as np

Weights = Mapping[str, np.ndarray]


def fedavg(models: Sequence[Weights], sizes: Sequence[int]) -> dict[str, np.ndarray]:
    """The data-size-weighted mean of the clients' weights, name by name.

    ``theta = sum_m |D_m| / |D| * theta_m``, accumulated in float64 in the
    given order and returned in each array's own dtype (floating arrays are
    rounded once, at the end; integer arrays to the nearest integer).

    Raises
    ------
    ValueError
        No model, sizes that are not positive or not one per model, or
        models whose names or shapes differ.
    """
    if not models:
        raise ValueError("FedAvg needs at least one model")
    sizes = np.asarray(sizes, dtype=np.float64)
    if sizes.shape != (len(models),) or np.any(sizes <= 0):
        raise ValueError(f"one positive size per model expected, got {sizes.tolist()}")
    shares = sizes / sizes.sum()
    reference = models[0]
    averaged = {}
    for name, first in reference.items():
        total = np.zeros(first.shape, dtype=np.float64)
        for share, model in zip(shares, models):
            if model[name].shape != first.shape:
                raise ValueError(f"array '{name}' has shapes {first.shape} and {model[name].shape}")
            total += share * np.asarray(model[name], dtype=np.float64)
        if not np.issubdtype(first.dtype, np.floating):
            total = np.rint(total)
        averaged[name] = total.astype(first.dtype)
    for model in models[1:]:
        if set(model) != set(reference):
            raise ValueError("the models do not have the same arrays")
    return averaged


def digest(weights: Weights) -> bytes:
    """A fingerprint of the weights' values, to order replies by content, not by sender."""
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(weights):
        h.update(name.encode())
        h.update(np.ascontiguousarray(weights[name]).tobytes())
    return h.digest()


def relative_change(new: Weights, old: Weights) -> float:
    """``||new - old|| / ||old||`` over all arrays (the round's movement in the history)."""
    diff = sum(float(np.sum((np.asarray(new[k], np.float64) - old[k]) ** 2)) for k in old)
    norm = sum(float(np.sum(np.asarray(old[k], np.float64) ** 2)) for k in old)
    return float(np.sqrt(diff / norm)) if norm > 0 else float(np.sqrt(diff))
