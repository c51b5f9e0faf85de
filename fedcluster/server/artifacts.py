"""Run results on disk: ``model.pb`` and ``history.csv``.

``model.pb`` is a serialized ``fedcluster.v1.ModelFile`` (see
``fedcluster/proto/cluster_model.proto``), readable from any language with
protobuf: an envelope holding the format name ``"fedcluster-model"``, the
format version (:data:`MODEL_FORMAT_VERSION`), a serialized
``fedcluster.v1.ClusterModel`` and the SHA-256 of those bytes. The checksum
detects damage (a truncated copy, flipped bits); it is not a signature, since
whoever can edit the file can recompute it. :func:`read_model` refuses a
damaged, truncated or incomplete file with an :class:`ArtifactError` naming
the file and the problem, and :func:`write_model` refuses to write a model
that :func:`read_model` would refuse (:func:`check_model` lists the rules).

``history.csv`` is the per-round record for plotting. How a result reads on
a terminal or as JSON is :mod:`.presentation`'s. Both files are replaced
atomically (:func:`~fedcluster.data.atomic.atomic_write`), so a reader never
sees a partial file; :func:`write_run` writes ``model.pb`` last. This module
does not depend on Flower.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import os
import re
import shlex
import sys
from dataclasses import asdict
from datetime import timezone
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from .. import _version
from fedcluster.data.atomic import atomic_write
from fedcluster.proto import cluster_model_pb2 as pb
from fedcluster.results import (PHASES, SCORE_MEANING, ArtifactError, RoundRecord, RunResult,
                                SettingScalar)

__all__ = [
    "HISTORY_COLUMNS",
    "HISTORY_FILE",
    "MODEL_FILE",
    "MODEL_FORMAT",
    "MODEL_FORMAT_VERSION",
    "PHASES",
    "SCORE_MEANING",
    "ArtifactError",
    "RoundRecord",
    "RunResult",
    "SettingScalar",
    "check_model",
    "decode_model",
    "encode_model",
    "from_proto",
    "read_model",
    "to_proto",
    "upgrade_model",
    "write_history_csv",
    "write_model",
    "write_run",
]

MODEL_FILE = "model.pb"
HISTORY_FILE = "history.csv"
#: The named arrays of a model that has them (DeepFeCA's network weights), as NumPy's .npz.
NETWORK_FILE = "network.npz"
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
    "epsilon",
)

#: The first field of every model file: tells a fedcluster model from other data.
MODEL_FORMAT = "fedcluster-model"
#: The layout of ``model.pb`` this fedcluster writes and reads.
MODEL_FORMAT_VERSION = 1
#: The layout of a model with a standardisation (``ClusterModel.shift``, ``scale``): a reader
#: older than those fields refuses it rather than take its standardised centroids for the data's.
STANDARDIZED_FORMAT_VERSION = 2
#: The bytes every model file starts with (field 1 of ``ModelFile``, serialized).
_HEADER = pb.ModelFile(format=MODEL_FORMAT).SerializeToString()
_SHA256_SIZE = hashlib.sha256().digest_size
#: Algorithms whose result may have a number of centroids other than ``k``:
#: FeCA keeps at most ``k`` groups; M-Avg has as many centroids as the largest
#: client set (up to ``k-prime``).
_K_MAY_DIFFER = frozenset({"feca", "mavg"})

PathLike = str | os.PathLike[str]


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
        history=[pb.RoundRecord(**_record_fields(record)) for record in result.history],
        n_points=result.n_points,
        stop_reason=result.stop_reason,
    )
    if result.shift is not None:
        msg.shift.extend(result.shift.tolist())
        msg.scale.extend(result.scale.tolist())
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
        If the message lacks a required field, its sizes disagree, or it
        breaks a rule of :func:`check_model`.
    """
    if not msg.fedcluster_version:
        raise ArtifactError("incomplete model: no fedcluster_version")
    if not msg.algorithm:
        raise ArtifactError("incomplete model: no algorithm")
    if not msg.HasField("created"):
        raise ArtifactError("incomplete model: no creation time")
    k, d = msg.n_clusters, msg.dimension
    if k < 1 or d < 1:
        raise ArtifactError(f"incomplete model: k = {k} clusters of dimension d = {d} "
                            f"(both must be >= 1)")
    if len(msg.centroids) != k * d:
        raise ArtifactError(f"model has {len(msg.centroids)} centroid values for k={k}, d={d} "
                            f"(expected k * d = {k * d})")
    if len(msg.counts) != k:
        raise ArtifactError(f"model has {len(msg.counts)} counts for k={k}")
    transform = {}
    if len(msg.shift) or len(msg.scale):
        if len(msg.shift) != d or len(msg.scale) != d:
            raise ArtifactError(f"model has a standardisation of {len(msg.shift)} shifts and "
                                f"{len(msg.scale)} scales for d={d}")
        transform = {"shift": np.array(msg.shift), "scale": np.array(msg.scale)}
    try:
        result = RunResult(
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
            stop_reason=msg.stop_reason,
            **transform,
        )
    except ArtifactError:
        raise
    except ValueError as exc:
        raise ArtifactError(f"invalid model content: {exc}") from exc
    check_model(result)
    return result


