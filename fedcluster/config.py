"""Validated run configuration.

One :class:`RunConfig` describes a federated clustering run. It is built from
Flower's run config (``[tool.flwr.app.config]`` in ``pyproject.toml``, overridden
with ``flwr run . -c 'k=5'``), from the command line, or from Python. Keys use
Flower's kebab-case (``local-steps``); Python code uses the snake_case
attribute names. Every invalid value raises :class:`ConfigError` with the
field's name, the value and the allowed range. Each field's description is
its help text on the command line; :mod:`fedcluster.methods` says which
method uses which field.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .data.partition import SPLIT_FORMS, parse_split
from .methods import ALGORITHMS, COMMON_OPTIONS, METHODS

INIT_METHODS = ("local-kmeans", "kfed", "random")
#: Other names of ``min-cluster-size`` (FKM's paper calls p the privacy threshold).
PRIVACY_THRESHOLD_ALIASES = ("privacy-threshold", "privacy_threshold")
#: Where the clients' data is and where results go: not settings of the method.
DATA_OPTIONS = ("out-dir", "dataset", "split", "partitions-dir")

Algorithm = Literal[ALGORITHMS]  # type: ignore[valid-type]


class ConfigError(ValueError):
    """An invalid run configuration; the message names each bad field."""


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class RunConfig(BaseModel):
    """Settings of one federated clustering run (see each field's description)."""

    model_config = ConfigDict(
        alias_generator=_kebab, populate_by_name=True, extra="forbid", frozen=True,
        allow_inf_nan=False,
    )

    # -- every method ---------------------------------------------------------------
    algorithm: Algorithm = Field("dwf", description="the method (see the sections below)")
    k: int = Field(15, ge=1, description="number of clusters")
    num_server_rounds: int = Field(
        100, ge=1, description="largest number of rounds per restart (one-shot methods: ignored)")
    tol: float = Field(
        1e-4, ge=0.0, description="stop when the centroids move less than this (0: run every round)")
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
    min_cluster_size: int = Field(
        2, ge=2, description="privacy floor p: no message leaving a client holds a centroid, sum "
        "or radius of fewer points (Garst's privacy threshold; --privacy-threshold is an alias)")
    min_answer_fraction: float = Field(
        0.5, gt=0.0, le=1.0, description="share of the clients asked in a round that must answer "
        "usably; below it the run fails")
    chunk_size: int = Field(
        4096, ge=1, description="rows per block in the clients' distance computations")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="where clients compute: CuPy on a GPU (cuda), NumPy (cpu), or "
        "CUDA when CuPy sees a GPU (auto)")
    standardize: bool = Field(
        False, description="standardise every feature first, by the mean and standard deviation "
        "the clients' moments give (no row leaves); the model holds the transform")

    # -- some methods (see fedcluster.methods) ---------------------------------------
    init: str = Field(
        "local-kmeans", description="initial centroids: local-kmeans (server k-means over the "
        "clients' local k-means), kfed (k-FED), random (uniform in the federated bounding box), "
        "or a (k, d) array file")
    k_prime: int = Field(
        0, ge=0, description="clusters of each client's local k-means (k-FED, FeCA, M-Avg, "
        "--init kfed); 0 means k")
    lr: float = Field(
        1.0, gt=0.0, le=1.0, description="server learning rate (eta of the DWF paper; alpha of "
        "Triebe & Rajagopal, whose alpha = (1, 0.5) is --lr 1 --momentum 0.5)")
    momentum: float = Field(
        0.0, ge=0.0, lt=1.0, description="server momentum (mu of DWF eq. 6; rho, the second "
        "entry of Triebe & Rajagopal's alpha)")
    max_client_share: float = Field(
        1.0, gt=0.0, le=1.0, description="dwf/ewf: largest share of a cluster's weight one client "
        "may hold (weights clipped by water-filling; 1: no cap); with fewer than 1/share clients "
        "holding a cluster, they get equal weights")
    aggregation: Literal["mean", "trimmed-mean", "median"] = Field(
        "mean", description="dwf/ewf: the paper's weighted mean, or a coordinate-wise trimmed mean "
        "or median of the local centroids over the clients holding each cluster (unweighted; "
        "bounds one client's influence)")
    trim_fraction: float = Field(
        0.2, ge=0.0, lt=0.5, description="share of a cluster's holders cut from each end by "
        "--aggregation trimmed-mean")
    local_steps: int = Field(
        1, ge=1, description="local Lloyd steps per round (DWF max_local) or local epochs (E)")
    fuzzifier: float = Field(2.0, gt=1.0, description="fuzzifier m of fuzzy c-means")
    radius: Literal["algorithm4", "theoretical"] = Field(
        "algorithm4", description="FeCA's radius rule: Algorithm 4 (empirical) or Algorithm 3")
    client_lr: float = Field(
        1.0, gt=0.0, le=1.0, description="client learning rate beta of mini-batch updates")
    batch_size: int = Field(
        0, ge=0, description="local mini-batch size B; 0 means the whole local set")
    reseed_fraction: float = Field(
        0.01, ge=0.0, lt=1.0, description="re-seed a cluster that holds less than this fraction "
        "of the mean cluster size (the round's points / k) for --reseed-patience consecutive "
        "rounds (0: never)")
    reseed_patience: int = Field(
        20, ge=1, description="consecutive small rounds before a cluster is re-seeded")

    # -- where data and results are ----------------------------------------------------
    out_dir: str = Field("results", description="directory for model.pb and history.csv")
    dataset: str = Field(
        "s1", description="simulation only: dataset each client partitions (a deployment's "
        "clients read node_config['data-path'])")
    split: str = Field("iid", description="simulation only: how the dataset is split")
    partitions_dir: str = Field(
        "", description="simulation only: directory of partition files (fedcluster partition)")

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

    @field_validator("init")
    @classmethod
    def _init_method_or_file(cls, value: str) -> str:
        if value in INIT_METHODS:
            return value
        if not Path(value).is_file():
            raise ValueError(
                f"must be one of {', '.join(INIT_METHODS)} or an existing array file"
            )
        return value

    @field_validator("split")
    @classmethod
    def _valid_split(cls, value: str) -> str:
        parse_split(value)
        return value

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> RunConfig:
        """Build a configuration from kebab- or snake-case keys.

        Raises
        ------
        ConfigError
            One line per invalid field, naming it with its allowed range.
        """
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            raise ConfigError(_describe(exc)) from None

    def to_flower(self) -> dict[str, int | float | str | bool]:
        """Kebab-case values for Flower's run config."""
        return self.model_dump(by_alias=True)

    def settings(self) -> dict[str, int | float | str | bool]:
        """The method's settings, as they are recorded in the model file."""
        wanted = set(COMMON_OPTIONS) | set(METHODS[self.algorithm].options)
        return {k: v for k, v in self.to_flower().items() if k in wanted}


