"""The settings of a run, declared once: the options models every method builds on.

Each setting is one pydantic field here or in a method's ``options.py``
(:mod:`fedcluster.methods`), with its type, its allowed range, its default and
its description. Everything else is derived from these declarations: the
strategies' constructors (:class:`~fedcluster.strategies.ClusteringStrategy`
validates its keyword arguments with its method's model), the run
configuration (:class:`~fedcluster.config.RunConfig`, the union of every
method's model), the command line's options and help, the Flower run-config
defaults in ``pyproject.toml`` (a test keeps them equal) and the library's
:class:`~fedcluster.FederatedKMeans`. Keys use Flower's kebab-case
(``local-steps``) as aliases of the snake_case attribute names; an invalid
value raises :class:`ConfigError` naming the field, the value and the allowed
range.

Settings several methods share (``init``, ``k-prime``, ``lr``, ``momentum``,
``local-steps``) are declared once below as annotated types, so each has one
default wherever it is used.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from .privacy.options import (DP, DataBounds, DPBoundsShare, DPClip, DPRounds, DPStartShare, DPDelta, DPEpsilon, DPNoiseMultiplier,
                              SecAggFractionBits, SecAggNeighbours, SecAggThreshold,
                              SecureAggregation, check_privacy)

#: The named starts of the round-based methods (besides an array file).
INIT_METHODS = ("local-kmeans", "kfed", "random", "spread", "private")
#: Other names of ``min-cluster-size`` (FKM's paper calls p the privacy threshold).
PRIVACY_THRESHOLD_ALIASES = ("privacy-threshold", "privacy_threshold")


class ConfigError(ValueError):
    """An invalid setting; the message names each bad field and its allowed range."""


def kebab(name: str) -> str:
    """The run-config key of an attribute name (``local_steps`` -> ``local-steps``)."""
    return name.replace("_", "-")


def _init_method_or_file(value: str) -> str:
    if value in INIT_METHODS or Path(value).is_file():
        return value
    raise ValueError(f"must be one of {', '.join(INIT_METHODS)} or an existing array file")


# -- settings several methods share -------------------------------------------------------
Init = Annotated[str, AfterValidator(_init_method_or_file), Field(
    "local-kmeans", description="initial centroids: local-kmeans (server k-means over the "
    "clients' local k-means), kfed (k-FED), random (uniform in the federated bounding box), "
    "spread (packed apart in that box, or under DP in --data-bounds; no row used), private "
    "(DP only, its default: a DP coreset, noisy sums and counts of the rows per cell of the "
    "bounds, --dp-start-share of the budget, clustered by the server), or a (k, d) array file")]
KPrime = Annotated[int, Field(
    0, ge=0, description="clusters of each client's local k-means (k-FED, FeCA, M-Avg, "
    "--init kfed); 0 means k")]
ServerLR = Annotated[float, Field(
    1.0, gt=0.0, le=1.0, description="server learning rate (eta of the DWF paper; alpha of "
    "Triebe & Rajagopal, whose alpha = (1, 0.5) is --lr 1 --momentum 0.5)")]
Momentum = Annotated[float, Field(
    0.0, ge=0.0, lt=1.0, description="server momentum (mu of DWF eq. 6; rho, the second "
    "entry of Triebe & Rajagopal's alpha)")]
LocalSteps = Annotated[int, Field(
    1, ge=1, description="local Lloyd steps per round (DWF max_local) or local epochs (E)")]


class Options(BaseModel):
    """The settings every method takes (sampling, restarts, stopping, clients' compute).

    A method's model (``fedcluster/methods/<name>/options.py``) subclasses it
    with its own fields and narrows ``algorithm`` to its names.
    """

    model_config = ConfigDict(
        alias_generator=kebab, populate_by_name=True, extra="forbid", frozen=True,
        allow_inf_nan=False,
    )

    #: What the registry (:mod:`fedcluster.methods`, above this layer) tells the checks:
    #: the methods with a sum form (DP and secure aggregation: :func:`check_privacy`) and
    #: those DeepFeCA may cluster its features with; None until it is imported.
    sum_form_methods: ClassVar[tuple[str, ...] | None] = None
    feature_clusterings: ClassVar[tuple[str, ...] | None] = None

    algorithm: str = Field("dwf", description="the method (see the sections below)")
    k: int = Field(15, ge=1, description="number of clusters")
    num_server_rounds: int = Field(
        100, ge=1, description="largest number of rounds per restart (one-shot methods: ignored)")
    tol: float = Field(
        1e-4, ge=0.0, description="stop when the centroids move less than this (0: run every "
        "round); in the data's units, or relative to its spread with --tol-scale variance")
    tol_scale: Literal["absolute", "variance"] = Field(
        "absolute", description="what tol is relative to: absolute (the centroids' movement in "
        "the data's units is below tol) or variance (as scikit-learn's KMeans: the squared "
        "movement is below tol x the mean per-feature variance of the pooled rows, which one "
        "moments request gives before the first round; not with dp or secure-aggregation)")
    n_init: int = Field(1, ge=1, description="restarts; the one with the best federated score is kept")
    score: Literal["exact", "client-mean"] = Field(
        "exact", description="how restarts are compared: sum of squared distances over all points, "
        "or the mean of the clients' means (the DWF paper's RequestScore)")
    seed: int = Field(0, ge=0, lt=2**32, description="seed of sampling and initialisation")
    participation: float = Field(
        1.0, gt=0.0, le=1.0, description="fraction of the clients sampled per round")
    clients_per_round: int = Field(
        0, ge=0, description="fixed number of clients per round; 0 uses --participation")
    min_nodes: int = Field(1, ge=1, description="clients to wait for before the first round")
    node_wait_timeout: float = Field(300.0, gt=0.0, description="seconds to wait for --min-nodes")
    round_timeout: float = Field(300.0, gt=0.0, description="seconds to wait for a round's replies")
    min_answer_fraction: float = Field(
        0.5, gt=0.0, le=1.0, description="share of the clients asked in a round that must answer "
        "usably; below it the run fails")
    trust_clients: bool = Field(
        False, description="trust every client's declared figures: count each client's rows as "
        "declared in the aggregations, the score and n_points, keep a client whose spread is 100 "
        "x the median of the others' in the start, and a reply whose centroids reach 10 x "
        "farther than the other clients' (by default each such client is named in the log; one "
        "declaring over 1000 x the median client's rows counts as the median client, the "
        "second is kept out of the start, the third rejected)")
    min_cluster_size: int = Field(
        2, ge=2, description="privacy floor p: no message leaving a client holds a centroid, sum "
        "or radius of fewer points (Garst's privacy threshold; --privacy-threshold is an alias)")
    chunk_size: int = Field(
        4096, ge=1, description="rows per block in the clients' distance computations")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="where clients compute: CuPy on a GPU (cuda), NumPy (cpu), or "
        "CUDA when CuPy sees a GPU (auto)")
    # Privacy (fedcluster/privacy/): declared there, checked by check_privacy below.
    dp: DP
    dp_epsilon: DPEpsilon
    dp_delta: DPDelta
    dp_noise_multiplier: DPNoiseMultiplier
    dp_clip: DPClip
    data_bounds: DataBounds
    dp_bounds_share: DPBoundsShare
    dp_start_share: DPStartShare
    dp_rounds: DPRounds
    secure_aggregation: SecureAggregation
    secagg_threshold: SecAggThreshold
    secagg_neighbours: SecAggNeighbours
    secagg_fraction_bits: SecAggFractionBits

    @model_validator(mode="after")
    def _privacy_possible(self):
        """DP and secure aggregation only where the method and its start can honour them."""
        check_privacy(self, self.sum_form_methods)
        return self

    @model_validator(mode="before")
    @classmethod
    def _privacy_threshold_alias(cls, values: Any) -> Any:
        """``privacy-threshold`` (Garst's name for p) sets ``min-cluster-size``."""
        if not isinstance(values, dict):
            return values
        values = dict(values)
        aliases = [values.pop(key) for key in PRIVACY_THRESHOLD_ALIASES if key in values]
        if aliases:
            given = [values[k] for k in ("min-cluster-size", "min_cluster_size") if k in values]
            if any(value != aliases[0] for value in given + aliases):
                raise ValueError("privacy-threshold is an alias of min-cluster-size; give one value")
            values["min-cluster-size"] = aliases[0]
        return values

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]):
        """Validate kebab- or snake-case keys; the one check of a setting.

        Raises
        ------
        ConfigError
            One line per invalid field, naming it with its allowed range.
        """
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            raise ConfigError(describe(cls, exc)) from None

    @property
    def local_k(self) -> int:
        """Clusters of each client's local k-means: ``k-prime``, or ``k`` where it is 0."""
        return getattr(self, "k_prime", 0) or self.k

    def settings(self) -> dict[str, int | float | str | bool]:
        """Kebab-case values of every field, as the model file records them."""
        return self.model_dump(by_alias=True)


