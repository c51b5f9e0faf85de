"""Distances between found and known true centres (server side, no data needed)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..numerics.distance import sq_distances
from ..numerics.matching import match_to_reference

__all__ = ["centre_distance", "knowledge_gap", "normalised_knowledge_gap"]


def _centre_pair(found: ArrayLike, true: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    found = np.asarray(found, dtype=np.float64)
    true = np.asarray(true, dtype=np.float64)
    if found.ndim != 2 or true.ndim != 2 or found.shape[1] != true.shape[1]:
        raise ValueError(
            f"centres must be 2-D with one dimension, got {found.shape} and {true.shape}")
    if len(found) == 0 or len(true) == 0:
        raise ValueError(f"centres must not be empty, got {found.shape} and {true.shape}")
    return found, true


def centre_distance(found: ArrayLike, true: ArrayLike) -> float:
    """Distance between found and true centres after optimal one-to-one matching.

    ``sqrt(sum_j ||found_j - true_pi(j)||^2)`` with ``pi`` the matching that
    minimises the sum (Hungarian algorithm), in the data's raw units: the
    measure of the FeCA paper's Table 1 (there divided by 1e4). When the two
    sets differ in size, only the matched pairs count: the smaller set is
    matched into the larger one.
    """
    found, true = _centre_pair(found, true)
    small, large = (found, true) if len(found) <= len(true) else (true, found)
    matched = large[match_to_reference(small, large)]
    return float(np.sqrt(((small - matched) ** 2).sum()))


def knowledge_gap(found: ArrayLike, true: ArrayLike) -> float:
    """The FFCM paper's knowledge gap: summed distances of found centres to their nearest true centres.

    The paper (``001``, "Evaluation Metrics") writes ``gap = sum_k ||c~_k -
    c_k||`` for two sets of centres in corresponding order; its authors' code
    (``cluster_validation/agreement_measures.py`` of ``stallmo/cluster_library``)
    pairs each centre of the first set with the nearest centre of the second,
    which is what is computed here, with the found centres as the first set
    (Euclidean distances, raw units).
    """
    found, true = _centre_pair(found, true)
    distances = np.sqrt(sq_distances(found, true, summation="pairwise"))
    return float(distances.min(axis=1).sum())


def normalised_knowledge_gap(found: ArrayLike, true: ArrayLike) -> float:
    """:func:`knowledge_gap` divided by ``sqrt(d)``: the ``ngap`` of the FFCM paper's Table 5."""
    found, true = _centre_pair(found, true)
    return knowledge_gap(found, true) / float(np.sqrt(found.shape[1]))
