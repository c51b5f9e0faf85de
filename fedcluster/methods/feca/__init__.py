"""FeCA: one-shot grouping of local centroids by radius (Xu, Chen, Chao & Zhang, paper ``004``)."""

from __future__ import annotations

from ..spec import Method
from .client import FECA, feca_request
from .strategy import FeCA

FECA_METHOD = Method("feca", "FeCA, one-shot grouping of local centroids by radius",
                     "Xu, Chen, Chao & Zhang, Jigsaw Game: Federated Clustering (papers/004)",
                     FeCA, {FECA: feca_request})
