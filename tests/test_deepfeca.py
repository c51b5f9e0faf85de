"""DeepFeCA (Algorithm 6 of paper 004): FedAvg, pseudo-labels, weights on the wire, runs, learning.

The tests that run a network need PyTorch (``pip install "fedcluster[deep]"``)
and skip, saying so, where it is absent; FedAvg, the weight checks and the
codec do not.
"""

from __future__ import annotations

import logging
import pickle

import numpy as np
import pytest

from fedcluster.data import DataError, load_cifar10, load_dataset, partition_indices
from fedcluster.federation.base import RunFailed
from fedcluster.client.memory import InMemoryFederation
from fedcluster.messages import ClientSummary, ProtocolError, Request, validate_named_arrays
from fedcluster.methods.deepfeca.strategy import DeepFeCA
from fedcluster.methods.deepfeca.client import DEEP_TRAIN
from fedcluster.methods.deepfeca.weights import fedavg

NO_TORCH = "DeepFeCA needs PyTorch: pip install 'fedcluster[deep]'"


def needs_torch():
    return pytest.importorskip("torch", reason=NO_TORCH)


@pytest.fixture(scope="module")
def digits():
    data = load_dataset("digits")
    order = np.random.default_rng(0).permutation(len(data.X))
    return data, order[:1200], order[1200:]


def digit_parts(data, rows, clients=3):
    return [data.X[rows][i] for i in partition_indices(len(rows), clients, "iid", seed=0)]


# -- FedAvg and the checks of weights (no torch) -----------------------------------
def test_fedavg_is_the_data_size_weighted_mean():
    a = {"w": np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), "b": np.array([0.5], np.float32)}
    b = {"w": np.array([[5.0, 6.0], [7.0, 8.0]], np.float32), "b": np.array([1.5], np.float32)}
    c = {"w": np.zeros((2, 2), np.float32), "b": np.array([-1.0], np.float32)}
    out = fedavg([a, b, c], [10, 30, 60])
    # By hand: (10 * a + 30 * b + 60 * c) / 100.
    assert np.array_equal(out["w"], np.array([[1.6, 2.0], [2.4, 2.8]], np.float32))
    assert np.allclose(out["b"], [0.05 + 0.45 - 0.6]) and out["b"].dtype == np.float32
    with pytest.raises(ValueError, match="positive size"):
        fedavg([a, b], [1, 0])


def test_weight_replies_must_match_the_sent_model():
    sent = {"w": np.zeros((2, 3), np.float32), "b": np.zeros(3, np.float32)}
    assert validate_named_arrays(dict(sent), sent, 10.0).keys() == sent.keys()
    bad = [
        ({"w": sent["w"]}, "lack \\['b'\\]"),
        ({**sent, "x": sent["b"]}, "hold \\['x'\\]"),
        ({**sent, "w": np.zeros((3, 2), np.float32)}, "'w' is float32 \\(3, 2\\)"),
        ({**sent, "w": np.zeros((2, 3), np.float64)}, "'w' is float64"),
        ({**sent, "b": np.array([0, np.nan, 0], np.float32)}, "non-finite"),
        ({**sent, "b": np.array([0, 11, 0], np.float32)}, "beyond \\+-10"),
        (None, "lacks its named arrays"),
    ]
    for arrays, message in bad:
        with pytest.raises(ProtocolError, match=message):
            validate_named_arrays(arrays, sent, 10.0)


def test_a_round_over_flower_messages_equals_the_round_in_memory(digits, tmp_path):
    """The weights and feature centroids travel as ArrayRecords through the real ClientApp."""
    needs_torch()
    from helpers import save_parts
    from harness.inprocess import InProcessGrid

    from fedcluster.client.app import build_client_app
    from fedcluster.server.flower import FlowerFederation

    data, train, _ = digits
    parts = digit_parts(data, train[:600])
    settings = dict(k=6, num_server_rounds=1, image_shape="1,8,8", seed=2)
    in_memory = DeepFeCA(**settings).fit(InMemoryFederation(parts))
    grid = InProcessGrid(build_client_app(), save_parts(tmp_path / "parts", parts))
    over_flower = DeepFeCA(**settings).fit(FlowerFederation(grid))
    assert np.array_equal(in_memory.centroids, over_flower.centroids)
    assert all(np.array_equal(in_memory.arrays[n], over_flower.arrays[n]) for n in in_memory.arrays)
    assert all(a.dtype == np.float32 for a in over_flower.arrays.values())


def test_a_request_of_another_kind_with_named_arrays_is_refused():
    from fedcluster.client.respond import respond

    X = np.random.default_rng(0).normal(size=(20, 2))
    request = Request("evaluate", {"chunk-size": 64}, np.zeros((2, 2)), arrays={"w": np.zeros(2)})
    with pytest.raises(ProtocolError, match="carries no named arrays"):
        respond(X, request, {})