def check_model(result: RunResult) -> None:
    """Check what a model file must hold beyond :class:`RunResult`'s own checks.

    :func:`read_model` refuses, and :func:`write_model` does not write, a
    model that breaks one of these rules:

    - ``n_points`` > 0; ``counts`` finite and >= 0; ``score`` finite and
      >= 0, or NaN (unknown);
    - ``settings`` holds ``algorithm``, equal to the model's algorithm, and
      ``k``, an integer >= 1 equal to the number of centroids (FeCA and
      M-Avg may end with another number, at most ``max(k, k-prime)``); a
      ``score`` setting is one of :data:`SCORE_MEANING`; ``n-init``, if
      present, is an integer above every restart index;
    - every history row: restarts in order, ``movement`` and ``score``
      finite and >= 0 or NaN, answered + rejected <= sampled, and as many
      distinct participants as answers.

    Parameters
    ----------
    result : RunResult

    Raises
    ------
    ArtifactError
        Naming the first rule broken.
    """
    if result.n_points < 1:
        raise ArtifactError(f"invalid model: n_points is {result.n_points}; "
                            f"a model covers at least one point")
    if not np.all(np.isfinite(result.counts)) or np.any(result.counts < 0):
        raise ArtifactError("invalid model: counts must be finite and >= 0")
    if not _unknown_or_non_negative(result.score):
        raise ArtifactError(f"invalid model: score {result.score!r} must be >= 0 (or NaN)")
    _check_settings(result)
    _check_history(result)


def _unknown_or_non_negative(x: float) -> bool:
    return math.isnan(x) or (math.isfinite(x) and x >= 0)


def _int_setting(value: SettingScalar) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_settings(result: RunResult) -> None:
    settings = result.settings
    if not settings:
        raise ArtifactError("incomplete model: no settings")
    for key in ("algorithm", "k"):
        if key not in settings:
            raise ArtifactError(f"incomplete model: settings have no {key!r}")
    if settings["algorithm"] != result.algorithm:
        raise ArtifactError(f"inconsistent model: setting algorithm = {settings['algorithm']!r}, "
                            f"but the model's algorithm is {result.algorithm!r}")
    k = settings["k"]
    if not _int_setting(k) or k < 1:
        raise ArtifactError(f"invalid model: setting k = {k!r} is not an integer >= 1")
    if result.algorithm in _K_MAY_DIFFER:
        k_prime = settings.get("k-prime", 0)
        most = max(k, k_prime) if _int_setting(k_prime) else k
        if result.n_clusters > most:
            raise ArtifactError(f"inconsistent model: {result.n_clusters} centroids, more than "
                                f"{result.algorithm} gives for k = {k} (at most {most})")
    elif result.n_clusters != k:
        raise ArtifactError(f"inconsistent model: {result.n_clusters} centroids, "
                            f"but setting k = {k}")
    if "score" in settings and settings["score"] not in SCORE_MEANING:
        raise ArtifactError(f"invalid model: setting score = {settings['score']!r} is not one of "
                            f"{', '.join(map(repr, SCORE_MEANING))}")
    n_init = settings.get("n-init")
    if n_init is not None:
        if not _int_setting(n_init) or n_init < 1:
            raise ArtifactError(f"invalid model: setting n-init = {n_init!r} is not an integer >= 1")
        if result.best_restart >= n_init:
            raise ArtifactError(f"inconsistent model: best restart {result.best_restart}, "
                                f"but n-init = {n_init}")


