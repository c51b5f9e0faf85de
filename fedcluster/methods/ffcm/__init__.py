"""Federated fuzzy c-means of Stallmann & Wilbik (paper ``001``), averaging eq. 8 or eq. 9."""

from __future__ import annotations

from ..spec import Method
from .client import FUZZY, FUZZY_SUMS, fuzzy_sums_request, round_request
from .options import FFCMOptions

SERVER = "fedcluster.methods.ffcm.strategy:FederatedFuzzyCMeans"
PAPER = "Stallmann & Wilbik, Towards Federated Clustering: FFCM (papers/001)"

#: avg1 has a sum form (DP, secure aggregation: :func:`.client.fuzzy_sums_request`); avg2 has none.
AVG1 = Method("ffcm-avg1", "Federated fuzzy c-means, support-weighted mean (eq. 8)", PAPER,
              SERVER, FFCMOptions, {FUZZY: round_request, FUZZY_SUMS: fuzzy_sums_request},
              sum_form=FUZZY_SUMS, feature_clustering=True)
AVG2 = Method("ffcm-avg2", "Federated fuzzy c-means, k-means over local centres (eq. 9)", PAPER,
              SERVER, FFCMOptions, {FUZZY: round_request}, feature_clustering=True)
