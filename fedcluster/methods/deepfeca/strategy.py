"""DeepFeCA: federated representation learning with FeCA pseudo-labels (Algorithm 6, paper ``004``).

Each of the T rounds (``num_server_rounds``):

(a) every client extracts the features of its rows with the current global
    network and the federation clusters them into ``k`` centroids with
    ``feature_clustering`` (FeCA, or a baseline of the paper's Table 3),
    whose own strategy runs unchanged over a
    :class:`~.federation.FeatureFederation`;
(b) the server sends the network's weights and the centroids to the
    sampled clients (``train.deepfeca``);
(c) each client labels its rows by their nearest centroid and trains the
    network with a classifier on these pseudo-labels for E epochs
    (``local_steps``), mini-batches of ``train_batch_size``;
(d) the server averages the clients' weights, weighted by their numbers of
    rows (FedAvg, :func:`~.weights.fedavg`).

After the last round, one more step (a) gives the centroids of the final
network's features, which the run returns with the weights
(:attr:`fedcluster.results.RunResult.arrays`); its score is the k-means score
of the features (every client's, L2-normalised) against those centroids.

What leaves a client: the centroids, counts and radii of the clustering
method (of features, under the privacy floor, checked on the features), and
after training the network's weights (a model trained on at least
``min-cluster-size`` rows, never a row).

The run checkpoints after every round like every method (``checkpoint.json``,
:mod:`fedcluster.server.checkpoint`): the state adds the global network's
weights after FedAvg to the sampler's generator and the nodes' declared rows
(:meth:`DeepFeCA.state`), so ``resume-from`` continues a run to the
uninterrupted run's weights and centroids, bit for bit on a CPU.

Choices the paper leaves open:

* **features before clustering**: L2-normalised, as in DeepCluster-v2 (the
  implementation the paper modified); no PCA or whitening (DeepCluster v1's
  PCA would need a federated PCA of its own). Pseudo-labels are computed on
  the same normalised features.
* **the classifier**: drawn afresh from the round's seed every round, the
  same on every client, and never sent or averaged (``head="linear"``): a
  round's pseudo-label indices mean nothing in the next round, which is why
  DeepCluster re-draws its top layer whenever the clusters change.
  ``head="centroids"`` uses DeepCluster-v2's classifier instead: the fixed
  normalised centroids, cosine similarity over a temperature of 0.1.
* **empty pseudo-classes**: as DeepCluster, each epoch samples uniformly over
  the pseudo-classes present on the client (each class drawn about n/k'
  times, with replacement only where it is smaller), so a client's large
  class does not dominate and a class it lacks gets no sample (its classifier
  row only meets negatives). A method that returns fewer than ``k``
  centroids (FeCA with fewer groups) simply gives fewer pseudo-classes;
  empty clusters inside the clustering step are each method's own business
  (FeCA drops empty local clusters, M-Avg fills empty slots).
* **inputs**: each image is standardised on its own (no dataset statistic);
  random shifts of up to a side/8 pixels (``augment``), no other
  augmentation (DeepCluster-v2's multi-crop is out of reach on a CPU).
* **batch normalisation**: running means and variances are averaged like
  any weight; the batch counters stay on the clients.
* **FFCM baselines**: one FFCM round per DeepFeCA round (the paper's Rd=1),
  started by ``init`` (the local k-means start by default).
* **seeds**: the network's initial weights, each round's clustering and each
  round's classifier and sampling come from ``seed``, the restart and the
  round, so a run is repeatable on a CPU.
* **weights sent back** are checked against the sent model (names, shapes,
  dtypes), must be finite and at most ``max_weight`` in magnitude; a reply
  that fails is rejected with its sender named, and the round goes on under
  the quorum rule of every method.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from logging import INFO
from typing import Any

import numpy as np

from ...federation.base import Federation, RunFailed
from ...logs import log
from ...messages import ClientSummary, ProtocolError, validate_named_arrays, validate_reply
from ...results import RoundRecord, RunResult
from ...strategies.base import ClusteringStrategy, round_record
from ...strategies.progress import Progress, StateError, state_entry
from .client import DEEP_TRAIN, ROUND_SEED
from .federation import FeatureFederation, WithArrays
from .options import DeepFeCAOptions, parse_shape
from .weights import digest, fedavg, relative_change

#: The settings of the network and of local training that every DeepFeCA request carries.
NETWORK_KEYS = ("network", "image-shape", "device")
TRAINING_KEYS = ("local-steps", "train-batch-size", "optimizer", "train-lr", "weight-decay",
                 "augment", "head")


class DeepFeCA(ClusteringStrategy):
    """DeepFeCA (see the module docstring); its settings are :class:`~.options.DeepFeCAOptions`."""

    Options = DeepFeCAOptions

    def __init__(self, k: int | None = None, /, **settings) -> None:
        super().__init__(k, **settings)
        self.num_server_rounds = self.options.num_server_rounds
        self.feature_clustering = self.options.feature_clustering
        self.network_config = {key: self.settings[key] for key in NETWORK_KEYS}
        self.training_config = {key: self.settings[key] for key in TRAINING_KEYS}
        #: The weights of the restart being run (the global model theta-bar).
        self.weights: dict[str, np.ndarray] = {}

    def initial_weights(self, seed: int) -> dict[str, np.ndarray]:
        """The server's round-0 network, drawn from ``seed`` (needs PyTorch on the server)."""
        from .training import NetworkSpec, initial_arrays

        return initial_arrays(NetworkSpec(self.options.network, parse_shape(self.options.image_shape)),
                              seed)

    # -- step (a) -----------------------------------------------------------------
    def clustering(self, seed: int) -> ClusteringStrategy:
        """The strategy of ``feature_clustering``, with this run's settings, for one round."""
        from .. import METHODS  # the registry imports this module

        model = METHODS[self.feature_clustering].options
        mine = self.options.model_dump()
        values = {name: mine[name] for name in model.model_fields if name in mine}
        # One clustering per round: FFCM runs its paper's Rd=1, everyone one restart.
        values.update(algorithm=self.feature_clustering, seed=seed, n_init=1, num_server_rounds=1)
        inner = METHODS[self.feature_clustering].strategy(**values)
        # The clients are the same clients: what they declared holds across the steps.
        inner.declared_rows, inner.sampling_keys = self.declared_rows, self.sampling_keys
        return inner

    def cluster_features(self, federation: Federation, restart: int, t: int,
                         history: list[RoundRecord]) -> np.ndarray:
        """Step (a): the federated clustering of the current network's features."""
        inner = self.clustering(int(np.random.default_rng([self.seed, restart, t, 0]).integers(2**31)))
        inner.rng = np.random.default_rng([self.seed, restart, t, 1])
        steps: list[RoundRecord] = []
        features = FeatureFederation(federation, self.weights, self.network_config)
        centroids, _, _ = inner.run_restart(features, restart, steps)
        for step in steps:
            history.append(RoundRecord(restart, t, step.movement, step.score, step.clients_sampled,
                                       step.clients_answered, step.clients_rejected,
                                       step.participants, phase="init"))
        if len(centroids) < 2:
            raise RunFailed(f"round {t}: {self.feature_clustering} found {len(centroids)} "
                            "centroid(s) of the features; pseudo-labels need at least 2")
        return np.asarray(centroids, dtype=np.float64)

    # -- steps (b) to (d) -------------------------------------------------------
    def train_round(self, federation: Federation, restart: int, t: int, centroids: np.ndarray,
                    history: list[RoundRecord]) -> None:
        """Broadcast weights and centroids, let the clients train, average their weights."""
        nodes = self.sample_nodes(federation, self.rng)
        seed = int(np.random.default_rng([self.seed, restart, t, 2]).integers(2**31))
        config = {**self.network_config, **self.training_config, ROUND_SEED: seed,
                  "chunk-size": self.chunk_size}
        sent = self.weights
        exchange = self.exchange(
            WithArrays(federation, sent), DEEP_TRAIN, nodes, config,
            lambda s: validate_reply(s, arrays=sent, arrays_bound=self.options.max_weight),
            centroids=np.ascontiguousarray(centroids), what=f"round {t} (training)")
        # Content order, so that the float sums do not depend on node ids or reply order.
        replies: list[ClientSummary] = sorted(exchange.accepted.values(),
                                              key=lambda s: (s.n, digest(s.arrays)))
        self.weights = fedavg([s.arrays for s in replies], [s.n for s in replies])
        movement = relative_change(self.weights, sent)
        history.append(round_record(restart, t, "train", movement, math.nan, exchange))
        log(INFO, "round %d/%d: %d pseudo-classes, weights moved %.4g (relative), clients %d/%d",
            t, self.num_server_rounds, len(centroids), movement, len(exchange.accepted),
            len(exchange.sent))

    def run_restart(self, federation: Federation, restart: int, history: list[RoundRecord],
                    resume: Progress | None = None) -> tuple[np.ndarray, int, bool]:
        """T rounds of Algorithm 6, then the centroids of the final network's features.

        Progress is reported after every round (the checkpoint's centroids
        are that round's pseudo-label centroids; the network's weights after
        FedAvg are in :meth:`state`). There is no round-0 report: the initial
        network is drawn from the seed, so a run cut in its first round starts
        afresh. With ``resume`` the restored weights go on from the round
        after ``resume.round``: each round's clustering, classifier and seeds
        are drawn from (seed, restart, round) and the sampler's generator is
        restored, so nothing else carries over from round to round (the
        optimiser lives on the clients, made afresh every round).
        """
        if resume is None:
            self.weights = self.initial_weights(
                int(np.random.default_rng([self.seed, restart]).integers(2**31)))
        first = 1 if resume is None else resume.round + 1
        for t in range(first, self.num_server_rounds + 1):
            centroids = self.cluster_features(federation, restart, t, history)
            self.train_round(federation, restart, t, centroids, history)
            self.report_progress(restart, t, centroids, False, history)
        centroids = self.cluster_features(federation, restart, self.num_server_rounds + 1, history)
        return centroids, self.num_server_rounds, False

    # -- checkpoints ---------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The base state, and the global network's weights after the last FedAvg (``weights``).

        Stored as the checkpoint stores every array (raw bytes, base64), so
        they come back bit for bit: about 4/3 of the raw size, some 125 kB
        for the small CNN, 60 MB for ResNet-18.
        """
        return {**super().state(), "weights": dict(self.weights)}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Set the state :meth:`state` returned; the weights must fit this run's network.

        They are checked against a freshly drawn network of the settings
        (names, shapes, dtypes, finite, within ``max_weight``) as a client's
        reply is, so a malformed entry is refused by name before any round.
        """
        super().restore(state)
        stored = state_entry(state, "weights")
        try:
            self.weights = validate_named_arrays(stored, self.initial_weights(0),
                                                 self.options.max_weight)
        except ProtocolError as exc:
            raise StateError(f"strategy state 'weights' does not fit network "
                             f"{self.options.network!r}: {exc}") from None

    def score_restart(self, federation: Federation, centroids: np.ndarray, restart: int,
                      rounds: int, converged: bool) -> RunResult | None:
        """The k-means score of the final features; the result carries the network's weights."""
        features = FeatureFederation(federation, self.weights, self.network_config)
        run = super().score_restart(features, centroids, restart, rounds, converged)
        if run is not None:
            run.arrays = dict(self.weights)
        return run
