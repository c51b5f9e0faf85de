"""How good a DeepFeCA network's features are (PyTorch): linear evaluation, k-means purity and NMI.

These run where labelled data is pooled for an evaluation (a benchmark, a
test), never in a federation: the labels are not used by the training.

* :func:`linear_evaluation`: the paper's measure (its Table 3). A linear
  (multinomial logistic) classifier is trained on the frozen features of the
  training split, standardised with the training split's statistics, and its
  accuracy measured on the test split.
* :func:`kmeans_quality`: purity and NMI of k-means (k-means++ and Lloyd) on
  the L2-normalised features, the space in which DeepFeCA clusters.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ...metrics.federated import contingency_metrics
from ...numerics import assign, kmeans, to_numpy
from .options import parse_shape
from .torch_support import require_torch
from .training import NetworkSpec, as_inputs, features, initial_arrays, network_from_arrays

torch = require_torch()

#: L-BFGS iterations of the linear classifier and its L2 penalty (per weight, over the mean loss).
LINEAR_ITERATIONS = 200
LINEAR_PENALTY = 1e-4


def network_spec_of(settings: Mapping) -> NetworkSpec:
    """The network a run's settings name (its ``network`` and ``image-shape``), on the CPU."""
    return NetworkSpec(str(settings["network"]), parse_shape(str(settings["image-shape"])))


def network_features(arrays: Mapping[str, np.ndarray], spec: NetworkSpec, X, *,
                     normalise: bool = False) -> np.ndarray:
    """The features of rows ``X`` by the network with weights ``arrays`` (float64)."""
    net = network_from_arrays(spec, arrays)
    return features(net, as_inputs(X, spec), normalise=normalise)


def random_network_features(spec: NetworkSpec, seed: int, X, *, normalise: bool = False
                            ) -> np.ndarray:
    """The features of a freshly initialised network: the reference an untrained net gives."""
    return network_features(initial_arrays(spec, seed), spec, X, normalise=normalise)


def linear_evaluation(train_features, train_labels, test_features, test_labels) -> float:
    """Test accuracy of a linear classifier trained on frozen training features.

    Full-batch L-BFGS on the mean cross-entropy plus ``LINEAR_PENALTY`` times
    the squared weights, in float64, from zero weights: deterministic.
    """
    train = torch.as_tensor(np.asarray(train_features, dtype=np.float64))
    test = torch.as_tensor(np.asarray(test_features, dtype=np.float64))
    classes, y = np.unique(np.asarray(train_labels), return_inverse=True)
    y = torch.as_tensor(y)
    mean, std = train.mean(0), train.std(0).clamp_min(1e-8)
    train, test = (train - mean) / std, (test - mean) / std
    weight = torch.zeros((train.shape[1], len(classes)), dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(len(classes), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([weight, bias], max_iter=LINEAR_ITERATIONS, line_search_fn="strong_wolfe")

    def loss():
        opt.zero_grad()
        value = torch.nn.functional.cross_entropy(train @ weight + bias, y) + \
            LINEAR_PENALTY * (weight ** 2).sum()
        value.backward()
        return value

    opt.step(loss)
    with torch.no_grad():
        predicted = classes[(test @ weight + bias).argmax(1).numpy()]
    return float(np.mean(predicted == np.asarray(test_labels)))


def kmeans_quality(feats, labels, k: int, seed: int = 0) -> dict[str, float]:
    """Purity and NMI of k-means with ``k`` clusters on the L2-normalised features."""
    feats = np.asarray(feats, dtype=np.float64)
    feats = feats / np.maximum(np.linalg.norm(feats, axis=1, keepdims=True), 1e-12)
    result = kmeans(feats, k, rng=np.random.default_rng(seed))
    clusters, _ = assign(feats, result.centroids)
    clusters = np.asarray(to_numpy(clusters))
    _, codes = np.unique(np.asarray(labels), return_inverse=True)
    table = np.zeros((k, codes.max() + 1), dtype=np.int64)
    np.add.at(table, (clusters, codes), 1)
    metrics = contingency_metrics(table)
    return {"purity": metrics["purity"], "nmi": metrics["nmi"]}
