"""Federations that attach a network to every request (no Flower, no PyTorch).

DeepFeCA reuses the clustering methods as they are: their strategies talk to
a :class:`~fedcluster.federation.Federation`, and :class:`FeatureFederation`
is one whose clients' rows are the features of the current network. It
forwards each request of a method (``query.feca``, ``query.local_kmeans``,
``train.fuzzy``, ``evaluate`` ...) as a ``query.deep_features`` request that
carries the network's weights and names the wrapped kind; the client
extracts its features and answers the wrapped request on them
(:func:`~.client.features_request`). Global centroids, which are centroids
of features, travel among the named arrays. :class:`WithArrays` attaches
fixed named arrays to requests of their own kind (the training round).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ...federation.base import Answer, Federation
from ...messages import Request
from .client import DEEP_FEATURES, FEATURE_CENTROIDS, INNER_KIND


class WithArrays:
    """``federation``, with ``arrays`` attached to every request."""

    def __init__(self, federation: Federation, arrays: Mapping[str, np.ndarray]) -> None:
        self.federation = federation
        self.arrays = dict(arrays)

    def node_ids(self) -> list[int]:
        return self.federation.node_ids()

    def ask(self, request: Request, node_ids: Sequence[int], timeout: float) -> list[Answer]:
        arrays = dict(self.arrays)
        if request.centroids is not None:
            arrays[FEATURE_CENTROIDS] = np.ascontiguousarray(request.centroids, dtype=np.float64)
        return self.federation.ask(Request(request.kind, request.config, arrays=arrays),
                                   node_ids, timeout)


class FeatureFederation(WithArrays):
    """The clients of ``federation`` seen through a network: their rows are its features.

    Parameters
    ----------
    federation : Federation
        The real clients.
    weights : mapping
        The network's weights, sent with every request.
    network_config : mapping
        The request settings that name the network (``network``,
        ``image-shape``, ``device``), added to every request.
    """

    def __init__(self, federation: Federation, weights: Mapping[str, np.ndarray],
                 network_config: Mapping[str, int | float | str | bool]) -> None:
        super().__init__(federation, weights)
        self.network_config = dict(network_config)

    def ask(self, request: Request, node_ids: Sequence[int], timeout: float) -> list[Answer]:
        config = {**request.config, **self.network_config, INNER_KIND: request.kind}
        return super().ask(Request(DEEP_FEATURES, config, request.centroids), node_ids, timeout)
