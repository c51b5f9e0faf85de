"""The library face: :class:`FederatedKMeans`, with scikit-learn's conventions.

The constructor stores the parameters (every method setting of
:class:`~fedcluster.config.RunConfig`, with its default: one source of
defaults for Python and the command line); :meth:`FederatedKMeans.fit`
validates them once, as a :class:`~fedcluster.config.RunConfig`, and runs the
method over one array per data owner, in memory by default
(:class:`~fedcluster.client.memory.InMemoryFederation`: no message, no
file) or as a Flower simulation (``backend="flower"``: Ray, one simulated
SuperNode per array). With full participation both give the same centroids,
bit for bit.

:func:`select_k` stands beside it, not as a method of it: like
scikit-learn's model selection it fits several estimators and returns the
chosen one, fitted.
"""

from __future__ import annotations

import inspect
import tempfile
import warnings
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from .config import ConfigError, RunConfig
from .data import DataError, validate_points
from .numerics import assign, cluster_stats
from .numerics.distance import sq_distances
from .options import kebab
from .privacy.options import check_delta_for_rows
from .results import RunResult
from .selection import KSelection, check_selection, parse_k_range, select_over

_DEFAULT = {name: field.default for name, field in RunConfig.model_fields.items()}
#: Parameters that scikit-learn names differently from the run config: parameter -> field.
CONFIG_NAMES = {"n_clusters": "k", "random_state": "seed", "max_iter": "num_server_rounds",
                "restart_score": "score"}
#: The estimator's own parameters (not run settings) and their allowed values.
CHOICES = {"backend": ("memory", "flower"), "on_bad_client": ("raise", "skip")}
#: Run-config fields that are not parameters: where a run reads and writes (``fit`` takes the
#: data, its results stay on the estimator) and how long a deployment waits for its nodes.
NOT_PARAMETERS = frozenset({"out_dir", "dataset", "split", "partitions_dir", "resume_from",
                            "min_nodes", "node_wait_timeout", "round_timeout"})


def _constructor_signature() -> inspect.Signature:
    """``__init__``'s signature, derived from the run config's fields (one declaration each).

    ``n_clusters`` first and positional, as scikit-learn's ``KMeans``; then, keyword-only,
    every other method setting in the run config's order under its scikit-learn name
    (:data:`CONFIG_NAMES`) with the run config's default, then :data:`CHOICES`. A method
    that declares a setting of its own gets its parameter here without an edit.
    """
    renamed = {field: name for name, field in CONFIG_NAMES.items()}
    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                  inspect.Parameter("n_clusters", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                    default=_DEFAULT["k"], annotation=int)]
    parameters += [inspect.Parameter(renamed.get(name, name), keyword, default=field.default,
                                     annotation=field.annotation)
                   for name, field in RunConfig.model_fields.items()
                   if name != "k" and name not in NOT_PARAMETERS]
    parameters += [inspect.Parameter(name, keyword, default=values[0], annotation=str)
                   for name, values in CHOICES.items()]
    return inspect.Signature(parameters)


_SIGNATURE = _constructor_signature()


def _one_array(parts: Any) -> bool:
    """Whether ``parts`` is one 2-D array of rows rather than a sequence of owners' arrays.

    An array (NumPy, pandas) says so by its ``ndim``; a list of lists is one
    when its items are rows of numbers of one length.
    """
    if hasattr(parts, "ndim"):
        return parts.ndim == 2
    try:
        return len(parts) > 0 and np.asarray(parts[0]).ndim == 1 and np.ndim(parts) == 2
    except ValueError:  # ragged: parts of different shapes, or an invalid part named later
        return False


