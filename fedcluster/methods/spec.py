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
from functools import cache
from importlib import import_module
from typing import Any

from ..messages import ReplyArray
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
    server : str
        Where its server side is, ``"module:Class"`` (a
        :class:`~fedcluster.strategies.ClusteringStrategy`, built by
        :func:`fedcluster.config.build_strategy`): imported only when asked for
        (:attr:`strategy`), so that a client, which needs only the steps,
        does not load the server side of every method.
    options : type
        The model of its settings (an :class:`~fedcluster.options.Options`
        subclass, the strategy's ``Options``): those of every method and its own.
    steps : mapping
        Request kind -> client step, for the kinds only this method sends
        (the shared kinds are :data:`fedcluster.client.respond.ROW_STEPS`').
    array_steps : mapping
        Request kind -> client step ``(X, centroids, config, arrays, steps)``,
        for the kinds whose requests carry named arrays (a network's weights,
        :attr:`fedcluster.messages.Request.arrays`); ``steps`` are the
        client's steps of a clustering of rows by kind, for a step that wraps
        one (the methods sit below the dispatcher and cannot import it).
    sum_form : str, optional
        The request kind of its step in sum form, where it has one (the
        per-cluster totals secure aggregation and DP work on): the Lloyd
        step's ``train.sums``, or the method's own (``ffcm-avg1``'s fuzzy sums).
        The methods that set it are the only ones DP and secure aggregation
        run for (:data:`fedcluster.methods.SUM_FORMS`).
    feature_clustering : bool
        Whether DeepFeCA's step (a) may run it to cluster the network's
        features (:data:`fedcluster.methods.FEATURE_CLUSTERINGS`): a one-round
        clustering of rows the paper compares (FeCA, or a baseline of its
        Table 3).
    reply_arrays : tuple of ReplyArray
        The arrays its replies carry besides the shared ones
        (:class:`~fedcluster.messages.ReplyArray`: a name and a shape rule
        such as ``("k",)``): its client step returns them in
        :attr:`ClientSummary.own <fedcluster.messages.ClientSummary.own>`,
        the codec carries them, and its server side checks them by giving
        these declarations to :func:`~fedcluster.messages.validate_reply`
        (``own=``; ``expect=`` names those a reply must hold). The privacy
        floor (:mod:`fedcluster.local.floor`) checks the shared arrays only:
        the method's client step is responsible for its own. An array with a
        ``"k"`` axis is per-cluster data and must say nothing of a cluster the
        floor withholds: that cluster's entries go back as 0 with its count 0
        (as :func:`~fedcluster.local.floor.withhold_small` does with the
        supports passed to it), and no entry may be a statistic of fewer than
        ``min-cluster-size`` rows. Under secure aggregation only the sum form
        travels, so they are not sent.
    extra : str, optional
        The optional dependency group the method needs beyond the core
        package (``pip install "fedcluster[deep]"``).
    """

    name: str
    title: str
    paper: str
    server: str
    options: type[Options]
    steps: Mapping[str, Callable[[Any, Any, dict], Any]] = field(default_factory=dict)
    array_steps: Mapping[str, Callable[[Any, Any, dict, Mapping, Mapping], Any]] = field(default_factory=dict)
    sum_form: str | None = None
    feature_clustering: bool = False
    reply_arrays: tuple[ReplyArray, ...] = ()
    extra: str | None = None

    def __post_init__(self) -> None:
        names = [array.name for array in self.reply_arrays]
        if len(set(names)) != len(names):
            raise ValueError(f"method {self.name}: its reply arrays repeat a name ({names})")

    @property
    def strategy(self) -> type:
        """Its server side (imported on first use)."""
        return _resolve(self.server)

    @property
    def own_keys(self) -> tuple[str, ...]:
        """Run-config keys of its own settings, besides those every method takes."""
        return tuple(kebab(name) for name in self.options.model_fields
                     if name not in Options.model_fields)


@cache
def _resolve(path: str) -> type:
    module, _, name = path.partition(":")
    return getattr(import_module(module), name)