def allowed_range(name: str) -> str:
    """Describe the values a field accepts, from its declared constraints."""
    field = RunConfig.model_fields[name]
    annotation = field.annotation
    choices = getattr(annotation, "__args__", None)
    if getattr(annotation, "__origin__", None) is Literal and choices:
        return "one of " + ", ".join(repr(c) for c in choices)
    if name == "init":
        return f"one of {', '.join(INIT_METHODS)} or the path of an array file"
    if name == "split":
        return SPLIT_FORMS
    bounds = []
    for meta in field.metadata:
        for attr, symbol in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            bound = getattr(meta, attr, None)
            if bound is not None:
                bounds.append(f"{symbol} {bound}")
    kind = "integer" if annotation is int else "number"
    return f"{kind} {' and '.join(bounds)}" if bounds else kind


def _describe(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        if not error["loc"]:  # a check across fields
            lines.append(error["msg"].removeprefix("Value error, "))
            continue
        name = str(error["loc"][0])
        field = name.replace("-", "_")
        if error["type"] == "extra_forbidden":
            known = ", ".join(sorted(_kebab(f) for f in RunConfig.model_fields))
            lines.append(f"unknown setting '{name}' (known settings: {known})")
            continue
        allowed = allowed_range(field) if field in RunConfig.model_fields else ""
        reason = error["msg"].removeprefix("Value error, ")
        lines.append(
            f"invalid value for '{_kebab(field)}': {error.get('input')!r} ({reason}; "
            f"allowed: {allowed})"
        )
    return "invalid run configuration:\n  " + "\n  ".join(lines)
