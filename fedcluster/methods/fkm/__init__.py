"""FKM: federated k-means of Garst & Reinders (paper ``002``).

Clients seed with k-means++ and send clusters of at least ``p`` rows; the
server runs weighted k-means over all received centroids each round.
"""

from __future__ import annotations

from ..spec import Method
from .client import GARST, GARST_INIT, init_request, round_request
from .options import FKMOptions

FKM = Method("fkm", "Federated k-means with server k-means over client centroids",
             "Garst & Reinders, Federated K-Means Clustering (papers/002)",
             "fedcluster.methods.fkm.strategy:GarstFederatedKMeans", FKMOptions, {GARST_INIT: init_request, GARST: round_request})
