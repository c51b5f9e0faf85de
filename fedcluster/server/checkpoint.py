"""Checkpoints: ``checkpoint.json``, everything a run needs to continue after its coordinator died.

The ServerApp replaces ``checkpoint.json`` in the run's ``out-dir`` after the
initialisation and every round of every restart, and after every scored
restart (:class:`CheckpointWriter`, given to
:meth:`~fedcluster.strategies.ClusteringStrategy.fit`); a run started with
``resume-from`` set to that directory (``fedcluster submit --resume DIR``,
``fedcluster simulate --resume DIR``) reads it back (:func:`read_checkpoint`)
and continues from it (:func:`resume_point` checks that it belongs to the
same run first).

The file is JSON, so that an operator can read where a run stood: an
envelope ``{"format": "fedcluster-checkpoint", "format-version": 1,
"sha256": ..., "body": {...}}`` whose checksum is the SHA-256 of the body
serialised canonically (sorted keys, no spaces). The body holds the
fedcluster version, the method's settings and the data options of the
run config (``dataset``, ``split``), the restart in progress and its rounds
done, its centroids, whether it converged, the history so far, the scores of
the finished restarts, the best scored restart so far (a whole ``model.pb``,
base64, with its own checksum: :func:`~fedcluster.server.artifacts.encode_model`)
and its named arrays, which ``model.pb`` does not hold (``best-arrays``:
DeepFeCA's network weights, written to ``network.npz`` at the end; empty for
the other methods), and the strategy's state (:meth:`~fedcluster.strategies.ClusteringStrategy.state`:
the sampler's random generator, the nodes' declared rows and sampling keys,
a method's own state such as DWF's momentum, DeepFeCA's network weights; under DP the
rounds the accountant counted and the central noise's generator:
:meth:`~fedcluster.strategies.private.PrivateRounds.state`). Arrays are stored as
``{"ndarray": {"dtype", "shape", "base64"}}`` of their raw little-endian bytes,
so floats come back bit for bit; a non-finite float outside an array as
``{"float": "nan"}``; JSON's integers are exact, so the generator's 128-bit
state is stored as is.

Every file is replaced atomically (:func:`~fedcluster.data.atomic.atomic_write`):
a process killed while it writes leaves the previous checkpoint. A file that
does not parse, has another format version, a checksum that does not match,
a missing or malformed entry, or that was written by another fedcluster
version or for other settings is refused with a :class:`CheckpointError`
that names the file and the problem (the differing settings by name). This
module does not depend on Flower.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from .. import _version
from fedcluster.data.atomic import atomic_write
from fedcluster.results import RoundRecord
from fedcluster.server.artifacts import decode_model, encode_model
from fedcluster.strategies import ClusteringStrategy
from fedcluster.strategies.progress import Progress, StateError

CHECKPOINT_FILE = "checkpoint.json"
#: The first field of every checkpoint: tells a fedcluster checkpoint from other JSON.
CHECKPOINT_FORMAT = "fedcluster-checkpoint"
#: The layout this fedcluster writes and reads.
CHECKPOINT_FORMAT_VERSION = 1
#: Settings a resumed run may change: they decide how long the server waits
#: for clients, never what it computes from their replies.
RESUMABLE_CHANGES = frozenset({"min-nodes", "node-wait-timeout", "round-timeout"})
#: The run config's data options a checkpoint records and a resumed run must repeat
#: (a simulation's clients are partitions of this dataset by this split).
DATA_KEYS = ("dataset", "split", "standardize")
_BODY_KEYS = ("fedcluster-version", "created", "algorithm", "settings", "data", "restart",
              "round", "converged", "centroids", "history", "scores", "best", "best-arrays",
              "state")


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or does not belong to this run; the message names the file."""


