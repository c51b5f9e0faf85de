"""Run results on disk: ``model.pb`` and ``history.csv``.

``model.pb`` is a serialized ``fedcluster.v1.ClusterModel`` (see
``fedcluster/proto/cluster_model.proto``), readable from any language with
protobuf; ``history.csv`` is the per-round record for plotting. Both files
are replaced atomically, so a reader never sees a partial result. This module
does not depend on Flower.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

import fedcluster
from fedcluster.data.atomic import atomic_write
from fedcluster.proto import cluster_model_pb2 as pb

__all__ = [
    "HISTORY_COLUMNS",
    "HISTORY_FILE",
    "MODEL_FILE",
    "PHASES",
    "ArtifactError",
    "RoundRecord",
    "RunResult",
    "SettingScalar",
    "format_result",
    "from_proto",
    "read_model",
    "result_to_dict",
    "to_proto",
    "write_history_csv",
    "write_model",
    "write_run",
]

MODEL_FILE = "model.pb"
HISTORY_FILE = "history.csv"
HISTORY_COLUMNS = (
    "restart",
    "phase",
    "round",
    "movement",
    "score",
    "clients_sampled",
    "clients_answered",
    "clients_rejected",
    "participants",
)
PHASES = ("init", "train")

#: Types a setting may have; each maps to one case of the proto's SettingValue.
SettingScalar = int | float | str | bool
PathLike = str | os.PathLike[str]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class ArtifactError(ValueError):
    """A model file is corrupt, or is not a fedcluster model."""


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

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"RoundRecord.phase must be one of {PHASES}, got {self.phase!r}")
        # The proto stores these as unsigned integers.
        for name in ("restart", "round", "clients_sampled", "clients_answered", "clients_rejected"):
            setattr(self, name, _non_negative_int(f"RoundRecord.{name}", getattr(self, name)))
        self.movement = float(self.movement)
        self.score = float(self.score)
        self.participants = tuple(int(p) for p in self.participants)
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
    version: str = fedcluster.__version__

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

    @property
    def n_clusters(self) -> int:
        """Number of centroids ``k``."""
        return int(self.centroids.shape[0])

    @property
    def dimension(self) -> int:
        """Number of features ``d``."""
        return int(self.centroids.shape[1])


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


# -- protobuf -------------------------------------------------------------------


def to_proto(result: RunResult) -> pb.ClusterModel:
    """Convert a result to a ``fedcluster.v1.ClusterModel`` message.

    Parameters
    ----------
    result : RunResult

    Returns
    -------
    ClusterModel
        Carries every value of ``result`` exactly (doubles stay doubles).
    """
    msg = pb.ClusterModel(
        fedcluster_version=result.version,
        algorithm=result.algorithm,
        n_clusters=result.n_clusters,
        dimension=result.dimension,
        centroids=result.centroids.ravel().tolist(),  # row-major
        counts=result.counts.tolist(),
        score=result.score,
        rounds=result.rounds,
        converged=result.converged,
        best_restart=result.best_restart,
        history=[pb.RoundRecord(**asdict(record)) for record in result.history],
        n_points=result.n_points,
    )
    msg.created.FromDatetime(result.created)
    for key, value in result.settings.items():
        msg.settings[key].CopyFrom(_setting_to_proto(value))
    return msg


def from_proto(msg: pb.ClusterModel) -> RunResult:
    """Convert a ``fedcluster.v1.ClusterModel`` message to a result.

    Parameters
    ----------
    msg : ClusterModel

    Returns
    -------
    RunResult

    Raises
    ------
    ArtifactError
        If the message lacks a required field or its sizes disagree.
    """
    if not msg.fedcluster_version or not msg.algorithm:
        raise ArtifactError("not a fedcluster model: no version or algorithm")
    if not msg.HasField("created"):
        raise ArtifactError("model has no creation time")
    k, d = msg.n_clusters, msg.dimension
    if k < 1 or d < 1 or len(msg.centroids) != k * d:
        raise ArtifactError(f"model has {len(msg.centroids)} centroid values for k={k}, d={d}")
    if len(msg.counts) != k:
        raise ArtifactError(f"model has {len(msg.counts)} counts for k={k}")
    try:
        return RunResult(
            algorithm=msg.algorithm,
            settings={key: _setting_from_proto(key, value) for key, value in msg.settings.items()},
            centroids=np.array(msg.centroids, dtype=np.float64).reshape(k, d),
            counts=np.array(msg.counts, dtype=np.float64),
            score=msg.score,
            n_points=msg.n_points,
            rounds=msg.rounds,
            converged=msg.converged,
            best_restart=msg.best_restart,
            history=[_record_from_proto(r) for r in msg.history],
            created=msg.created.ToDatetime(tzinfo=timezone.utc),
            version=msg.fedcluster_version,
        )
    except ArtifactError:
        raise
    except ValueError as exc:
        raise ArtifactError(f"invalid model content: {exc}") from exc


def _setting_to_proto(value: SettingScalar) -> pb.SettingValue:
    # bool first: it is a subclass of int.
    if isinstance(value, bool):
        return pb.SettingValue(bool_value=value)
    if isinstance(value, int):
        return pb.SettingValue(int_value=value)
    if isinstance(value, float):
        return pb.SettingValue(double_value=value)
    return pb.SettingValue(string_value=value)


def _setting_from_proto(key: str, value: pb.SettingValue) -> SettingScalar:
    kind = value.WhichOneof("kind")
    if kind is None:
        raise ArtifactError(f"setting {key!r} has no value")
    result: SettingScalar = getattr(value, kind)
    return result


def _record_from_proto(msg: pb.RoundRecord) -> RoundRecord:
    return RoundRecord(
        restart=msg.restart,
        round=msg.round,
        movement=msg.movement,
        score=msg.score,
        clients_sampled=msg.clients_sampled,
        clients_answered=msg.clients_answered,
        clients_rejected=msg.clients_rejected,
        participants=tuple(msg.participants),
        phase=msg.phase,
    )


# -- files ----------------------------------------------------------------------


def write_model(result: RunResult, path: PathLike) -> Path:
    """Write ``result`` as a serialized ``ClusterModel``, atomically.

    Parameters
    ----------
    result : RunResult
    path : str or os.PathLike
        Target file; its directory must exist. An existing file is replaced
        only once the new one is complete.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    path = Path(path)
    # Deterministic: map entries in a fixed order, so equal results give
    # byte-identical files.
    data = to_proto(result).SerializeToString(deterministic=True)
    with atomic_write(path, "wb") as fh:
        fh.write(data)
    return path


