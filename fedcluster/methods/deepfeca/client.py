"""The DeepFeCA client steps: clustering of features, and local training on pseudo-labels.

Both requests carry the server's network weights as named arrays
(:attr:`fedcluster.messages.Request.arrays`) and, where the step needs them,
the global centroids of the features as the array :data:`FEATURE_CENTROIDS`
(the request's own ``centroids`` field is for centroids of the rows, which
:func:`fedcluster.client.respond.respond` checks against the rows' dimension).

* ``query.deep_features`` (:func:`features_request`): extract the features of
  the local rows with the server's network (L2-normalised), then answer the
  clustering request ``inner-kind`` on them with that kind's own step
  (FeCA's ``query.feca``, the shared ``query.local_kmeans``, FFCM's
  ``train.fuzzy``, the score's ``evaluate`` ...). The privacy floor is
  checked on the features: no centroid of fewer than ``min-cluster-size``
  rows and none equal to one row's features.
* ``train.deepfeca`` (:func:`train_request`): pseudo-label every local row by
  its nearest global centroid, train the network with a classifier on them
  for E epochs, and send back the weights (Algorithm 6, lines 7-8).

PyTorch is imported when a request comes, not before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from ...local.floor import check_reply, check_rows
from ...local.steps import chunk_size, min_cluster_size, non_negative
from ...messages import ClientSummary, ProtocolError, finite_array, request_option, request_setting
from ...numerics import assign, to_numpy
from .options import DeepFeCAOptions, parse_shape

#: The request kinds of DeepFeCA (Flower routes "<category>.<action>").
DEEP_FEATURES = "query.deep_features"
DEEP_TRAIN = "train.deepfeca"
#: Config key of the clustering step a ``query.deep_features`` request wraps.
INNER_KIND = "inner-kind"
#: Name of the global centroids of the features among a request's named arrays.
FEATURE_CENTROIDS = "feature-centroids"
#: Config key of a training round's seed.
ROUND_SEED = "round-seed"


def network_spec(config: Mapping):
    """The network a request names, checked with the settings' own declarations."""
    from .training import NetworkSpec
    from .torch_support import torch_device

    shape = parse_shape(request_option(config, DeepFeCAOptions, "image-shape"))
    device = str(torch_device(request_option(config, DeepFeCAOptions, "device")))
    return NetworkSpec(request_option(config, DeepFeCAOptions, "network"), shape, device)


def split_arrays(arrays: Mapping[str, np.ndarray]) -> tuple[dict, np.ndarray | None]:
    """(the network's weights, the global feature centroids or None) of a request's arrays."""
    weights = {name: value for name, value in arrays.items() if name != FEATURE_CENTROIDS}
    centroids = arrays.get(FEATURE_CENTROIDS)
    if centroids is not None:
        centroids = finite_array(np.asarray(centroids), "request feature centroids", ndim=2)
    return weights, centroids


def local_features(X, config: Mapping, weights: Mapping[str, np.ndarray]):
    """The network of the request, and the L2-normalised features of the rows ``X``."""
    from .training import as_inputs, features, network_from_arrays

    spec = network_spec(config)
    net = network_from_arrays(spec, weights)
    return net, features(net, as_inputs(X, spec), normalise=True)


def features_request(X, centroids, config: dict, arrays: Mapping[str, np.ndarray],
                     steps: Mapping[str, Callable]) -> ClientSummary:
    """The clustering step ``inner-kind``, answered on the features of the local rows.

    ``steps`` are the client's steps of a clustering of rows, by request kind
    (:data:`fedcluster.client.respond.ROW_STEPS`, handed in by the dispatcher).
    """
    inner = request_setting(config, INNER_KIND, str, lambda kind: True)
    if inner not in steps:
        raise ProtocolError(f"'{INNER_KIND}' {inner!r} is not a client's clustering of rows")
    p = min_cluster_size(config)
    check_rows(int(X.shape[0]), p)
    weights, given = split_arrays(arrays)
    _, feats = local_features(X, config, weights)
    if given is not None and given.shape[1] != feats.shape[1]:
        raise ProtocolError(f"the feature centroids have dimension {given.shape[1]}, the "
                            f"network's features {feats.shape[1]}")
    summary = steps[inner](feats, given, config)
    check_reply(feats, summary, p, given)
    return summary


def pseudo_labels(feats, centroids: np.ndarray, config: Mapping) -> np.ndarray:
    """Algorithm 6, line 7: the index of each row's nearest global centroid (ties: lowest)."""
    labels, _ = assign(feats, centroids, chunk_size=chunk_size(config))
    return np.asarray(to_numpy(labels), dtype=np.int64)


def train_request(X, centroids, config: dict, arrays: Mapping[str, np.ndarray],
                  steps: Mapping[str, Callable]) -> ClientSummary:
    """Pseudo-labels from the global centroids, E epochs of training, the new weights.

    ``steps`` (the dispatcher's steps of a clustering of rows) are not needed here.
    """
    from .training import LocalTraining, as_inputs, network_arrays, train_locally

    p = min_cluster_size(config)
    n = int(X.shape[0])
    # A model trained on fewer than p rows is a statistic of fewer than p rows.
    check_rows(n, p)
    weights, given = split_arrays(arrays)
    if given is None:
        raise ProtocolError(f"a {DEEP_TRAIN} request needs the array '{FEATURE_CENTROIDS}'")
    net, feats = local_features(X, config, weights)
    if given.shape[1] != feats.shape[1]:
        raise ProtocolError(f"the feature centroids have dimension {given.shape[1]}, the "
                            f"network's features {feats.shape[1]}")
    settings = LocalTraining(
        epochs=request_option(config, DeepFeCAOptions, "local-steps"),
        batch_size=request_option(config, DeepFeCAOptions, "train-batch-size"),
        optimizer=request_option(config, DeepFeCAOptions, "optimizer"),
        lr=request_option(config, DeepFeCAOptions, "train-lr"),
        weight_decay=request_option(config, DeepFeCAOptions, "weight-decay"),
        augment=request_option(config, DeepFeCAOptions, "augment"),
        head=request_option(config, DeepFeCAOptions, "head"),
        seed=request_setting(config, ROUND_SEED, int, non_negative),
    )
    spec = network_spec(config)
    train_locally(net, as_inputs(X, spec), pseudo_labels(feats, given, config), given, settings)
    return ClientSummary(n=n, arrays=network_arrays(net))