def _check_history(result: RunResult) -> None:
    n_init = result.settings.get("n-init")
    previous = 0
    for i, r in enumerate(result.history):
        row = f"invalid model: history row {i} (restart {r.restart}, round {r.round})"
        if r.restart < previous:
            raise ArtifactError(f"{row}: restarts out of order (after restart {previous})")
        previous = r.restart
        if _int_setting(n_init) and r.restart >= n_init:
            raise ArtifactError(f"{row}: restart index beyond n-init = {n_init}")
        for name in ("movement", "score", "epsilon"):
            if not _unknown_or_non_negative(getattr(r, name)):
                raise ArtifactError(f"{row}: {name} {getattr(r, name)!r} must be >= 0 (or NaN)")
        if r.clients_answered + r.clients_rejected > r.clients_sampled:
            raise ArtifactError(f"{row}: {r.clients_answered} answered and {r.clients_rejected} "
                                f"rejected, more than the {r.clients_sampled} clients sampled")
        if len(set(r.participants)) != len(r.participants) or (
                len(r.participants) != r.clients_answered):
            raise ArtifactError(f"{row}: participants {list(r.participants)} are not "
                                f"{r.clients_answered} distinct node ids, one per answer")
        if len(r.rejections) > r.clients_rejected:
            raise ArtifactError(f"{row}: {len(r.rejections)} rejection reasons for "
                                f"{r.clients_rejected} rejected answers")


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


def _record_fields(record: RoundRecord) -> dict[str, Any]:
    """A history row's proto fields; ``epsilon`` only where DP counted it."""
    fields = asdict(record)
    if math.isnan(fields["epsilon"]):
        del fields["epsilon"]
    return fields


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
        epsilon=msg.epsilon if msg.HasField("epsilon") else math.nan,
        rejections=tuple(msg.rejections),
    )


# -- files ----------------------------------------------------------------------


def encode_model(result: RunResult) -> bytes:
    """Return the bytes of a model file: a ``ModelFile`` envelope around ``result``.

    Parameters
    ----------
    result : RunResult

    Returns
    -------
    bytes
        Deterministic: equal results give identical bytes.

    Raises
    ------
    ArtifactError
        If ``result`` breaks a rule of :func:`check_model`.
    """
    check_model(result)
    # Deterministic: map entries in a fixed order, so equal results give
    # byte-identical files.
    model = to_proto(result).SerializeToString(deterministic=True)
    envelope = pb.ModelFile(
        format=MODEL_FORMAT,
        format_version=MODEL_FORMAT_VERSION if result.shift is None else STANDARDIZED_FORMAT_VERSION,
        sha256=hashlib.sha256(model).digest(),
        model=model,
    )
    return envelope.SerializeToString(deterministic=True)