def write_history_csv(history: list[RoundRecord], path: PathLike) -> Path:
    """Write the round history as CSV, atomically.

    Columns are :data:`HISTORY_COLUMNS`; floats are written exactly (``nan``
    when unknown) and ``participants`` as ``;``-joined node ids.

    Parameters
    ----------
    history : list of RoundRecord
    path : str or os.PathLike
        Target file; its directory must exist.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    path = Path(path)
    with atomic_write(path, "w") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(HISTORY_COLUMNS)
        for r in history:
            writer.writerow(
                [
                    r.restart,
                    r.phase,
                    r.round,
                    repr(r.movement),
                    repr(r.score),
                    r.clients_sampled,
                    r.clients_answered,
                    r.clients_rejected,
                    ";".join(str(p) for p in r.participants),
                ]
            )
    return path


def write_run(result: RunResult, out_dir: PathLike) -> dict[str, Path]:
    """Write ``model.pb`` and ``history.csv`` into ``out_dir``.

    Parameters
    ----------
    result : RunResult
    out_dir : str or os.PathLike
        Created (with parents) if missing.

    Returns
    -------
    dict
        ``{"model": path of model.pb, "history": path of history.csv}``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return {
        "model": write_model(result, out / MODEL_FILE),
        "history": write_history_csv(result.history, out / HISTORY_FILE),
    }


