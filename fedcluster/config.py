"""Validated run configuration: :class:`RunConfig`, every method's settings in one model.

One :class:`RunConfig` describes a federated clustering run. It is built from
Flower's run config (``[tool.flwr.app.config]`` in ``pyproject.toml``, overridden
with ``flwr run . -c 'k=5'``), from the command line, or from Python. It is the
union of the methods' options models (:mod:`fedcluster.options` and each
method's ``options.py``), derived from the registry
(:data:`fedcluster.methods.METHODS`), plus where the data and the results are;
so each field, its range, default and description (the command line's help
text) is declared once. Keys use Flower's kebab-case (``local-steps``); Python
code uses the snake_case attribute names. Every invalid value raises
:class:`ConfigError` with the field's name, the value and the allowed range.
:meth:`RunConfig.method_options` gives the chosen method its own model
without validating again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator, model_validator

from .data.partition import SPLIT_FORMS, parse_split
from .methods import ALGORITHMS, FEATURE_CLUSTERINGS, METHODS
from .options import INIT_METHODS, ConfigError, Options, allowed_range

if TYPE_CHECKING:
    from .strategies import ClusteringStrategy

#: Where the clients' data is and where results go: not settings of the method.
DATA_OPTIONS = ("out-dir", "dataset", "split", "partitions-dir", "resume-from")
#: Settings of the run around the method (:mod:`fedcluster.preprocessing`); the model
#: file records their effect (the transform), not the method's settings.
RUN_OPTIONS = ("standardize",)

Algorithm = Literal[ALGORITHMS]  # type: ignore[valid-type]

#: Every method's options model, once each, in registry order (DWF and EWF share one).
_MODELS = tuple(dict.fromkeys(method.options for method in METHODS.values()))


def _declared(name: str):
    """Field ``name`` as the method's model that declares it declares it (its default, description)."""
    return next(model.model_fields[name] for model in _MODELS if name in model.model_fields)


class RunConfig(*reversed(_MODELS)):  # type: ignore[misc]
    """Settings of one federated clustering run (see each field's description)."""

    algorithm: Algorithm = Field("dwf", description="the method (see the sections below)")
    # The registry's choices (Method.feature_clustering), so that the command line offers them
    # and an error names them; DeepFeCA's model checks the same list.
    feature_clustering: Literal[FEATURE_CLUSTERINGS] = _declared("feature_clustering")  # type: ignore[valid-type]
    standardize: bool = Field(
        False, description="standardise every feature first, by the mean and standard deviation "
        "the clients' moments give (no row leaves); the model holds the transform")

    # -- where data and results are ----------------------------------------------------
    out_dir: str = Field("results", description="directory for model.pb and history.csv")
    dataset: str = Field(
        "s1", description="simulation only: dataset each client partitions (a deployment's "
        "clients read node_config['data-path'])")
    split: str = Field("iid", description="simulation only: how the dataset is split",
                       json_schema_extra={"allowed": SPLIT_FORMS})
    partitions_dir: str = Field(
        "", description="simulation only: directory of partition files (fedcluster partition)")

    resume_from: str = Field(
        "", description="continue the run whose checkpoint is in this directory (its out-dir, "
        "where the ServerApp runs) or file, with the settings that began it; empty: start afresh")

    @field_validator("split")
    @classmethod
    def _valid_split(cls, value: str) -> str:
        parse_split(value)
        return value

    @model_validator(mode="after")
    def _standardize_alone(self) -> RunConfig:
        # A secure-aggregation stage re-asks its inner step without the transform, and
        # DP's data bounds are declared in the data's units: neither composes yet.
        if self.standardize and (self.dp != "off" or self.secure_aggregation):
            raise ValueError("standardize does not combine with dp or secure-aggregation yet; "
                             "standardise the data before the run instead")
        # DeepFeCA's centroids are of the network's features, not of the standardised rows.
        if self.standardize and self.algorithm == "deepfeca":
            raise ValueError("standardize does not combine with deepfeca (its centroids are "
                             "of the network's features); standardise the data before the run")
        return self

    def to_flower(self) -> dict[str, int | float | str | bool]:
        """Kebab-case values for Flower's run config."""
        return self.model_dump(by_alias=True)

    def method_options(self) -> Options:
        """The chosen method's own options model, from these already validated values."""
        model = METHODS[self.algorithm].options
        return model.model_construct(**{name: getattr(self, name) for name in model.model_fields})

    def settings(self) -> dict[str, int | float | str | bool]:
        """The method's settings, as they are recorded in the model file."""
        return self.method_options().settings()


def build_strategy(config: RunConfig) -> ClusteringStrategy:
    """The server side of ``config.algorithm``, with the configured (already validated) settings."""
    return METHODS[config.algorithm].strategy(options=config.method_options())


def flower_defaults() -> str:
    """The ``[tool.flwr.app.config]`` block of ``pyproject.toml``: every setting's default.

    Flower accepts a ``flwr run -c`` override only for a key the block lists,
    so the block lists every field; a new setting's line is printed by
    ``python -c "from fedcluster.config import flower_defaults as f; print(f())"``,
    and ``tests/test_config.py`` keeps the file equal to it.
    """
    lines = ["[tool.flwr.app.config]"]
    for key, value in RunConfig().to_flower().items():
        text = (f'"{value}"' if isinstance(value, str) else str(value).lower()
                if isinstance(value, bool) else repr(value))
        lines.append(f"{key} = {text}")
    return "\n".join(lines)


__all__ = ["DATA_OPTIONS", "INIT_METHODS", "RUN_OPTIONS", "ConfigError", "RunConfig", "allowed_range",
           "build_strategy"]
