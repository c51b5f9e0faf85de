"""Where a run stands between two rounds: :class:`Progress`, what a checkpoint holds.

A strategy reports its progress after every round (and after every scored
restart) to the function given to :meth:`~.base.ClusteringStrategy.fit` as
``checkpoint``, and continues from a :class:`Progress` given as ``resume``.
The strategy's own state travels as named values (:meth:`state` /
:meth:`restore` of :class:`~.base.ClusteringStrategy` and of the methods that
keep state of their own), never as a pickle of the object: a checkpoint
then names what it holds, and a field that is missing or of the wrong shape
is refused by name (:class:`StateError`). How a checkpoint is stored is
:mod:`fedcluster.server.checkpoint`'s business; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..results import RoundRecord, RunResult


class StateError(ValueError):
    """A strategy state that cannot be restored; the message names the entry and the problem."""


@dataclass
class Progress:
    """A run's progress after a round, or after a scored restart.

    Attributes
    ----------
    restart : int
        The restart in progress; after the last restart is scored, ``n_init``.
    round : int or None
        Rounds of ``restart`` done (0: initialised, no round yet); None when
        ``restart`` has not begun (it starts afresh from its seed).
    centroids : numpy.ndarray or None
        The restart's centroids after ``round`` (None when it has not begun).
    converged : bool
        Whether the restart's rounds are over before the round limit (its
        next step is the score).
    history : list of RoundRecord
        Every round of every restart so far.
    best : RunResult or None
        The best scored restart so far (None before the first is scored).
    scores : list of float
        The score of each finished restart, in order (NaN: none could be scored).
    state : dict
        The strategy's :meth:`~.base.ClusteringStrategy.state`.
    """

    restart: int
    round: int | None
    centroids: np.ndarray | None
    converged: bool
    history: list[RoundRecord]
    best: RunResult | None
    scores: list[float] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)


def state_entry(state: Mapping[str, Any], name: str) -> Any:
    """``state[name]``, or a :class:`StateError` naming the missing entry."""
    if name not in state:
        raise StateError(f"strategy state has no {name!r} (known: {', '.join(sorted(state))})")
    return state[name]


def state_array(state: Mapping[str, Any], name: str, shape: tuple[int | None, ...] | None = None,
                dtype: type = np.float64, *, optional: bool = False) -> np.ndarray | None:
    """``state[name]`` as an array of ``dtype`` (and ``shape``, None: any length), checked.

    With ``optional``, a missing entry or None gives None.
    """
    value = state.get(name) if optional else state_entry(state, name)
    if value is None:
        if optional:
            return None
        raise StateError(f"strategy state {name!r} is empty")
    array = np.asarray(value)
    if array.dtype != np.dtype(dtype):
        raise StateError(f"strategy state {name!r} has dtype {array.dtype}, not {np.dtype(dtype)}")
    if shape is not None and (array.ndim != len(shape) or any(
            want is not None and got != want for got, want in zip(array.shape, shape))):
        raise StateError(f"strategy state {name!r} has shape {array.shape}, expected "
                         f"{tuple('any' if s is None else s for s in shape)}")
    return np.array(array, dtype=dtype)


def state_generator(state: Mapping[str, Any], name: str) -> np.random.Generator:
    """A NumPy generator set to the bit generator state ``state[name]``, checked."""
    generator = np.random.default_rng()
    try:
        generator.bit_generator.state = state_entry(state, name)
    except (TypeError, ValueError, KeyError) as exc:
        raise StateError(f"strategy state {name!r} is not the state of a "
                         f"{type(generator.bit_generator).__name__} generator ({exc})") from None
    return generator


def node_map(state: Mapping[str, Any], name: str) -> dict[int, int]:
    """A node id -> integer map that :func:`node_pairs` stored, checked."""
    pairs = state_entry(state, name)
    try:
        return {int(node): int(value) for node, value in pairs}
    except (TypeError, ValueError):
        raise StateError(f"strategy state {name!r} is not a list of [node id, integer] pairs") \
            from None


def node_pairs(mapping: Mapping[int, int]) -> list[list[int]]:
    """A node id -> integer map as sorted [node, value] pairs (JSON has no integer keys)."""
    return [[int(node), int(value)] for node, value in sorted(mapping.items())]
