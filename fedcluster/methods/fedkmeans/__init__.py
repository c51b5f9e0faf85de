"""Federated mini-batch k-means of Triebe & Rajagopal (paper ``003``)."""

from __future__ import annotations

from ...privacy.kinds import SUMS
from ..spec import Method
from .client import MINIBATCH, round_request
from .options import FedKMeansOptions

FEDKMEANS = Method(
    "fedkmeans", "Federated mini-batch k-means with client and server learning rates",
    "Triebe & Rajagopal, Federated K-Means: Clustering Algorithm and Proof of Concept (papers/003)",
    "fedcluster.methods.fedkmeans.strategy:FederatedMiniBatchKMeans", FedKMeansOptions,
    {MINIBATCH: round_request}, sum_form=SUMS)
