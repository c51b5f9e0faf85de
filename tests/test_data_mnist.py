"""The shipped MNIST sets: shape, labels, scaling and the checksum check."""

from __future__ import annotations

import numpy as np
import pytest

from fedcluster.data import DATASET_NAMES, DataError, load_dataset
from fedcluster.data import datasets as datasets_module

#: Label counts of digits 0..9, from fedcluster/data/mnist/README.md.
TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


@pytest.fixture(scope="module")
def mnist():
    return load_dataset("mnist")


def test_mnist_is_the_60000_training_images_as_784_features(mnist):
    assert "mnist" in DATASET_NAMES and "mnist-test" in DATASET_NAMES
    assert mnist.name == "mnist"
    assert mnist.X.shape == (60000, 784) and mnist.X.dtype == np.float64
    assert mnist.X.flags.c_contiguous
    assert mnist.true_centers is None
    assert "LeCun" in mnist.citation


def test_mnist_labels_match_the_readme(mnist):
    assert mnist.labels.dtype == np.int64
    assert np.bincount(mnist.labels, minlength=10).tolist() == TRAIN_COUNTS


def test_mnist_pixels_are_scaled_to_the_unit_interval(mnist):
    assert mnist.X.min() == 0.0 and mnist.X.max() == 1.0
    # Pixels are bytes divided by 255: every value is k / 255 for an integer k.
    grey = mnist.X * 255.0
    np.testing.assert_allclose(grey, np.round(grey), atol=1e-9)
    # The first training image is a 5 (the well-known first MNIST digit), with ink in its middle.
    assert mnist.labels[0] == 5
    image = mnist.X[0].reshape(28, 28)
    assert image[10:18, 10:18].max() > 0.9 and image[0].max() == 0.0 and image.max() == 1.0


def test_mnist_test_set():
    test = load_dataset("mnist-test")
    assert test.X.shape == (10000, 784)
    assert np.bincount(test.labels, minlength=10).tolist() == TEST_COUNTS
    assert 0.0 <= test.X.min() and test.X.max() <= 1.0


def test_a_file_whose_checksum_does_not_match_is_refused_by_name(monkeypatch):
    (images, _), labels = datasets_module.MNIST_FILES["mnist-test"]
    monkeypatch.setitem(datasets_module.MNIST_FILES, "mnist-test", ((images, "0" * 64), labels))
    with pytest.raises(DataError, match=r"fedcluster/data/mnist/t10k-images\.idx3-ubyte\.gz: sha256"):
        load_dataset("mnist-test")


def test_mnist_takes_no_parameters():
    with pytest.raises(ValueError, match="takes no parameters"):
        load_dataset("mnist", points=3)
