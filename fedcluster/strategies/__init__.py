"""Server-side aggregation: one Flower ``Strategy`` per method (see :mod:`fedcluster.methods`)."""

from __future__ import annotations

from importlib import import_module

from ..config import RunConfig
from ..methods import METHODS
from .base import ClusteringStrategy, Exchange, RunFailed
from .rounds import RoundBasedStrategy
from .weighted_mean import WeightedFederatedKMeans


def strategy_class(algorithm: str) -> type[ClusteringStrategy]:
    """The strategy class that runs ``algorithm`` (imported on first use)."""
    module, _, name = METHODS[algorithm].strategy.partition(":")
    return getattr(import_module(module), name)


def build_strategy(config: RunConfig) -> ClusteringStrategy:
    """The strategy that runs ``config.algorithm`` with the configured settings."""
    return strategy_class(config.algorithm).from_config(config)


__all__ = [
    "ClusteringStrategy",
    "Exchange",
    "RoundBasedStrategy",
    "RunFailed",
    "WeightedFederatedKMeans",
    "build_strategy",
    "strategy_class",
]
