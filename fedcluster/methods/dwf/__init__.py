"""DWF and EWF federated k-means: Holzer, Jacob & Kavane (paper ``000``).

Clients run Lloyd steps from the global centroids (:mod:`.client`); the server
averages the local centroids, weighted by the clients' cluster sizes (DWF) or
equally (EWF), with momentum (:mod:`.strategy`, :mod:`.kernels`).
"""

from __future__ import annotations

from ...privacy.kinds import SUMS
from ..spec import Method
from .client import LLOYD, lloyd_request
from .options import DWFOptions

SERVER = "fedcluster.methods.dwf.strategy:WeightedFederatedKMeans"
PAPER = "Holzer, Jacob & Kavane, Dynamically Weighted Federated k-Means (papers/000)"

DWF = Method("dwf", "Dynamically Weighted Federated k-means", PAPER, SERVER, DWFOptions,
             {LLOYD: lloyd_request}, sum_form=SUMS)
EWF = Method("ewf", "Equally Weighted Federated k-means", PAPER, SERVER, DWFOptions,
             {LLOYD: lloyd_request}, sum_form=SUMS)
