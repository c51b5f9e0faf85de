"""The federated clustering methods fedcluster implements, by ``--algorithm`` name.

One table serves the configuration (which names are valid, which settings a
method records), the command line (one help section per method, with its
paper) and the strategy registry (which class runs it). It imports neither
Flower nor the strategies, so it is cheap to read.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Method:
    """One method.

    Attributes
    ----------
    name : str
        The ``--algorithm`` name.
    title : str
        What it is, in a few words.
    paper : str
        Where it comes from.
    strategy : str
        ``"module:Class"`` of its Flower strategy (imported when used).
    options : tuple of str
        Run-config keys of its own, besides those every method takes.
    """

    name: str
    title: str
    paper: str
    strategy: str
    options: tuple[str, ...]


#: Settings every method takes (sampling, restarts, stopping, clients' compute).
COMMON_OPTIONS = (
    "algorithm", "k", "num-server-rounds", "tol", "n-init", "score", "seed", "participation",
    "clients-per-round", "min-nodes", "node-wait-timeout", "round-timeout", "min-answer-fraction",
    "min-cluster-size",
    "chunk-size", "device",
)

_DWF_PAPER = "Holzer, Jacob & Kavane, Dynamically Weighted Federated k-Means (papers/000)"
_DWF_OPTIONS = ("lr", "momentum", "local-steps", "init", "k-prime", "max-client-share",
                "aggregation", "trim-fraction")

METHODS: dict[str, Method] = {m.name: m for m in (
    Method("dwf", "Dynamically Weighted Federated k-means", _DWF_PAPER,
           "fedcluster.strategies.weighted_mean:WeightedFederatedKMeans", _DWF_OPTIONS),
    Method("ewf", "Equally Weighted Federated k-means", _DWF_PAPER,
           "fedcluster.strategies.weighted_mean:WeightedFederatedKMeans", _DWF_OPTIONS),
    Method("fkm", "Federated k-means with server k-means over client centroids",
           "Garst & Reinders, Federated K-Means Clustering (papers/002)",
           "fedcluster.strategies.garst:GarstFederatedKMeans", ()),
    Method("kfed", "k-FED, one-shot farthest-point clustering of local centres",
           "Dennis, Li & Smith, Heterogeneity for the Win, ICML 2021",
           "fedcluster.strategies.kfed:KFed", ("k-prime",)),
    Method("ffcm-avg1", "Federated fuzzy c-means, support-weighted mean (eq. 8)",
           "Stallmann & Wilbik, Towards Federated Clustering: FFCM (papers/001)",
           "fedcluster.strategies.fuzzy:FederatedFuzzyCMeans", ("fuzzifier", "init")),
    Method("ffcm-avg2", "Federated fuzzy c-means, k-means over local centres (eq. 9)",
           "Stallmann & Wilbik, Towards Federated Clustering: FFCM (papers/001)",
           "fedcluster.strategies.fuzzy:FederatedFuzzyCMeans", ("fuzzifier", "init")),
    Method("feca", "FeCA, one-shot grouping of local centroids by radius",
           "Xu, Chen, Chao & Zhang, Jigsaw Game: Federated Clustering (papers/004)",
           "fedcluster.strategies.feca:FeCA", ("k-prime", "radius")),
    Method("mavg", "Match averaging of local centroids (Hungarian matching)",
           "the M-Avg baseline of Xu et al., Jigsaw Game (papers/004)",
           "fedcluster.strategies.match_average:MatchAveraging", ("k-prime",)),
    Method("fedkmeans", "Federated mini-batch k-means with client and server learning rates",
           "Triebe & Rajagopal, Federated K-Means: Clustering Algorithm and Proof of Concept (papers/003)",
           "fedcluster.strategies.minibatch:FederatedMiniBatchKMeans",
           ("lr", "momentum", "client-lr", "local-steps", "batch-size", "reseed-fraction",
            "reseed-patience", "init")),
)}

ALGORITHMS = tuple(METHODS)
