"""The library face: :class:`FederatedKMeans`, with scikit-learn's conventions.

The constructor stores the parameters (every method setting of
:class:`~fedcluster.config.RunConfig`, with its default: one source of
defaults for Python and the command line); :meth:`FederatedKMeans.fit`
validates them once, as a :class:`~fedcluster.config.RunConfig`, and runs the
method over one array per data owner, in memory by default
(:class:`~fedcluster.federation.memory.InMemoryFederation`: no message, no
file) or as a Flower simulation (``backend="flower"``: Ray, one simulated
SuperNode per array). With full participation both give the same centroids,
bit for bit.
"""

from __future__ import annotations

import inspect
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from .config import ConfigError, RunConfig
from .data import validate_points
from .numerics import assign, cluster_stats
from .privacy.options import check_delta_for_rows
from .results import RunResult

_DEFAULT = {name: field.default for name, field in RunConfig.model_fields.items()}


class FederatedKMeans:
    """Federated k-means-style clustering of data that stays with its owners.

    Every parameter is the :class:`~fedcluster.config.RunConfig` field of the
    same name (its description is the command line's help text, and its
    default is the command line's), except ``restart_score``, the field
    ``score`` (which would hide :meth:`score`); ``algorithm`` picks the method
    (``fedcluster.methods.METHODS``).

    With ``standardize=True`` the clients' moments standardise every feature
    first (:mod:`fedcluster.preprocessing`); ``predict`` and ``score`` apply
    the same transform to ``X``.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        In the data's units (standardised centres mapped back; ``result_.centroids``
        are the standardised ones, and ``inertia_`` and :meth:`score` are in
        standardised units).
    inertia_ : float
        Sum of squared distances of all clients' points to their nearest centre.
    n_iter_ : int
        Rounds of the kept restart.
    history_ : list of RoundRecord
        One record per request round, every restart.
    result_ : RunResult
        The run as the command line writes it to ``model.pb``.

    Examples
    --------
    >>> from fedcluster import FederatedKMeans
    >>> model = FederatedKMeans(algorithm="dwf", k=3).fit(parts)  # doctest: +SKIP
    """

    def __init__(self, algorithm: str = _DEFAULT["algorithm"], k: int = _DEFAULT["k"], *,
                 num_server_rounds: int = _DEFAULT["num_server_rounds"],
                 tol: float = _DEFAULT["tol"], n_init: int = _DEFAULT["n_init"],
                 restart_score: str = _DEFAULT["score"], seed: int = _DEFAULT["seed"],
                 participation: float = _DEFAULT["participation"],
                 clients_per_round: int = _DEFAULT["clients_per_round"],
                 min_cluster_size: int = _DEFAULT["min_cluster_size"],
                 min_answer_fraction: float = _DEFAULT["min_answer_fraction"],
                 trust_clients: bool = _DEFAULT["trust_clients"],
                 chunk_size: int = _DEFAULT["chunk_size"], device: str = _DEFAULT["device"],
                 dp: str = _DEFAULT["dp"], dp_epsilon: float = _DEFAULT["dp_epsilon"],
                 dp_delta: float = _DEFAULT["dp_delta"],
                 dp_noise_multiplier: float = _DEFAULT["dp_noise_multiplier"],
                 dp_clip: float = _DEFAULT["dp_clip"], data_bounds: str = _DEFAULT["data_bounds"],
                 secure_aggregation: bool = _DEFAULT["secure_aggregation"],
                 secagg_threshold: float = _DEFAULT["secagg_threshold"],
                 secagg_neighbours: int = _DEFAULT["secagg_neighbours"],
                 secagg_fraction_bits: int = _DEFAULT["secagg_fraction_bits"],
                 init: str = _DEFAULT["init"], k_prime: int = _DEFAULT["k_prime"],
                 lr: float = _DEFAULT["lr"], momentum: float = _DEFAULT["momentum"],
                 max_client_share: float = _DEFAULT["max_client_share"],
                 aggregation: str = _DEFAULT["aggregation"],
                 trim_fraction: float = _DEFAULT["trim_fraction"],
                 local_steps: int = _DEFAULT["local_steps"],
                 fuzzifier: float = _DEFAULT["fuzzifier"], radius: str = _DEFAULT["radius"],
                 client_lr: float = _DEFAULT["client_lr"],
                 batch_size: int = _DEFAULT["batch_size"],
                 reseed_fraction: float = _DEFAULT["reseed_fraction"],
                 reseed_patience: int = _DEFAULT["reseed_patience"],
                 standardize: bool = _DEFAULT["standardize"],
                 feature_clustering: str = _DEFAULT["feature_clustering"],
                 network: str = _DEFAULT["network"], image_shape: str = _DEFAULT["image_shape"],
                 train_batch_size: int = _DEFAULT["train_batch_size"],
                 optimizer: str = _DEFAULT["optimizer"], train_lr: float = _DEFAULT["train_lr"],
                 weight_decay: float = _DEFAULT["weight_decay"], augment: str = _DEFAULT["augment"],
                 head: str = _DEFAULT["head"], max_weight: float = _DEFAULT["max_weight"]) -> None:
        for name, value in locals().items():
            if name != "self":
                setattr(self, name, value)

    # -- scikit-learn's parameter protocol -------------------------------------------
    @classmethod
    def _parameter_names(cls) -> list[str]:
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's parameters and their values."""
        return {name: getattr(self, name) for name in self._parameter_names()}

    def set_params(self, **params: Any) -> FederatedKMeans:
        """Set parameters by name; an unknown name raises ``ValueError``."""
        known = set(self._parameter_names())
        for name, value in params.items():
            if name not in known:
                raise ValueError(f"FederatedKMeans has no parameter {name!r} "
                                 f"(known: {', '.join(sorted(known))})")
            setattr(self, name, value)
        return self

    def config(self) -> RunConfig:
        """The parameters as a validated :class:`RunConfig` (a bad one raises ``ConfigError``)."""
        params = self.get_params()
        params["score"] = params.pop("restart_score")
        return RunConfig.from_mapping(params)

    # -- fitting ----------------------------------------------------------------------
    def fit(self, parts: Sequence[Any], y: None = None, *, backend: str = "memory",
            verbose: bool = False) -> FederatedKMeans:
        """Cluster the union of ``parts`` without pooling them.

        Parameters
        ----------
        parts : sequence of array_like
            One ``(n_i, n_features)`` array per data owner.
        y : None
            Ignored (scikit-learn's signature).
        backend : {"memory", "flower"}
            Run in this process, or as a Flower simulation (Ray; the parts
            are written to a temporary directory that the simulated clients
            read).
        verbose : bool
            Flower simulation only: show Flower's and Ray's own log lines.

        Raises
        ------
        ConfigError
            An invalid parameter, named with its allowed range.
        DataError
            An invalid part, named by its position.
        RunFailed
            The federation could not produce a model (the message says why).
        """
        config = self.config()
        checked = [validate_points(X, source=f"client {i}") for i, X in enumerate(parts)]
        try:
            check_delta_for_rows(config, sum(len(X) for X in checked))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if backend == "memory":
            from .federation.memory import InMemoryFederation
            from .preprocessing import fit_method

            result = fit_method(config, InMemoryFederation(checked))
        elif backend == "flower":
            result = self._simulate(config, checked, verbose)
        else:
            raise ValueError(f"backend must be 'memory' or 'flower', got {backend!r}")
        return self._fitted(result, checked, config)

    def _fitted(self, result: RunResult, checked: list[np.ndarray], config: RunConfig
                ) -> FederatedKMeans:
        """Take ``result`` as this model's fit (``checked``: the parts it was fitted on)."""
        self.result_ = result
        # The data's units; predict and score work in the units the method clustered.
        self.cluster_centers_ = result.original_centroids
        if config.score == "exact":
            self.inertia_ = float(result.score * result.n_points)
        elif result.arrays:  # DeepFeCA's centroids are of features the rows are not
            self.inertia_ = float("nan")
        else:
            self.inertia_ = float(sum(cluster_stats(self._standardized(X), result.centroids).inertia
                                      for X in checked))
        self.n_iter_ = result.rounds
        self.history_ = list(result.history)
        self.n_features_in_ = checked[0].shape[1] if result.arrays else result.centroids.shape[1]
        #: DeepFeCA: the trained network's weights (its centroids are of its features).
        self.network_ = dict(result.arrays) or None
        return self

    @staticmethod
    def _simulate(config: RunConfig, parts: list[np.ndarray], verbose: bool, run=None) -> RunResult:
        from .data import write_partitions
        from .simulation import simulate

        bounds = np.cumsum([0] + [len(X) for X in parts])
        indices = [np.arange(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
        with tempfile.TemporaryDirectory(prefix="fedcluster-") as tmp:
            write_partitions(np.concatenate(parts), indices, f"{tmp}/parts")
            run_config = config.model_copy(update={"out_dir": f"{tmp}/out",
                                                   "min_nodes": len(parts)})
            return simulate(run_config, f"{tmp}/parts", len(parts), verbose=verbose, run=run)

    # -- using the model ----------------------------------------------------------
    def predict(self, X: Any) -> np.ndarray:
        """The index of the nearest centre of each row of ``X``."""
        labels, _ = assign(self._rows(X), self.result_.centroids)
        return np.asarray(labels)

    def score(self, X: Any, y: None = None) -> float:
        """Opposite of the sum of squared distances of ``X`` to its nearest centres (higher is better)."""
        return -float(cluster_stats(self._rows(X), self.result_.centroids).inertia)

    def embed(self, X: Any) -> np.ndarray:
        """DeepFeCA: the L2-normalised features of ``X`` by the trained network.

        The space of :attr:`cluster_centers_`, in which :meth:`predict` and
        :meth:`score` measure; needs PyTorch (``pip install "fedcluster[deep]"``).
        """
        if getattr(self, "network_", None) is None:
            raise AttributeError("embed() needs a model fitted with algorithm='deepfeca'")
        from .methods.deepfeca.evaluation import network_features, network_spec_of

        rows = validate_points(X, expected_dim=self.n_features_in_, source="X")
        return network_features(self.network_, network_spec_of(self.result_.settings), rows,
                                normalise=True)

    def _rows(self, X: Any) -> np.ndarray:
        if not hasattr(self, "cluster_centers_"):
            raise AttributeError("this FederatedKMeans is not fitted yet: call fit(parts) first")
        if getattr(self, "network_", None) is not None:
            return self.embed(X)
        return self._standardized(validate_points(X, expected_dim=self.n_features_in_, source="X"))

    def _standardized(self, X: np.ndarray) -> np.ndarray:
        """``X`` in the units the method clustered: standardised by the fit's transform, if any."""
        from .preprocessing import in_clustered_units

        return in_clustered_units(X, self.result_)

    def __repr__(self) -> str:
        defaults = {name: p.default for name, p in
                    inspect.signature(type(self).__init__).parameters.items()}
        changed = {k: v for k, v in self.get_params().items() if v != defaults[k]}
        return f"FederatedKMeans({', '.join(f'{k}={v!r}' for k, v in changed.items())})"
