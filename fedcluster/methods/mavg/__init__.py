"""M-Avg: match averaging of local centroids, the baseline of Xu et al. (paper ``004``)."""

from __future__ import annotations

from ..spec import Method
from .strategy import MatchAveraging

MAVG = Method("mavg", "Match averaging of local centroids (Hungarian matching)",
              "the M-Avg baseline of Xu et al., Jigsaw Game (papers/004)", MatchAveraging)
