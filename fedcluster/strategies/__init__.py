"""The server side every method shares: restarts, sampling, checked exchanges, rounds.

Each method's own server side (:mod:`fedcluster.methods`) subclasses
:class:`RoundBasedStrategy` or :class:`~.oneshot.OneShotStrategy`; none of them
imports Flower (its face is :class:`fedcluster.server.flower.FlowerStrategy`).
"""

from __future__ import annotations

from ..federation.base import Exchange, RunFailed
from .base import ClusteringStrategy
from .oneshot import OneShotStrategy
from .rounds import RoundBasedStrategy

__all__ = ["ClusteringStrategy", "Exchange", "OneShotStrategy", "RoundBasedStrategy", "RunFailed"]
