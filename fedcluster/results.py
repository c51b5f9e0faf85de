"""What a run produces: its centroids, score and per-round history (no I/O, no Flower).

:mod:`fedcluster.server.artifacts` writes and reads these as ``model.pb`` and
``history.csv``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np

from ._version import __version__

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


PHASES = ("init", "train")

#: The ``score`` setting's values, and what the score then is (written beside it wherever
#: a score is shown).
SCORE_MEANING = {
    "exact": "mean squared distance from a point to its nearest centroid, over all clients' points",
    "client-mean": "mean over clients of each client's mean squared distance to the nearest centroid",
}


#: Types a setting may have; each maps to one case of the proto's SettingValue.
SettingScalar = int | float | str | bool


class ArtifactError(ValueError):
    """A model file is damaged, truncated, incomplete, or not a fedcluster model.

    Raised by :func:`read_model` with a one-line message that starts with the
    file's path and says what is wrong; the command line prints it as
    ``fedcluster: error: ...`` and exits with status 2.
    """


def _non_negative_int(name: str, value: Any) -> int:
    """Return ``value`` as a Python int (numpy integers accepted), checking >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    return int(value)


@dataclass
class RoundRecord:
    """One server round of one restart (mirrors ``fedcluster.v1.RoundRecord``).

    Attributes
    ----------
    restart : int
        Restart index, 0-based.
    round : int
        Server round number.
    movement : float
        How far the centroids moved in the round (NaN when not defined).
    score : float
        Federated score ``sum(SSE) / sum(n)`` reported by the round's clients
        for the centroids the round started from; NaN when unknown.
    clients_sampled, clients_answered, clients_rejected : int
        Clients asked; clients whose answers passed the checks and were used;
        answers rejected (error or malformed replies). A client silent until
        the round timeout counts in neither of the last two.
    participants : tuple of int
        Node ids of the clients whose answers were used.
    phase : {"init", "train"}
        Building the initial centroids, or updating them.
    epsilon : float
        Differential privacy: the epsilon spent by the run's rounds so far (at
        the run's ``dp-delta``); NaN without DP.
    rejections : tuple of str
        Why each rejected answer was rejected: ``"node <id>: <reason>"``, one
        per rejected client.
    """

    restart: int
    round: int
    movement: float
    score: float
    clients_sampled: int
    clients_answered: int
    clients_rejected: int
    participants: tuple[int, ...] = ()
    phase: str = "train"
    epsilon: float = float("nan")
    rejections: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"RoundRecord.phase must be one of {PHASES}, got {self.phase!r}")
        # The proto stores these as unsigned integers.
        for name in ("restart", "round", "clients_sampled", "clients_answered", "clients_rejected"):
            setattr(self, name, _non_negative_int(f"RoundRecord.{name}", getattr(self, name)))
        self.movement = float(self.movement)
        self.score = float(self.score)
        self.epsilon = float(self.epsilon)
        self.participants = tuple(int(p) for p in self.participants)
        self.rejections = tuple(str(reason) for reason in self.rejections)
        if any(p < 0 for p in self.participants):
            raise ValueError("RoundRecord.participants must be non-negative node ids")


