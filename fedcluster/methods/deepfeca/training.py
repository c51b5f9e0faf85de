"""What a DeepFeCA client computes with the network (PyTorch): features and local training.

* :func:`network_from_arrays` builds the network of a request and loads the
  server's weights into it, refusing weights of another shape or dtype;
  :func:`network_arrays` takes them out again. The weights that travel are
  the network's parameters and batch-normalisation statistics
  (``running_mean``, ``running_var``); the batch counters
  ``num_batches_tracked`` stay home (they only matter to a layer without
  momentum, which these networks do not have).
* :func:`features` reads rows as images (each standardised on its own, so
  that no dataset statistic is needed) and returns the network's features
  in evaluation mode.
* :func:`train_locally` trains the network with a classifier of the
  pseudo-labels for E epochs (:func:`balanced_order`, :func:`augment`).

Deterministic on a CPU for a seed: every random draw comes from a NumPy
generator or a seeded torch generator made here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ...messages import ProtocolError
from ...numerics import to_numpy
from .networks import CentroidHead, build_head, build_network
from .torch_support import require_torch

torch = require_torch()

#: Rows per forward pass when only features are needed.
FEATURE_BATCH = 1024
#: Batch-normalisation counters: not sent, not averaged (see the module docstring).
_LOCAL_ONLY = "num_batches_tracked"


@dataclass(frozen=True)
class NetworkSpec:
    """Which network, for which inputs, on which device."""

    name: str
    shape: tuple[int, ...]
    device: str = "cpu"


@dataclass(frozen=True)
class LocalTraining:
    """The settings of a client's local training (Algorithm 6, line 8)."""

    epochs: int
    batch_size: int
    optimizer: str
    lr: float
    weight_decay: float
    augment: str
    head: str
    seed: int


def network_arrays(net) -> dict[str, np.ndarray]:
    """The weights that travel, by name, as NumPy arrays (float32 for these networks)."""
    return {name: value.detach().cpu().numpy().copy() for name, value in net.state_dict().items()
            if not name.endswith(_LOCAL_ONLY)}


def initial_arrays(spec: NetworkSpec, seed: int) -> dict[str, np.ndarray]:
    """The weights of a freshly initialised network (the server's round-0 model)."""
    return network_arrays(build_network(spec.name, spec.shape, seed))


def network_from_arrays(spec: NetworkSpec, arrays: Mapping[str, np.ndarray]):
    """The network of ``spec`` holding ``arrays``; :class:`ProtocolError` names a mismatch."""
    net = build_network(spec.name, spec.shape, 0)
    expected = network_arrays(net)
    missing = sorted(set(expected) - set(arrays))
    extra = sorted(set(arrays) - set(expected))
    if missing or extra:
        raise ProtocolError(f"the request's weights do not fit network {spec.name!r}: "
                            f"missing {missing[:3]}, unknown {extra[:3]}")
    state = {}
    for name, want in expected.items():
        got = np.asarray(arrays[name])
        if got.shape != want.shape or got.dtype != want.dtype:
            raise ProtocolError(f"weight '{name}' is {got.dtype} {got.shape}, network "
                                f"{spec.name!r} has {want.dtype} {want.shape}")
        if not np.all(np.isfinite(got)):
            raise ProtocolError(f"weight '{name}' has non-finite values")
        state[name] = torch.from_numpy(np.ascontiguousarray(got))
    net.load_state_dict(state, strict=False)
    return net.to(torch.device(spec.device))


def as_inputs(X, spec: NetworkSpec):
    """Rows as a float32 tensor: images of ``spec.shape``, each standardised on its own.

    Per-image standardisation (zero mean, unit variance over an image's
    pixels) puts MNIST's [0, 1], digits' 0..16 and CIFAR's 0..255 on one
    scale without any statistic of a dataset. The mlp takes the rows as they
    are (its first layer standardises them).
    """
    rows = np.asarray(to_numpy(X), dtype=np.float32)
    if rows.shape[1] != int(np.prod(spec.shape)):
        raise ProtocolError(f"the rows have {rows.shape[1]} values, image-shape "
                            f"{','.join(map(str, spec.shape))} needs {int(np.prod(spec.shape))}")
    if spec.name == "mlp":
        return torch.from_numpy(rows)
    images = rows.reshape(-1, *spec.shape)
    axes = tuple(range(1, images.ndim))
    centred = images - images.mean(axis=axes, keepdims=True)
    scale = np.sqrt((centred ** 2).mean(axis=axes, keepdims=True))
    return torch.from_numpy(centred / np.maximum(scale, 1e-6))