class FederatedKMeans:
    """Federated k-means-style clustering of data that stays with its owners.

    Every parameter is the :class:`~fedcluster.config.RunConfig` field of the
    same name (its description is the command line's help text, and its
    default is the command line's), except those scikit-learn names
    otherwise (:data:`CONFIG_NAMES`): ``n_clusters`` is ``k`` (``--k``),
    ``max_iter`` is ``num_server_rounds`` (``--rounds``: rounds,
    each a Lloyd step of every sampled client), ``random_state`` is ``seed``
    (an int; ``None`` and ``RandomState`` objects are refused) and
    ``restart_score`` is ``score`` (which would hide :meth:`score`).
    ``algorithm`` picks the method (``fedcluster.methods.METHODS``). Two
    parameters are the estimator's own: ``backend`` ("memory": in this
    process, :class:`~fedcluster.client.memory.InMemoryFederation`;
    "flower": a Flower simulation, Ray, one SuperNode per part, written to a
    temporary directory) and ``on_bad_client`` ("raise": a part whose number
    of features differs from the others' raises ``DataError``; "skip": it is
    left out with a warning, and its :attr:`labels_` entry is ``None``).

    With ``standardize=True`` the clients' moments standardise every feature
    first (:mod:`fedcluster.preprocessing`); ``predict``, ``transform`` and
    ``score`` apply the same transform to ``X``.

    float32 parts give float32 :attr:`cluster_centers_` (and :meth:`transform`
    answers float32 for float32 ``X``); anything else gives float64. The
    method itself computes in float64 either way.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        In the data's units (standardised centres mapped back; ``result_.centroids``
        are the standardised ones, and ``inertia_`` and :meth:`score` are in
        standardised units).
    labels_ : list of ndarray
        One array per part given to :meth:`fit`: the index of each row's
        nearest centre (``None`` for a part left out). Computed in this
        process after the run, as each owner would with the final centres.
    inertia_ : float
        Sum of squared distances of all clients' points to their nearest centre.
    n_iter_ : int
        Rounds of the kept restart.
    history_ : list of RoundRecord
        One record per request round, every restart.
    result_ : RunResult
        The run as the command line writes it to ``model.pb``.

    scikit-learn's checks
    ---------------------
    ``fit`` takes one array per data owner, so every check of
    :func:`sklearn.utils.estimator_checks.check_estimator` that fits refuses
    its single ``X``; ``tests/test_estimator_sklearn.py`` runs them all with
    ``X`` given as the one part of one owner (``fit([X])``). They pass but
    for these, which do not apply:

    - ``check_estimators_unfitted``: a model used before ``fit`` raises
      ``AttributeError``, not scikit-learn's ``NotFittedError`` (fedcluster
      does not depend on scikit-learn).
    - ``check_fit2d_1sample``, ``check_n_features_in_after_fitting``: a
      client with fewer rows than ``min_cluster_size`` may not answer (the
      privacy floor), and too few distinct local centres for ``n_clusters``
      fail the run (``RunFailed``), where these checks expect a fit or
      scikit-learn's messages.
    - ``check_estimators_empty_data_messages``, ``check_complex_data``,
      ``check_estimators_nan_inf``, ``check_fit2d_predict1d``: the data are
      refused with a ``ValueError`` (:func:`~fedcluster.data.validate_points`),
      whose message is fedcluster's, not the words these checks look for.
    - ``check_dtype_object``: object arrays are refused, not converted.
    - ``check_estimator_sparse_array``, ``check_estimator_sparse_matrix``,
      ``check_estimator_sparse_tag``: sparse input is refused, without
      naming sparsity.

    Examples
    --------
    >>> from fedcluster import FederatedKMeans
    >>> labels = FederatedKMeans(n_clusters=3, random_state=0).fit_predict(parts)  # doctest: +SKIP
    """

    def __init__(self, n_clusters: int = _DEFAULT["k"], **params: Any) -> None:
        bound = _SIGNATURE.bind(self, n_clusters, **params)  # an unknown name: TypeError
        bound.apply_defaults()
        for name, value in bound.arguments.items():
            if name != "self":
                setattr(self, name, value)

    # The parameters scikit-learn reads (get_params, clone, repr) and a reader's help() show.
    __init__.__signature__ = _SIGNATURE  # type: ignore[attr-defined]

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
        renamed = {field: name for name, field in CONFIG_NAMES.items()}
        for name, value in params.items():
            if name in renamed:
                raise ValueError(f"FederatedKMeans has no parameter {name!r}: the run config's "
                                 f"{name!r} is {renamed[name]!r} here (scikit-learn's name)")
            if name not in known:
                raise ValueError(f"FederatedKMeans has no parameter {name!r} "
                                 f"(known: {', '.join(sorted(known))})")
            setattr(self, name, value)
        return self

    def __sklearn_tags__(self) -> Any:
        """scikit-learn's tags: a clusterer and a transformer that keeps float32 (scikit-learn >= 1.6).

        Only scikit-learn calls it, so scikit-learn is there to import.
        """
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

        return Tags(estimator_type="clusterer", target_tags=TargetTags(required=False),
                    transformer_tags=TransformerTags(preserves_dtype=["float64", "float32"]),
                    input_tags=InputTags())

    def config(self) -> RunConfig:
        """The parameters as a validated :class:`RunConfig`; the one check of every parameter.

        ``backend`` and ``on_bad_client``, the estimator's own, are checked
        here too. A bad parameter raises ``ConfigError`` naming it as the
        constructor does (``n_clusters``, not the run config's ``k``).
        """
        params = self.get_params()
        for name, allowed in CHOICES.items():
            value = params.pop(name)
            if value not in allowed:
                raise ConfigError(f"invalid value for '{name}': {value!r} "
                                  f"(allowed: {', '.join(allowed)})")
        for name, field in CONFIG_NAMES.items():
            params[field] = params.pop(name)
        # Only what differs from the defaults, as the command line passes it: a default that
        # depends on other settings (the start under DP) applies where the user named none.
        params = {field: value for field, value in params.items()
                  if not (field in _DEFAULT and type(value) is type(_DEFAULT[field])
                          and value == _DEFAULT[field])}
        try:
            return RunConfig.from_mapping(params)
        except ConfigError as exc:
            message = str(exc)
            for name, field in CONFIG_NAMES.items():
                message = message.replace(f"'{kebab(field)}'", f"'{name}'")
            raise ConfigError(message) from None

    # -- fitting ----------------------------------------------------------------------
    def fit(self, parts: Sequence[Any], y: None = None, *, verbose: bool = False) -> FederatedKMeans:
        """Cluster the union of ``parts`` without pooling them.

        Parameters
        ----------
        parts : sequence of array_like
            One ``(n_i, n_features)`` array per data owner (one array alone is
            refused: the rows of one owner are not a federation).
        y : None
            Ignored (scikit-learn's signature).
        verbose : bool
            ``backend="flower"`` only: show Flower's and Ray's own log lines.

        Raises
        ------
        ConfigError
            An invalid parameter, named with its allowed range.
        DataError
            An invalid part, named by its position; a part with another
            number of features than the others, unless ``on_bad_client="skip"``.
        RunFailed
            The federation could not produce a model (the message says why).
        """
        config = self.config()
        rows, dtype = self._parts(parts)
        kept = [X for X in rows if X is not None]
        try:
            check_delta_for_rows(config, sum(len(X) for X in kept))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if self.backend == "memory":
            from .client.memory import InMemoryFederation
            from .preprocessing import fit_method

            result = fit_method(config, InMemoryFederation(kept))
        else:
            result = self._simulate(config, kept, verbose)
        return self._fitted(result, rows, config, dtype)

    def fit_predict(self, parts: Sequence[Any], y: None = None, **fit_options: Any
                    ) -> list[np.ndarray | None]:
        """Fit, then :attr:`labels_`: the nearest centre of every row, one array per part."""
        return self.fit(parts, **fit_options).labels_

    def fit_transform(self, parts: Sequence[Any], y: None = None, **fit_options: Any
                      ) -> list[np.ndarray | None]:
        """Fit, then :meth:`transform` each part (``None`` for a part left out)."""
        self.fit(parts, **fit_options)
        return [None if labels is None else self.transform(X)
                for X, labels in zip(parts, self.labels_)]

    def _parts(self, parts: Sequence[Any]) -> tuple[list[np.ndarray | None], type]:
        """Each part as float64 rows (``None`` where one is left out) and the dtype to answer in.

        The dtype is scikit-learn's: float32 when every part kept is float32,
        float64 otherwise.
        """
        if _one_array(parts):
            shape = np.shape(parts)
            raise ValueError(
                f"fit takes one array per data owner (a list); got one array of shape {shape}. "
                f"To treat its rows as held by n owners, split it: "
                f"fit(numpy.array_split(X, n)); for data in one place, use "
                f"sklearn.cluster.KMeans")
        rows: list[np.ndarray | None] = [validate_points(X, source=f"client {i}")
                                         for i, X in enumerate(parts)]
        dims = [X.shape[1] for X in rows]
        common = max(dims, key=dims.count, default=0)  # the most parts' (a tie: the first's)
        for i, d in enumerate(dims):
            if d == common:
                continue
            problem = (f"client {i} (parts[{i}]) has {d} features where client "
                       f"{dims.index(common)} has {common}")
            if self.on_bad_client == "raise":
                raise DataError(f"{problem}: every data owner's rows need the same features "
                                f"(on_bad_client='skip' leaves such a part out, with a warning)")
            warnings.warn(f"{problem}: left out (on_bad_client='skip')", stacklevel=3)
            rows[i] = None
        float32 = all(np.asarray(X).dtype == np.float32
                      for X, kept in zip(parts, rows) if kept is not None)
        return rows, np.float32 if float32 else np.float64

    def _fitted(self, result: RunResult, rows: list[np.ndarray | None], config: RunConfig,
                dtype: type) -> FederatedKMeans:
        """Take ``result`` as this model's fit (``rows``: the parts, ``None`` where left out)."""
        self.result_ = result
        # The data's units; predict and score work in the units the method clustered.
        self.cluster_centers_ = result.original_centroids.astype(dtype, copy=False)
        self.n_iter_ = result.rounds
        self.history_ = list(result.history)
        kept = [X for X in rows if X is not None]
        self.n_features_in_ = kept[0].shape[1] if result.arrays else result.centroids.shape[1]
        #: DeepFeCA: the trained network's weights (its centroids are of its features).
        self.network_ = dict(result.arrays) or None
        # What each owner would compute with the final centroids; here, where the parts are.
        assigned = [None if X is None else assign(self._rows(X), result.centroids) for X in rows]
        self.labels_ = [None if a is None else np.asarray(a[0]) for a in assigned]
        if config.score == "exact":
            self.inertia_ = float(result.score * result.n_points)
        else:
            self.inertia_ = float(sum(float(a[1].sum()) for a in assigned if a is not None))
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
            return simulate(run_config, f"{tmp}/parts", len(parts), verbose=verbose, run=run,
                            report=False)

    # -- using the model ----------------------------------------------------------
    def predict(self, X: Any) -> np.ndarray:
        """The index of the nearest centre of each row of ``X``."""
        labels, _ = assign(self._rows(X), self.result_.centroids)
        return np.asarray(labels)

    def transform(self, X: Any) -> np.ndarray:
        """Euclidean distances of the rows of ``X`` to the centres, shape ``(n, n_clusters)``.

        In the units :meth:`predict` measures in (standardised ones with
        ``standardize=True``, the network's features with DeepFeCA); float32
        where ``X`` and :attr:`cluster_centers_` are.
        """
        distances = np.sqrt(sq_distances(self._rows(X), self.result_.centroids))
        both_float32 = np.asarray(X).dtype == self.cluster_centers_.dtype == np.float32
        return distances.astype(np.float32 if both_float32 else np.float64, copy=False)

    def score(self, X: Any, y: None = None) -> float:
        """Opposite of the sum of squared distances of ``X`` to its nearest centres (higher is better).

        scikit-learn's convention (``KMeans.score``: the negative inertia of
        ``X``, a sum). The command line's "score" (``result_.score``, the
        model file's, ``fedcluster simulate``'s summary) is another quantity,
        positive and a mean: with ``restart_score="exact"`` (the default) the
        squared distances of all clients' rows to their nearest centres
        summed and divided by the number of rows; with "client-mean" the
        mean of each client's own such mean. So with "exact" and ``X`` the
        union of the parts, ``score(X) == -result_.score * len(X)`` up to
        rounding, and ``inertia_ == result_.score * len(X)``. Both are in the
        units clustered (standardised ones with ``standardize=True``).
        """
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
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in changed.items())})"