# -- the client's computations ------------------------------------------------------
def test_pseudo_labels_are_the_nearest_centroids():
    from fedcluster.methods.deepfeca.client import pseudo_labels

    rng = np.random.default_rng(3)
    feats, centroids = rng.normal(size=(500, 16)), rng.normal(size=(7, 16))
    brute = np.argmin(((feats[:, None, :] - centroids[None]) ** 2).sum(-1), axis=1)
    assert np.array_equal(pseudo_labels(feats, centroids, {"chunk-size": 64}), brute)


def test_balanced_order_samples_the_present_pseudo_classes_uniformly():
    needs_torch()
    from fedcluster.methods.deepfeca.training import balanced_order

    labels = np.array([0] * 90 + [3] * 9 + [5] * 1)  # classes 1, 2 and 4 are empty
    order = balanced_order(labels, np.random.default_rng(0))
    drawn = np.bincount(labels[order], minlength=6)
    assert len(order) == 100 and drawn[[1, 2, 4]].sum() == 0
    assert all(30 <= drawn[c] <= 34 for c in (0, 3, 5)), drawn


# -- runs ---------------------------------------------------------------------------
def test_one_round_on_digits_over_three_clients_in_memory(digits, tmp_path):
    needs_torch()
    from fedcluster.server.artifacts import write_run

    data, train, _ = digits
    strategy = DeepFeCA(k=10, num_server_rounds=1, image_shape="1,8,8", seed=0)
    result = strategy.fit(InMemoryFederation(digit_parts(data, train)))
    assert result.algorithm == "deepfeca" and result.centroids.shape[1] == 64
    assert result.n_points == len(train) and np.isfinite(result.score)
    assert [(r.round, r.phase) for r in result.history] == [(1, "init"), (1, "train"), (2, "init")]
    assert all(a.dtype == np.float32 for a in result.arrays.values()) and len(result.arrays) > 5
    paths = write_run(result, tmp_path)
    with np.load(paths["network"]) as saved:
        assert set(saved.files) == set(result.arrays)


def test_a_run_is_deterministic_on_a_cpu_for_a_seed(digits):
    needs_torch()
    data, train, _ = digits
    parts = digit_parts(data, train[:600])
    runs = [DeepFeCA(k=8, num_server_rounds=1, image_shape="1,8,8", seed=4,
                     feature_clustering="kfed").fit(InMemoryFederation(parts)) for _ in range(2)]
    assert all(np.array_equal(runs[0].arrays[n], runs[1].arrays[n]) for n in runs[0].arrays)
    assert np.array_equal(runs[0].centroids, runs[1].centroids)


@pytest.mark.parametrize("clustering", ["mavg", "ffcm-avg1", "ffcm-avg2"])
def test_the_baselines_cluster_the_features_in_step_a(digits, clustering):
    needs_torch()
    data, train, _ = digits
    result = DeepFeCA(k=6, num_server_rounds=1, image_shape="1,8,8", feature_clustering=clustering,
                      local_steps=1).fit(InMemoryFederation(digit_parts(data, train[:600])))
    assert result.centroids.shape[1] == 64 and result.arrays


def test_a_client_sending_bad_weights_is_rejected_by_name(digits, caplog):
    needs_torch()
    from fedcluster.client.respond import respond

    def hostile(X, request, node_config):
        summary = respond(X, request, node_config)
        if request.kind == DEEP_TRAIN:
            first = next(iter(summary.arrays))
            poisoned = {**summary.arrays, first: summary.arrays[first] * np.float32(1e9)}
            return ClientSummary(n=summary.n, arrays=poisoned)
        return summary

    data, train, _ = digits
    federation = InMemoryFederation(digit_parts(data, train[:600]), responders={1: hostile})
    with caplog.at_level(logging.WARNING):
        DeepFeCA(k=6, num_server_rounds=1, image_shape="1,8,8").fit(federation)
    assert "rejected node 1: malformed reply: array" in caplog.text
    assert "beyond +-1e+06" in caplog.text
    with pytest.raises(RunFailed, match="node 1: malformed reply: array .* beyond"):
        DeepFeCA(k=6, num_server_rounds=1, image_shape="1,8,8",
                 min_answer_fraction=1.0).fit(federation)


def test_a_shape_that_does_not_fit_the_rows_fails_clearly(digits):
    needs_torch()
    data, train, _ = digits
    with pytest.raises(RunFailed, match="64 values, image-shape 1,28,28 needs 784"):
        DeepFeCA(k=6, num_server_rounds=1).fit(InMemoryFederation(digit_parts(data, train[:300])))


