"""What a method declares about itself: :class:`Method`.

Each folder of :mod:`fedcluster.methods` holds one method (or a pair that
shares everything but a switch, as DWF/EWF and FFCM avg1/avg2) and declares
it with one :class:`Method` per ``--algorithm`` name in its ``__init__.py``.
The registry (:data:`fedcluster.methods.METHODS`) lists them; the
configuration, the command line, the client's steps and the server's
strategies are derived from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..options import Options, kebab


@dataclass(frozen=True)
class Method:
    """One method.

    Attributes
    ----------
    name : str
        The ``--algorithm`` name.
    title : str
        What it is, in a few words.
    paper : str
        Where it comes from.
    strategy : type
        Its server side, a :class:`~fedcluster.strategies.ClusteringStrategy`
        built with ``strategy.from_config(config)``; its ``Options`` model
        declares the method's settings (:attr:`options`).
    steps : mapping
        Request kind -> client step, for the kinds only this method sends
        (the shared kinds are :data:`fedcluster.client.respond.STEPS`').
    array_steps : mapping
        Request kind -> client step ``(X, centroids, config, arrays)``, for
        the kinds whose requests carry named arrays (a network's weights,
        :attr:`fedcluster.messages.Request.arrays`).
    extra : str, optional
        The optional dependency group the method needs beyond the core
        package (``pip install "fedcluster[deep]"``).
    """

    name: str
    title: str
    paper: str
    strategy: type
    steps: Mapping[str, Callable[[Any, Any, dict], Any]] = field(default_factory=dict)
    array_steps: Mapping[str, Callable[[Any, Any, dict, Mapping], Any]] = field(default_factory=dict)
    extra: str | None = None

    @property
    def options(self) -> type[Options]:
        """The model of its settings: those of every method and its own."""
        return self.strategy.Options

    @property
    def own_keys(self) -> tuple[str, ...]:
        """Run-config keys of its own settings, besides those every method takes."""
        return tuple(kebab(name) for name in self.options.model_fields
                     if name not in Options.model_fields)
