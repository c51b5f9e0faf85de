"""The feature extractors DeepFeCA trains (PyTorch; imported only when a run needs one).

* ``small-cnn``: three 3x3 convolutions (16, 32, 64 channels) with batch
  normalisation, two 2x2 max-poolings and a global average pooling: 64
  features, about 23 000 weights; trains on a CPU (about 1000 MNIST
  images a second on two cores), any image size.
* ``resnet18``: the paper's ResNet-18 in its CIFAR variant (a 3x3 stride-1
  stem without max-pooling, stages of 64-128-256-512 channels of two basic
  blocks each, global average pooling): 512 features, 11.2 million weights.
* ``mlp``: for rows that are not images, two fully connected layers of 256 and
  128 units after a batch normalisation of the inputs: 128 features.

Every network is built from a seed, the same weights for the same seed on
any machine, without touching the caller's random state.
"""

from __future__ import annotations

from math import prod

from .torch_support import require_torch

torch = require_torch()
nn = torch.nn


class SmallCNN(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        layers, width = [], channels
        for out, pool in ((16, True), (32, True), (64, False)):
            layers += [nn.Conv2d(width, out, 3, padding=1, bias=False), nn.BatchNorm2d(out),
                       nn.ReLU(inplace=True)]
            if pool:
                # ceil_mode keeps the last row and column of an odd side (7 -> 4), not drop them.
                layers.append(nn.MaxPool2d(2, ceil_mode=True))
            width = out
        self.body = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.feature_dim = width

    def forward(self, x):
        return self.body(x)


class BasicBlock(nn.Module):
    def __init__(self, inputs: int, outputs: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.shortcut = nn.Sequential()
        if stride != 1 or inputs != outputs:
            self.shortcut = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(outputs))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18 for 32x32 inputs (He et al. 2016, the CIFAR stem)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(channels, 64, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(64), nn.ReLU(inplace=True))
        stages, width = [], 64
        for out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            stages += [BasicBlock(width, out, stride), BasicBlock(out, out, 1)]
            width = out
        self.stages = nn.Sequential(*stages)
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.feature_dim = width

    def forward(self, x):
        return self.pool(self.stages(self.stem(x)))


class MLP(nn.Module):
    def __init__(self, inputs: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            # Rows on any scale: the first layer standardises each input feature
            # with running statistics that FedAvg averages like any weight.
            nn.BatchNorm1d(inputs, affine=False),
            nn.Linear(inputs, 256), nn.BatchNorm1d(256), nn.ReLU(inplace=True),
            nn.Linear(256, 128), nn.BatchNorm1d(128), nn.ReLU(inplace=True))
        self.feature_dim = 128

    def forward(self, x):
        return self.body(x)


def build_network(name: str, shape: tuple[int, ...], seed: int):
    """The network ``name`` for inputs of ``shape`` (C, H, W or D), initialised from ``seed``."""
    if name == "mlp":
        make = lambda: MLP(prod(shape))  # noqa: E731 - the mlp reads rows of any shape flat
    elif len(shape) != 3:
        raise ValueError(f"network {name!r} takes images: image-shape must be C,H,W, got {shape}")
    elif name == "small-cnn":
        make = lambda: SmallCNN(shape[0])  # noqa: E731
    elif name == "resnet18":
        make = lambda: ResNet18(shape[0])  # noqa: E731
    else:
        raise ValueError(f"unknown network {name!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make()


def build_head(feature_dim: int, classes: int, seed: int):
    """A linear classifier of ``classes`` pseudo-labels, drawn from ``seed`` (DeepCluster's top layer)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Linear(feature_dim, classes)


class CentroidHead(nn.Module):
    """DeepCluster-v2's classifier: cosine similarity to the fixed centroids, over a temperature."""

    TEMPERATURE = 0.1

    def __init__(self, centroids) -> None:
        super().__init__()
        self.register_buffer("prototypes", nn.functional.normalize(centroids, dim=1))

    def forward(self, features):
        return nn.functional.normalize(features, dim=1) @ self.prototypes.T / self.TEMPERATURE
