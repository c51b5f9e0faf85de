"""Federated standardisation: each feature centred and scaled by moments that reveal no row.

:func:`federated_standardization` sends one moments request to every
connected client (:func:`fedcluster.strategies.moments.pooled_moments`);
each answers with its row count and the per-feature mean and population
standard deviation of its rows, which the server combines into the mean and
standard deviation of the pooled rows. :class:`StandardizedFederation` then
adds that transform (shift = mean, scale = standard deviation) to every
request it forwards, and every client answers about ``(X - shift) / scale``
(:func:`fedcluster.local.summaries.transformed`), so the method, which is
not changed at all, clusters standardised data. :func:`fit_method` is the one
path every front end takes (the estimator, the ServerApp, k selection).

This module does not import Flower.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from logging import INFO, WARNING
from typing import TYPE_CHECKING

import numpy as np

from .config import RunConfig, build_strategy
from .federation.base import Answer, Federation
from .logs import counted, log
from .messages import Request
from .numerics.moments import Moments, standardize
from .results import RunResult
from .strategies.moments import pooled_moments

if TYPE_CHECKING:
    from .strategies import ClusteringStrategy

WHAT = "standardisation (moments)"


@dataclass(frozen=True)
class Standardization:
    """The transform ``z = (x - shift) / scale`` and where it came from.

    Attributes
    ----------
    shift : ndarray of shape (d,)
        The pooled per-feature mean.
    scale : ndarray of shape (d,)
        The pooled per-feature population standard deviation, 1 for a
        constant feature (which is then only centred).
    n : int
        Rows behind the moments (the clients that answered).
    constant : tuple of int
        Features of standard deviation 0.
    """

    shift: np.ndarray
    scale: np.ndarray
    n: int
    constant: tuple[int, ...] = ()

    @classmethod
    def from_moments(cls, moments: Moments) -> Standardization:
        """Shift by the mean, scale by the standard deviation (1 where it is 0)."""
        constant = tuple(int(j) for j in np.flatnonzero(moments.std == 0))
        scale = np.where(moments.std > 0, moments.std, 1.0)
        return cls(np.asarray(moments.mean, dtype=np.float64), scale, moments.n, constant)


class StandardizedFederation:
    """A federation whose requests all carry a standardisation (see :class:`~fedcluster.federation.Federation`)."""

    def __init__(self, federation: Federation, standardization: Standardization) -> None:
        self.federation = federation
        self.standardization = standardization

    def node_ids(self) -> list[int]:
        return self.federation.node_ids()

    def ask(self, request: Request, node_ids: Sequence[int], timeout: float) -> list[Answer]:
        s = self.standardization
        return self.federation.ask(dataclasses.replace(request, shift=s.shift, scale=s.scale),
                                   node_ids, timeout)


def federated_standardization(strategy: ClusteringStrategy, federation: Federation
                              ) -> Standardization:
    """The transform of the pooled rows' moments (:func:`~fedcluster.strategies.moments.pooled_moments`:
    every connected client asked once, replies checked, held to the quorum and
    combined in content order, so the transform does not depend on node ids
    or arrival order).

    Raises
    ------
    RunFailed
        Fewer clients than the quorum answered usably.
    """
    moments, clients = pooled_moments(strategy, federation, WHAT)
    result = Standardization.from_moments(moments)
    if result.constant:
        log(WARNING, "%s: feature(s) %s are constant over the %d rows; scaled by 1 (only "
            "centred)", WHAT, list(result.constant), result.n)
    log(INFO, "%s: %s of %s from %s", WHAT, counted(len(result.shift), "feature"), counted(result.n, "row"),
        counted(clients, "client"))
    return result


def in_clustered_units(X, result: RunResult):
    """``X`` in the units ``result``'s centroids are in: standardised by its transform, if any."""
    return X if result.shift is None else standardize(X, result.shift, result.scale)


def fit_method(config: RunConfig, federation: Federation,
               standardization: Standardization | None = None, *,
               strategy: ClusteringStrategy | None = None, **fit_options) -> RunResult:
    """Run ``config``'s method over ``federation``, standardised first if ``config.standardize``.

    ``standardization`` reuses a transform computed before (k selection asks
    for the moments once for all its runs); ``strategy`` is the method's
    server side if it is built already, and ``fit_options`` go to its
    :meth:`~fedcluster.strategies.ClusteringStrategy.fit` (a checkpoint to
    resume from and a checkpoint writer). The result records the transform:
    its ``centroids`` are in standardised units, ``original_centroids`` in
    the data's. A resumed run asks for the moments again: the same rows give
    the same transform.
    """
    strategy = strategy or build_strategy(config)
    if standardization is None and config.standardize:
        standardization = federated_standardization(strategy, federation)
    if standardization is None:
        return strategy.fit(federation, **fit_options)
    result = strategy.fit(StandardizedFederation(federation, standardization), **fit_options)
    return dataclasses.replace(result, shift=standardization.shift, scale=standardization.scale)