def test_training_improves_linear_evaluation_over_the_random_network(digits):
    """k = 50 pseudo-classes (over-clustering, as DeepCluster), 5 rounds of 5 epochs, seed 0.

    Measured (CPU, torch 2.15): linear-eval accuracy 0.940 for the random
    network, 0.972 after training; NMI of k-means (k = 10) 0.62 -> 0.77.
    Seeds 1 and 2 gave +1.2 and +4.6 points and +0.14 and +0.19 NMI.
    """
    needs_torch()
    from fedcluster.methods.deepfeca.evaluation import (kmeans_quality, linear_evaluation,
                                                        network_features, network_spec_of)

    data, train, test = digits
    strategy = DeepFeCA(k=50, num_server_rounds=5, local_steps=5, train_batch_size=64,
                        image_shape="1,8,8", seed=0)
    spec = network_spec_of(strategy.settings)
    random_net = strategy.initial_weights(int(np.random.default_rng([0, 0]).integers(2**31)))
    trained = strategy.fit(InMemoryFederation(digit_parts(data, train))).arrays

    def measure(weights):
        feats = network_features(weights, spec, data.X)
        return (linear_evaluation(feats[train], data.labels[train], feats[test], data.labels[test]),
                kmeans_quality(feats, data.labels, 10)["nmi"])

    (acc0, nmi0), (acc1, nmi1) = measure(random_net), measure(trained)
    assert acc1 >= acc0 + 0.02, (acc0, acc1)
    assert nmi1 >= nmi0 + 0.08, (nmi0, nmi1)


# -- CIFAR-10 python batches --------------------------------------------------------
def write_batch(path, n, seed):
    rng = np.random.default_rng(seed)
    batch = {b"batch_label": b"testing batch", b"labels": rng.integers(0, 10, n).tolist(),
             b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
             b"filenames": [b"img%d.png" % i for i in range(n)]}
    with open(path, "wb") as fh:
        pickle.dump(batch, fh, protocol=2)
    return batch


def test_cifar10_batches_load_as_rows_in_chw_order(tmp_path):
    batches = [write_batch(tmp_path / f"data_batch_{i}", 4, i) for i in range(1, 6)]
    test = write_batch(tmp_path / "test_batch", 3, 9)
    train = load_cifar10(tmp_path)
    assert train.X.shape == (20, 3072) and train.X.dtype == np.float64
    assert np.array_equal(train.X[4:8], batches[1][b"data"])
    assert train.labels.tolist() == sum((b[b"labels"] for b in batches), [])
    image = train.X[0].reshape(3, 32, 32)  # red plane first, rows of 32
    assert image[1, 0, 0] == batches[0][b"data"][0, 1024]
    assert load_cifar10(tmp_path, "test").labels.tolist() == test[b"labels"]


def test_a_cifar_batch_that_asks_for_code_is_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("ran",))

    with open(tmp_path / "test_batch", "wb") as fh:
        pickle.dump({b"data": Evil(), b"labels": []}, fh, protocol=2)
    with pytest.raises(DataError, match="refused to load .*print"):
        load_cifar10(tmp_path, "test")
    with pytest.raises(DataError, match="no such CIFAR-10 batch file"):
        load_cifar10(tmp_path / "nowhere", "test")


def test_the_networks_have_the_papers_shapes():
    torch = needs_torch()
    from fedcluster.methods.deepfeca.networks import build_network
    from fedcluster.methods.deepfeca.training import initial_arrays, NetworkSpec

    resnet = build_network("resnet18", (3, 32, 32), 0)
    assert resnet.feature_dim == 512
    assert 11.0e6 < sum(p.numel() for p in resnet.parameters()) < 11.3e6  # ResNet-18, CIFAR stem
    assert resnet.eval()(torch.zeros(2, 3, 32, 32)).shape == (2, 512)
    small = initial_arrays(NetworkSpec("small-cnn", (1, 28, 28)), 0)
    assert all(np.array_equal(small[n], initial_arrays(NetworkSpec("small-cnn", (1, 28, 28)), 0)[n])
               for n in small)
    with pytest.raises(ValueError, match="image-shape must be C,H,W"):
        build_network("small-cnn", (64,), 0)


def test_the_mlp_learns_from_rows_that_are_not_images():
    needs_torch()
    X = load_dataset("s1").X / 1e5
    parts = [X[i] for i in partition_indices(len(X), 3, "iid", seed=0)]
    result = DeepFeCA(k=15, num_server_rounds=1, network="mlp", image_shape="2",
                      feature_clustering="kfed").fit(InMemoryFederation(parts))
    assert result.centroids.shape == (15, 128) and result.n_points == len(X)


def test_the_estimator_fits_deepfeca_and_predicts_through_the_network(digits):
    needs_torch()
    from fedcluster import FederatedKMeans

    data, train, _ = digits
    model = FederatedKMeans(n_clusters=6, algorithm="deepfeca", max_iter=1, image_shape="1,8,8")
    model.fit(digit_parts(data, train[:600]))
    assert model.n_features_in_ == 64 and model.cluster_centers_.shape == (6, 64)
    feats = model.embed(data.X[:5])
    assert feats.shape == (5, 64) and np.allclose(np.linalg.norm(feats, axis=1), 1.0)
    assert model.predict(data.X[:5]).shape == (5,) and np.isfinite(model.score(data.X[:5]))