def decode_model(data: bytes, *, source: str = "model file") -> RunResult:
    """Check and decode the bytes of a model file (see :func:`read_model`).

    Parameters
    ----------
    data : bytes
        The content of a ``model.pb``.
    source : str, default "model file"
        What the bytes are (a path); every error message starts with it.

    Returns
    -------
    RunResult

    Raises
    ------
    ArtifactError
        If the bytes are empty, truncated or damaged (the checksum does not
        match), written in another format version or in the format before the
        envelope, not a fedcluster model, or an incomplete or inconsistent
        model (:func:`check_model`).
    """
    data = bytes(data)
    if not data:
        raise ArtifactError(f"{source}: empty file, not a fedcluster model")
    if not data.startswith(_HEADER):
        if _HEADER.startswith(data):
            raise ArtifactError(f"{source}: truncated model file: only {len(data)} bytes")
        raise ArtifactError(_not_a_model(data, source))
    damaged = f"{source}: damaged model file"
    envelope = pb.ModelFile()
    try:
        envelope.ParseFromString(data)
    except DecodeError:
        raise ArtifactError(
            f"{damaged}: its {len(data)} bytes do not decode (cut short, or bytes changed)"
        ) from None
    if envelope.format_version not in (MODEL_FORMAT_VERSION, STANDARDIZED_FORMAT_VERSION):
        if envelope.format_version == 0:
            raise ArtifactError(f"{damaged}: no format version (cut short?)")
        raise ArtifactError(
            f"{source}: model file format version {envelope.format_version}, which this "
            f"fedcluster ({_version.__version__}) cannot read (it reads versions "
            f"{MODEL_FORMAT_VERSION} and {STANDARDIZED_FORMAT_VERSION}): written by a newer "
            f"fedcluster, or damaged"
        )
    if not envelope.sha256:
        raise ArtifactError(f"{damaged}: no checksum (cut short?)")
    if len(envelope.sha256) != _SHA256_SIZE:
        raise ArtifactError(f"{damaged}: a checksum of {len(envelope.sha256)} bytes, "
                            f"not {_SHA256_SIZE}")
    if not envelope.model:
        raise ArtifactError(f"{damaged}: no model content (cut short?)")
    # Nothing else: no unknown field, no field twice, nothing appended.
    envelope.DiscardUnknownFields()
    if envelope.SerializeToString(deterministic=True) != data:
        raise ArtifactError(f"{damaged}: unexpected bytes in the file besides the model and "
                            f"its checksum")
    computed = hashlib.sha256(envelope.model).digest()
    if computed != envelope.sha256:
        raise ArtifactError(
            f"{damaged}: the SHA-256 of its content ({computed.hex()[:16]}...) does not match "
            f"the checksum stored with it ({envelope.sha256.hex()[:16]}...): the file was "
            f"changed after it was written; restore it from a copy or re-run the training"
        )
    msg = pb.ClusterModel()
    try:
        msg.ParseFromString(envelope.model)
    except DecodeError:
        raise ArtifactError(f"{source}: invalid model: its content does not decode as a "
                            f"ClusterModel, though its checksum matches") from None
    try:
        result = from_proto(msg)
    except ArtifactError as exc:
        raise ArtifactError(f"{source}: {exc}") from exc
    if (result.shift is not None) != (envelope.format_version == STANDARDIZED_FORMAT_VERSION):
        raise ArtifactError(f"{damaged}: format version {envelope.format_version} "
                            f"{'without' if result.shift is None else 'with'} a standardisation "
                            f"(version {STANDARDIZED_FORMAT_VERSION} is the one with it)")
    return result


def _not_a_model(data: bytes, source: str) -> str:
    """The message for bytes without the model header: a damaged header, a bare ClusterModel
    (the format before the envelope), or other data."""
    envelope = pb.ModelFile()
    try:
        envelope.ParseFromString(data)
    except DecodeError:
        envelope = None
    if envelope is not None and envelope.model and len(envelope.sha256) == _SHA256_SIZE:
        return (f"{source}: damaged model file: its header reads {envelope.format!r}, "
                f"not {MODEL_FORMAT!r}")
    legacy = pb.ClusterModel()
    try:
        legacy.ParseFromString(data)
    except DecodeError:
        legacy = None
    if legacy is not None and legacy.algorithm and re.fullmatch(
            r"\d+(\.\d+)+\S*", legacy.fedcluster_version):
        return (
            f"{source}: written by an older fedcluster ({legacy.fedcluster_version}), in the "
            f"model format without a format version or checksum, which this fedcluster "
            f"({_version.__version__}) does not read; re-run the training to write the model "
            f"again, or convert the file once, trusting its content, with "
            f"`python -m fedcluster.server.artifacts upgrade {shlex.quote(source)}`"
        )
    return (f"{source}: not a fedcluster model file (it does not start with the "
            f"{MODEL_FORMAT!r} header)")