def select_k(parts: Sequence[Any], k_range: str | Sequence[int], criterion: str = "silhouette", *,
             verbose: bool = False, **params: Any) -> KSelection:
    """Choose k for the union of ``parts`` without pooling them; return the table and the fitted model.

    Parameters
    ----------
    parts : sequence of array_like
        One ``(n_i, n_features)`` array per data owner.
    k_range : str or sequence of int
        ``"2:10"`` (inclusive), ``"2:10:2"``, ``"2,4,8"`` or the ks themselves.
    criterion : {"silhouette", "elbow"}
        See :mod:`fedcluster.selection`, which runs the curve.
    verbose : bool
        ``backend="flower"`` only: show Flower's and Ray's own log lines.
    **params
        :class:`~fedcluster.FederatedKMeans` parameters (all but
        ``n_clusters``), ``standardize=True`` among them; ``backend="flower"``
        runs one Flower simulation whose ServerApp runs every k (Ray starts
        once).

    Returns
    -------
    KSelection
        ``.k``, ``.rows`` (``.table()`` prints them) and ``.model``, a
        :class:`~fedcluster.FederatedKMeans` with ``n_clusters`` the chosen one, fitted
        with the chosen run (no further run).

    Raises
    ------
    ConfigError
        A bad k range, criterion or parameter, named.
    DataError
        An invalid part, named by its position (``on_bad_client`` applies
        as in :meth:`~fedcluster.FederatedKMeans.fit`).
    RunFailed
        A run failed (the message names its k).
    """
    if "n_clusters" in params:
        raise ConfigError("select_k takes the ks from k_range, not an 'n_clusters' parameter")
    ks = parse_k_range(k_range) if isinstance(k_range, str) else parse_k_range(
        ",".join(str(int(k)) for k in k_range))
    check_selection(ks, criterion)
    model = FederatedKMeans(n_clusters=ks[0], **params)
    config = model.config()
    rows, dtype = model._parts(parts)
    kept = [X for X in rows if X is not None]
    if model.backend == "memory":
        from .client.memory import InMemoryFederation

        selection = select_over(InMemoryFederation(kept), config, ks, criterion)
    else:
        from .server.run import run_k_selection  # it writes the files: only for this backend

        selection = model._simulate(config, kept, verbose,
                                    run=partial(run_k_selection, ks=ks, criterion=criterion))
    model.set_params(n_clusters=selection.k)
    selection.model = model._fitted(selection.result, rows, model.config(), dtype)
    return selection