class RoundOptions(Options):
    """The settings of the round-based methods that start from ``init``."""

    init: Init
    k_prime: KPrime

    @model_validator(mode="before")
    @classmethod
    def _private_start_under_dp(cls, data: Any) -> Any:
        """Under DP, unless ``init`` is given, the private start (the methods' default start,
        local k-means, would send each client's centroids). Private, not spread: measured at
        epsilon 1 (BENCHMARKS.md, "The start and the bounds under DP" and "Beside Google's"),
        the private start (a DP coreset of noisy cell means, 0.2 of the budget) wins on S1
        (1.64 against 2.00 x centralized), ties on G2 (1.05 against 1.04) and wins in 100-D
        (normalised objective 0.56 against 0.58 at k = 16, 0.13 against 0.33 at k = 64), all
        with 5 rounds; with one round after it, its default now, S1 1.17 x and k = 64 0.043."""
        if isinstance(data, dict) and "init" not in data and data.get("dp", "off") != "off":
            return {**data, "init": "private"}
        return data


def setting_defaults(model: type[BaseModel]) -> dict[str, Any]:
    """Every setting of ``model`` with its default, by run-config key."""
    return {kebab(name): field.default for name, field in model.model_fields.items()}


def changed_settings(settings: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``settings`` that are not their default (one without a default counts).

    A run's console summary and log show these: the other thirty-odd settings
    are the same for every run that did not touch them. ``algorithm`` is left
    out: both name the method first.
    """
    return {key: value for key, value in settings.items() if key != "algorithm"
            and (key not in defaults or value != defaults[key])}


def common_keys() -> tuple[str, ...]:
    """The run-config keys of the settings every method takes."""
    return tuple(kebab(name) for name in Options.model_fields)


def allowed_range(model: type[BaseModel], name: str) -> str:
    """Describe the values field ``name`` of ``model`` accepts, from its declared constraints."""
    field = model.model_fields[name]
    annotation = field.annotation
    choices = get_args(annotation)
    if get_origin(annotation) is Literal and choices:
        return "one of " + ", ".join(repr(c) for c in choices)
    if any(getattr(meta, "func", None) is _init_method_or_file for meta in field.metadata):
        return f"one of {', '.join(INIT_METHODS)} or the path of an array file"
    hint = field.json_schema_extra.get("allowed") if isinstance(field.json_schema_extra, dict) else None
    if hint:
        return str(hint)
    bounds = []
    for meta in field.metadata:
        for attr, symbol in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            bound = getattr(meta, attr, None)
            if bound is not None:
                bounds.append(f"{symbol} {bound}")
    kind = "integer" if annotation is int else "number" if annotation is float else "text"
    return f"{kind} {' and '.join(bounds)}" if bounds else kind


def describe(model: type[BaseModel], exc: ValidationError) -> str:
    """One line per error of ``exc``, naming the field, the value and what is allowed.

    A single error is one line after the heading; several go one per line below it.
    """
    lines = []
    for error in exc.errors():
        if not error["loc"]:  # a check across fields
            lines.append(error["msg"].removeprefix("Value error, "))
            continue
        name = str(error["loc"][0])
        field = name.replace("-", "_")
        if error["type"] == "extra_forbidden":
            known = ", ".join(sorted(kebab(f) for f in model.model_fields))
            lines.append(f"unknown setting '{name}' (known settings: {known})")
            continue
        allowed = allowed_range(model, field) if field in model.model_fields else ""
        reason = error["msg"].removeprefix("Value error, ")
        lines.append(
            f"invalid value for '{kebab(field)}': {error.get('input')!r} ({reason}; "
            f"allowed: {allowed})"
        )
    if len(lines) == 1:  # the usual case reads best as the one line of a command-line error
        return f"invalid run configuration: {lines[0]}"
    return "invalid run configuration:\n  " + "\n  ".join(lines)