# -- values -------------------------------------------------------------------------------------
def encode_value(value: Any) -> Any:
    """A strategy-state value as JSON: arrays and non-finite floats tagged, the rest as is."""
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        little = array.astype(array.dtype.newbyteorder("<"), copy=False)
        return {"ndarray": {"dtype": array.dtype.str.lstrip("<>|="), "shape": list(array.shape),
                            "base64": base64.b64encode(little.tobytes()).decode("ascii")}}
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    if isinstance(value, (list, tuple)):
        return [encode_value(v) for v in value]
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"state dict keys must be strings, got {list(value)[:3]}")
        return {k: encode_value(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot store a {type(value).__name__} in a checkpoint")


def decode_value(value: Any) -> Any:
    """The inverse of :func:`encode_value`."""
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"ndarray"}:
            spec = value["ndarray"]
            dtype = np.dtype(spec["dtype"]).newbyteorder("<")
            raw = base64.b64decode(spec["base64"], validate=True)
            array = np.frombuffer(raw, dtype=dtype).reshape(spec["shape"])
            return array.astype(dtype.newbyteorder("="))
        if set(value) == {"float"}:
            return float(value["float"])
        return {k: decode_value(v) for k, v in value.items()}
    return value


def _canonical(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


# -- writing ------------------------------------------------------------------------------------
def encode_checkpoint(progress: Progress, settings: Mapping[str, Any], data: Mapping[str, Any]
                      ) -> bytes:
    """The bytes of ``checkpoint.json`` for ``progress`` of a run with these settings."""
    best = progress.best
    if best is not None:
        best = base64.b64encode(encode_model(best)).decode("ascii")
    body = {
        "fedcluster-version": _version.__version__,
        "created": datetime.now(timezone.utc).isoformat(),
        "algorithm": str(settings["algorithm"]),
        "settings": encode_value(dict(settings)),
        "data": encode_value({key: data.get(key) for key in DATA_KEYS}),
        "restart": int(progress.restart),
        "round": None if progress.round is None else int(progress.round),
        "converged": bool(progress.converged),
        "centroids": encode_value(progress.centroids),
        "history": [encode_value(asdict(record)) for record in progress.history],
        "scores": encode_value([float(s) for s in progress.scores]),
        "best": best,
        "best-arrays": encode_value({} if progress.best is None else dict(progress.best.arrays)),
        "state": encode_value(progress.state),
    }
    canonical = _canonical(body)
    envelope = {"format": CHECKPOINT_FORMAT, "format-version": CHECKPOINT_FORMAT_VERSION,
                "sha256": hashlib.sha256(canonical).hexdigest(), "body": body}
    return json.dumps(envelope, sort_keys=True, indent=1, allow_nan=False).encode() + b"\n"


class CheckpointWriter:
    """Replace ``out_dir/checkpoint.json`` with each :class:`Progress` it is called with.

    Parameters
    ----------
    out_dir : path
        The run's output directory (created if missing).
    settings : mapping
        The method's settings (``strategy.settings``), recorded to be compared on resume.
    data : mapping
        The run config's data options (:data:`DATA_KEYS` are recorded).
    """

    def __init__(self, out_dir: str | Path, settings: Mapping[str, Any],
                 data: Mapping[str, Any]) -> None:
        self.path = Path(out_dir) / CHECKPOINT_FILE
        self.settings = dict(settings)
        self.data = dict(data)

    def __call__(self, progress: Progress) -> None:
        payload = encode_checkpoint(progress, self.settings, self.data)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(self.path, "wb") as fh:
            fh.write(payload)


# -- reading ------------------------------------------------------------------------------------
def checkpoint_path(where: str | Path) -> Path:
    """``where`` itself if it is a file, else ``where/checkpoint.json``."""
    path = Path(where)
    return path if path.is_file() else path / CHECKPOINT_FILE


def decode_checkpoint(data: bytes, *, source: str = "checkpoint") -> dict[str, Any]:
    """Check the envelope and checksum of a checkpoint's bytes; return its body, values decoded.

    Raises
    ------
    CheckpointError
        Naming ``source`` and the problem.
    """
    try:
        envelope = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{source}: not a fedcluster checkpoint: it does not parse as "
                              f"JSON ({exc}; cut short, or not a checkpoint)") from None
    if not isinstance(envelope, dict) or envelope.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{source}: not a fedcluster checkpoint (no format "
                              f"{CHECKPOINT_FORMAT!r})")
    version = envelope.get("format-version")
    if version != CHECKPOINT_FORMAT_VERSION:
        raise CheckpointError(f"{source}: checkpoint format version {version!r}; this fedcluster "
                              f"({_version.__version__}) reads version {CHECKPOINT_FORMAT_VERSION}")
    body = envelope.get("body")
    if not isinstance(body, dict):
        raise CheckpointError(f"{source}: damaged checkpoint: no body")
    digest = hashlib.sha256(_canonical(body)).hexdigest()
    if digest != envelope.get("sha256"):
        raise CheckpointError(f"{source}: damaged checkpoint: the SHA-256 of its body "
                              f"({digest[:16]}...) does not match the checksum stored with it "
                              f"({str(envelope.get('sha256'))[:16]}...): it was changed after it "
                              f"was written")
    missing = [key for key in _BODY_KEYS if key not in body]
    if missing:
        raise CheckpointError(f"{source}: incomplete checkpoint: no {', '.join(missing)}")
    try:
        return {key: decode_value(value) for key, value in body.items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{source}: damaged checkpoint: a stored array does not decode "
                              f"({exc})") from None


def read_checkpoint(where: str | Path) -> tuple[dict[str, Any], Progress]:
    """The checkpoint in ``where`` (a directory or the file): its body and the run's progress.

    Raises
    ------
    CheckpointError
        No checkpoint there, or one that is damaged, incomplete or malformed
        (the message starts with the file's path).
    """
    path = checkpoint_path(where)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no checkpoint to resume from (the run wrote none "
                              f"there: is this the run's out-dir?)") from None
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read the checkpoint: {exc}") from None
    body = decode_checkpoint(data, source=str(path))
    try:
        progress = _progress(body, str(path))
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: invalid checkpoint: {exc}") from None
    return body, progress


def _progress(body: Mapping[str, Any], source: str) -> Progress:
    restart, round_ = body["restart"], body["round"]
    if not _count(restart) or not (round_ is None or _count(round_)):
        raise ValueError(f"restart {restart!r} and round {round_!r} must be integers >= 0 "
                         f"(round may be null)")
    centroids = body["centroids"]
    if round_ is not None:
        if not isinstance(centroids, np.ndarray) or centroids.ndim != 2 or \
                centroids.dtype != np.float64 or not np.all(np.isfinite(centroids)):
            raise ValueError("centroids must be a finite float64 (k, d) array after a round")
    best = body["best"]
    if best is not None:
        best = decode_model(base64.b64decode(best, validate=True), source=f"{source}: best restart")
        best.arrays = _named_arrays(body["best-arrays"], "best-arrays")
    history = [RoundRecord(**row) for row in body["history"]]
    scores = [float(s) for s in body["scores"]]
    if not isinstance(body["state"], dict):
        raise ValueError("the strategy state is not a mapping")
    return Progress(restart=restart, round=round_,
                    centroids=None if round_ is None else centroids,
                    converged=bool(body["converged"]), history=history, best=best, scores=scores,
                    state=body["state"])


def _named_arrays(value: Any, name: str) -> dict[str, np.ndarray]:
    if not isinstance(value, dict) or not all(isinstance(a, np.ndarray) for a in value.values()):
        raise ValueError(f"{name} must map names to arrays")
    return value


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# -- belongs to this run? -----------------------------------------------------------------------
def check_same_run(body: Mapping[str, Any], settings: Mapping[str, Any],
                   data: Mapping[str, Any], *, source: str) -> None:
    """Refuse a checkpoint of another fedcluster version, method, settings or data.

    Settings in :data:`RESUMABLE_CHANGES` may differ (they only set how long
    the server waits).

    Raises
    ------
    CheckpointError
        Naming each differing setting with the checkpoint's value and this run's.
    """
    if body["fedcluster-version"] != _version.__version__:
        raise CheckpointError(
            f"{source}: written by fedcluster {body['fedcluster-version']}, this is "
            f"{_version.__version__}: a run resumes only with the version that began it (its "
            f"numerics may differ); finish it with that version or start a new run")
    stored = {**body["settings"], **{f"data:{k}": v for k, v in body["data"].items()}}
    current = {**dict(settings), **{f"data:{k}": data.get(k) for k in DATA_KEYS}}
    differing = [key for key in sorted(set(stored) | set(current))
                 if key not in RESUMABLE_CHANGES and stored.get(key, "<unset>") !=
                 current.get(key, "<unset>")]
    if differing:
        listed = "; ".join(f"{key.removeprefix('data:')}: checkpoint {stored.get(key, '<unset>')!r}"
                           f", this run {current.get(key, '<unset>')!r}" for key in differing)
        raise CheckpointError(f"{source}: the checkpoint is of a run with other settings "
                              f"({listed}); resume with the settings that began the run, or "
                              f"start a new run")


def resume_point(where: str | Path, strategy: ClusteringStrategy, data: Mapping[str, Any]
                 ) -> Progress:
    """The progress stored in ``where``, checked to belong to ``strategy``'s run.

    Besides :func:`check_same_run` (with ``strategy.settings``), the stored
    state is restored into ``strategy`` once here, so that a malformed entry
    is refused before the run starts (:meth:`~ClusteringStrategy.fit`
    restores it again).

    Raises
    ------
    CheckpointError
        See :func:`read_checkpoint` and :func:`check_same_run`; or the
        strategy refused its stored state (the message names the entry).
    """
    body, progress = read_checkpoint(where)
    source = str(checkpoint_path(where))
    check_same_run(body, strategy.settings, data, source=source)
    try:
        strategy.restore(progress.state)
    except StateError as exc:
        raise CheckpointError(f"{source}: invalid checkpoint: {exc}") from None
    return progress
