"""M-Avg: match averaging of local centroids, the baseline of Xu et al. (paper ``004``)."""

from __future__ import annotations

from ..spec import Method
from .options import MAvgOptions

MAVG = Method("mavg", "Match averaging of local centroids (Hungarian matching)",
              "the M-Avg baseline of Xu et al., Jigsaw Game (papers/004)",
              "fedcluster.methods.mavg.strategy:MatchAveraging", MAvgOptions,
              feature_clustering=True)
