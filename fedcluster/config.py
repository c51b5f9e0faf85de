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

from typing import Literal

from pydantic import Field, field_validator

from .data.partition import SPLIT_FORMS, parse_split
from .methods import ALGORITHMS, METHODS
from .options import INIT_METHODS, ConfigError, Options, allowed_range

#: Where the clients' data is and where results go: not settings of the method.
DATA_OPTIONS = ("out-dir", "dataset", "split", "partitions-dir", "resume-from")

Algorithm = Literal[ALGORITHMS]  # type: ignore[valid-type]

#: Every method's options model, once each, in registry order (DWF and EWF share one).
_MODELS = tuple(dict.fromkeys(method.options for method in METHODS.values()))


class RunConfig(*reversed(_MODELS)):  # type: ignore[misc]
    """Settings of one federated clustering run (see each field's description)."""

    algorithm: Algorithm = Field("dwf", description="the method (see the sections below)")

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


__all__ = ["DATA_OPTIONS", "INIT_METHODS", "ConfigError", "RunConfig", "allowed_range"]
