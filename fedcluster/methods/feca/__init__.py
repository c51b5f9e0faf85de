"""FeCA: one-shot grouping of local centroids by radius (Xu, Chen, Chao & Zhang, paper ``004``)."""

from __future__ import annotations

from ..spec import Method
from .client import FECA, feca_request
from .options import FeCAOptions

FECA_METHOD = Method("feca", "FeCA, one-shot grouping of local centroids by radius",
                     "Xu, Chen, Chao & Zhang, Jigsaw Game: Federated Clustering (papers/004)",
                     "fedcluster.methods.feca.strategy:FeCA", FeCAOptions, {FECA: feca_request},
                     feature_clustering=True)