def write_model(result: RunResult, path: PathLike) -> Path:
    """Write ``result`` as a model file (:func:`encode_model`), atomically.

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

    Raises
    ------
    ArtifactError
        If ``result`` breaks a rule of :func:`check_model`; nothing is
        written then.
    """
    return _write_bytes(encode_model(result), Path(path))


def _write_bytes(data: bytes, path: Path) -> Path:
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
                    repr(r.epsilon),
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
        ``{"model": path of model.pb, "history": path of history.csv}``, and
        ``"network"``: the path of network.npz, for a result with named arrays.

    Raises
    ------
    ArtifactError
        If ``result`` breaks a rule of :func:`check_model`; nothing is
        written then.

    Notes
    -----
    Each file is replaced atomically. The model is checked and encoded
    first, and ``model.pb`` is written last, so a new ``model.pb`` appears
    only once its ``history.csv`` is complete.
    """
    data = encode_model(result)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    history = write_history_csv(result.history, out / HISTORY_FILE)
    paths = {"history": history}
    if result.arrays:  # a network's weights (DeepFeCA): NumPy's own format, loadable anywhere
        buffer = io.BytesIO()
        np.savez(buffer, **result.arrays)
        paths["network"] = _write_bytes(buffer.getvalue(), out / NETWORK_FILE)
    return {"model": _write_bytes(data, out / MODEL_FILE), **paths}


def read_model(path: PathLike) -> RunResult:
    """Read a ``model.pb`` written by :func:`write_model`, checking it.

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
        If the file is empty, truncated or damaged (its SHA-256 does not
        match), in an unknown format version or in the format before the
        checksum, not a fedcluster model, or an incomplete or inconsistent
        model (:func:`check_model`). The message starts with ``path``.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"model file not found: {path}") from None
    return decode_model(data, source=str(path))


def upgrade_model(path: PathLike, out: PathLike | None = None) -> Path:
    """Rewrite a model file of the format before the checksum in the current format.

    The old file carries no checksum, so damage to it cannot be detected:
    its content is only checked as :func:`read_model` checks a model's
    content. Run it on files you trust.

    Parameters
    ----------
    path : str or os.PathLike
        A bare ``ClusterModel`` written by an older fedcluster.
    out : str or os.PathLike, optional
        Where to write; by default ``path`` itself is replaced (atomically).

    Returns
    -------
    pathlib.Path
        The file written.

    Raises
    ------
    ArtifactError
        If ``path`` is already in the current format, or is not a valid model.
    """
    path = Path(path)
    data = path.read_bytes()
    if data.startswith(_HEADER):
        raise ArtifactError(f"{path}: already in model file format {MODEL_FORMAT_VERSION}")
    msg = pb.ClusterModel()
    try:
        msg.ParseFromString(data)
        result = from_proto(msg)
    except (DecodeError, ArtifactError) as exc:
        raise ArtifactError(f"{path}: not a model of the older format ({exc})") from None
    return write_model(result, path if out is None else out)


def _main(argv: list[str]) -> int:
    """``python -m fedcluster.server.artifacts upgrade OLD [NEW]``."""
    if len(argv) not in (2, 3) or argv[0] != "upgrade":
        print("usage: python -m fedcluster.server.artifacts upgrade OLD_MODEL [NEW_MODEL]\n"
              "Rewrites a model.pb of the format before the checksum in the current format.",
              file=sys.stderr)
        return 2
    try:
        written = upgrade_model(argv[1], argv[2] if len(argv) == 3 else None)
    except (ArtifactError, OSError) as exc:
        print(f"fedcluster: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {written} (model file format {MODEL_FORMAT_VERSION})")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