def features(net, inputs, *, normalise: bool) -> np.ndarray:
    """The network's features of ``inputs`` in evaluation mode (float64, L2-normalised if asked)."""
    device = next(net.parameters()).device
    net.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(inputs), FEATURE_BATCH):
            out.append(net(inputs[start:start + FEATURE_BATCH].to(device)).double().cpu())
    found = torch.cat(out) if out else torch.zeros((0, net.feature_dim), dtype=torch.float64)
    if normalise:
        found = torch.nn.functional.normalize(found, dim=1)
    return found.numpy()


def balanced_order(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One epoch's sample order, uniform over the pseudo-labels present (DeepCluster's sampler).

    Each non-empty pseudo-class gets ``n // classes + 1`` draws (with
    replacement only where it has fewer samples), so a large class does not
    dominate the epoch; the draws are shuffled and cut to ``n``. Empty
    pseudo-classes get none.
    """
    n = len(labels)
    classes = np.unique(labels)
    per_class = n // len(classes) + 1
    picks = [rng.choice(np.flatnonzero(labels == c), per_class,
                        replace=np.count_nonzero(labels == c) < per_class) for c in classes]
    return rng.permutation(np.concatenate(picks))[:n]


def augment(images, mode: str, rng: np.random.Generator):
    """Random shifts of up to a side/8 pixels (zero padding), and flips for ``shift-flip``."""
    if mode == "none" or images.ndim != 4:
        return images
    height, width = images.shape[2:]
    pad = max(1, height // 8)
    padded = torch.nn.functional.pad(images, (pad, pad, pad, pad))
    offsets = rng.integers(0, 2 * pad + 1, size=(len(images), 2))
    shifted = torch.empty_like(images)
    # One slice per distinct offset (at most (2 pad + 1)^2), not one per image.
    for dy, dx in np.unique(offsets, axis=0):
        rows = torch.from_numpy(np.flatnonzero((offsets[:, 0] == dy) & (offsets[:, 1] == dx)))
        shifted[rows] = padded[rows, :, dy:dy + height, dx:dx + width]
    if mode == "shift-flip":
        flip = torch.from_numpy(rng.random(len(images)) < 0.5)
        shifted[flip] = shifted[flip].flip(3)
    return shifted


def train_locally(net, inputs, labels: np.ndarray, centroids: np.ndarray, settings: LocalTraining
                  ) -> float:
    """E epochs of the network with a pseudo-label classifier; returns the last epoch's mean loss.

    The classifier is a linear layer drawn from the round's seed (the same
    on every client, as DeepCluster re-draws its top layer whenever the
    clusters change: the labels of one round mean nothing in the next) or
    the fixed normalised centroids (``head="centroids"``); it does not
    travel. A final batch of one sample is skipped (batch normalisation
    needs two).
    """
    device = next(net.parameters()).device
    classes = len(centroids)
    if settings.head == "centroids":
        head = CentroidHead(torch.from_numpy(np.asarray(centroids, dtype=np.float32)))
    else:
        head = build_head(net.feature_dim, classes, settings.seed)
    head = head.to(device)
    params = [*net.parameters(), *head.parameters()]
    if settings.optimizer == "adam":
        opt = torch.optim.Adam(params, lr=settings.lr, weight_decay=settings.weight_decay)
    else:
        opt = torch.optim.SGD(params, lr=settings.lr, momentum=0.9,
                              weight_decay=settings.weight_decay)
    rng = np.random.default_rng(settings.seed)
    targets = torch.from_numpy(np.asarray(labels, dtype=np.int64))
    net.train()
    loss_sum, batches = 0.0, 0
    for _ in range(settings.epochs):
        loss_sum, batches = 0.0, 0
        order = balanced_order(labels, rng)
        for start in range(0, len(order), settings.batch_size):
            batch = order[start:start + settings.batch_size]
            if len(batch) < 2:
                continue
            x = augment(inputs[batch], settings.augment, rng).to(device)
            loss = torch.nn.functional.cross_entropy(head(net(x)), targets[batch].to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum, batches = loss_sum + float(loss.detach()), batches + 1
    return loss_sum / max(batches, 1)