@dataclass(eq=False)  # numpy fields make field-wise == ambiguous
class RunResult:
    """The outcome of a federated clustering run.

    Attributes
    ----------
    algorithm : str
        Algorithm name, e.g. ``"dwf"``.
    settings : dict of str to int, float, str or bool
        The algorithm's validated settings.
    centroids : numpy.ndarray
        Final centroids, ``float64``, shape ``(k, d)``.
    counts : numpy.ndarray
        Points (or weights) per centroid, ``float64``, shape ``(k,)``.
    score : float
        Final federated score ``sum(SSE) / sum(n)``; NaN if unknown.
    n_points : int
        Total points over the clients.
    rounds : int
        Training rounds run.
    converged : bool
        Whether the convergence tolerance was met.
    best_restart : int
        Index of the restart whose centroids were kept.
    history : list of RoundRecord
        Every round of every restart, in order.
    created : datetime.datetime
        Time zone-aware creation time, stored in UTC; defaults to now.
    version : str
        fedcluster version that produced the result.
    shift, scale : numpy.ndarray or None
        The federated standardisation the run clustered under (shape
        ``(d,)``): ``centroids`` are then in standardised units and
        :attr:`original_centroids` in the data's; both ``None`` for a run on
        the data as it is.
    stop_reason : str
        Why the run stopped before converging or reaching its round limit
        (a spent privacy budget); empty otherwise.
    arrays : dict of str to numpy.ndarray
        Named arrays of the model besides its centroids (DeepFeCA's network
        weights; the centroids are then of its features); empty for the
        clustering methods. Written to ``network.npz`` beside ``model.pb``.
    """

    algorithm: str
    settings: dict[str, SettingScalar]
    centroids: np.ndarray
    counts: np.ndarray
    score: float
    n_points: int
    rounds: int
    converged: bool
    best_restart: int
    history: list[RoundRecord] = field(default_factory=list)
    created: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    version: str = __version__
    shift: np.ndarray | None = None
    scale: np.ndarray | None = None
    stop_reason: str = ""
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.algorithm:
            raise ValueError("RunResult.algorithm must not be empty")
        centroids = np.array(self.centroids, dtype=np.float64)
        if centroids.ndim != 2 or 0 in centroids.shape:
            raise ValueError(
                f"RunResult.centroids must have shape (k, d) with k, d >= 1, got {centroids.shape}"
            )
        if not np.all(np.isfinite(centroids)):
            raise ValueError("RunResult.centroids contains NaN or infinite values")
        counts = np.array(self.counts, dtype=np.float64)
        if counts.shape != (len(centroids),):
            raise ValueError(
                f"RunResult.counts must have shape ({len(centroids)},), got {counts.shape}"
            )
        if self.created.tzinfo is None:
            raise ValueError(
                "RunResult.created must be time zone-aware (e.g. datetime.now(timezone.utc))"
            )
        for name in ("n_points", "rounds", "best_restart"):
            setattr(self, name, _non_negative_int(f"RunResult.{name}", getattr(self, name)))
        self.centroids = centroids
        self.counts = counts
        self.score = float(self.score)
        self.converged = bool(self.converged)
        self.created = self.created.astimezone(timezone.utc)
        self.settings = _checked_settings(self.settings)
        self.shift, self.scale = _checked_transform(self.shift, self.scale, centroids.shape[1])

    @property
    def original_centroids(self) -> np.ndarray:
        """The centroids in the data's own units (``centroids * scale + shift``)."""
        if self.shift is None:
            return self.centroids
        return self.centroids * self.scale + self.shift

    @property
    def n_clusters(self) -> int:
        """Number of centroids ``k``."""
        return int(self.centroids.shape[0])

    @property
    def dimension(self) -> int:
        """Number of features ``d``."""
        return int(self.centroids.shape[1])


def _checked_transform(shift: Any, scale: Any, d: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Both ``None``, or two finite float64 vectors of length ``d`` with every scale > 0."""
    if shift is None and scale is None:
        return None, None
    if shift is None or scale is None:
        raise ValueError("RunResult.shift and RunResult.scale go together: give both or neither")
    shift, scale = (np.array(v, dtype=np.float64) for v in (shift, scale))
    for name, value in (("shift", shift), ("scale", scale)):
        if value.shape != (d,):
            raise ValueError(f"RunResult.{name} must have shape ({d},), got {value.shape}")
        if not np.all(np.isfinite(value)):
            raise ValueError(f"RunResult.{name} contains NaN or infinite values")
    if np.any(scale <= 0):
        raise ValueError("RunResult.scale must be > 0 in every feature")
    return shift, scale


def _checked_settings(settings: dict[str, Any]) -> dict[str, SettingScalar]:
    """Return a copy with numpy scalars as Python scalars, rejecting other types."""
    checked: dict[str, SettingScalar] = {}
    for key, value in settings.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"setting names must be non-empty strings, got {key!r}")
        if isinstance(value, np.generic):
            value = value.item()
        if not isinstance(value, (bool, int, float, str)):
            raise ValueError(
                f"setting {key!r}: expected bool, int, float or str, got {type(value).__name__}"
            )
        if isinstance(value, int) and not _INT64_MIN <= value <= _INT64_MAX:
            raise ValueError(f"setting {key!r}: integer {value} does not fit in 64 bits")
        checked[key] = value
    return checked