def read_model(path: PathLike) -> RunResult:
    """Read a ``model.pb`` written by :func:`write_model`.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    RunResult

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ArtifactError
        If the file is empty, cannot be decoded, or is not a fedcluster model.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"model file not found: {path}") from None
    if not data:
        raise ArtifactError(f"{path}: empty file, not a fedcluster model")
    msg = pb.ClusterModel()
    try:
        msg.ParseFromString(data)
    except DecodeError as exc:
        raise ArtifactError(f"{path}: not a fedcluster model (cannot decode: {exc})") from exc
    try:
        return from_proto(msg)
    except ArtifactError as exc:
        raise ArtifactError(f"{path}: {exc}") from exc


# -- presentation -----------------------------------------------------------------


def _json_float(x: float) -> float | None:
    """JSON has no NaN or infinity; represent them as null."""
    return x if math.isfinite(x) else None


def result_to_dict(result: RunResult, *, with_centroids: bool = True) -> dict[str, Any]:
    """Return a JSON-serialisable summary of ``result``.

    Parameters
    ----------
    result : RunResult
    with_centroids : bool, default True
        Include ``centroids`` as a list of ``k`` rows.

    Returns
    -------
    dict
        Plain Python values only; non-finite floats become ``None``, the
        creation time an ISO 8601 string.
    """
    out: dict[str, Any] = {
        "fedcluster_version": result.version,
        "algorithm": result.algorithm,
        "created": result.created.isoformat(),
        "n_clusters": result.n_clusters,
        "dimension": result.dimension,
        "n_points": result.n_points,
        "rounds": result.rounds,
        "converged": result.converged,
        "best_restart": result.best_restart,
        "score": _json_float(result.score),
        "settings": {
            key: _json_float(value) if isinstance(value, float) else value
            for key, value in result.settings.items()
        },
        "counts": [_json_float(c) for c in result.counts.tolist()],
    }
    if with_centroids:
        out["centroids"] = [[_json_float(v) for v in row] for row in result.centroids.tolist()]
    out["history"] = [
        {
            **asdict(r),
            "movement": _json_float(r.movement),
            "score": _json_float(r.score),
            "participants": list(r.participants),
        }
        for r in result.history
    ]
    return out


#: What the ``score`` of a model means, by the ``score`` setting that chose the restart.
SCORE_MEANING = {
    "exact": "mean squared distance from a point to its nearest centroid, over all clients' points",
    "client-mean": "mean over clients of each client's mean squared distance to the nearest centroid",
}


def format_result(result: RunResult, *, last_rounds: int = 5) -> str:
    """Return a human-readable multi-line summary, as ``fedcluster inspect`` prints.

    Parameters
    ----------
    result : RunResult
    last_rounds : int, default 5
        How many of the last history rows to show.

    Returns
    -------
    str
        Without a trailing newline.
    """
    lines = [
        f"fedcluster model (written by fedcluster {result.version})",
        f"  algorithm      {result.algorithm}",
        f"  created        {result.created:%Y-%m-%d %H:%M:%S} UTC",
        f"  clusters (k)   {result.n_clusters}",
        f"  dimension (d)  {result.dimension}",
        f"  points         {result.n_points}",
        f"  rounds         {result.rounds}",
        f"  converged      {'yes' if result.converged else 'no'}",
        f"  best restart   {result.best_restart}",
        f"  score          {result.score:.6g}  ({SCORE_MEANING[result.settings.get('score', 'exact')]})",
        "settings",
    ]
    settings = sorted(result.settings.items())
    lines += [f"  {key} = {value!r}" for key, value in settings] or ["  (none)"]

    total = float(result.counts.sum())
    lines.append("cluster counts")
    for j, count in enumerate(result.counts.tolist()):
        share = f"{100 * count / total:5.1f}%" if total > 0 else "     -"
        lines.append(f"  {j:>4}  {count:>12.6g}  {share}")

    shown = result.history[-last_rounds:] if last_rounds > 0 else []
    lines.append(f"history (last {len(shown)} of {len(result.history)} rounds)")
    if shown:
        lines.append(
            f"  {'restart':>7} {'phase':<5} {'round':>5} {'movement':>12} {'score':>12}"
            f" {'sampled':>7} {'answered':>8} {'rejected':>8}"
        )
        lines += [
            f"  {r.restart:>7} {r.phase:<5} {r.round:>5} {r.movement:>12.6g} {r.score:>12.6g}"
            f" {r.clients_sampled:>7} {r.clients_answered:>8} {r.clients_rejected:>8}"
            for r in shown
        ]
    return "\n".join(lines)
