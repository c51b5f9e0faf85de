"""A probe of what leaves a client: a Flower mod that records every reply, and its checks.

The mod runs inside the ClientApp (in Ray's worker processes in a simulation),
so it writes each reply's arrays and metrics to a directory; :func:`leaks`
reads them all back and lists every array that holds a data row exactly and
every centroid sent with a count between 0 and p.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np


def recorder(directory: str | Path):
    """A client mod that saves every reply's arrays and metrics under ``directory``."""
    directory = str(directory)

    def record(msg, context, call_next):
        reply = call_next(msg, context)
        if reply.has_content():
            arrays = {f"{record_name}.{name}": array.numpy()
                      for record_name, record in reply.content.array_records.items()
                      for name, array in record.items()}
            metrics = {f"{record_name}.{name}": np.asarray(value)
                       for record_name, record in reply.content.metric_records.items()
                       for name, value in record.items()}
            np.savez(Path(directory) / f"{uuid.uuid4().hex}.npz", **arrays, **metrics,
                     message_type=np.asarray(msg.metadata.message_type))
        return reply

    return record


def recorded(directory: str | Path) -> list[dict[str, np.ndarray]]:
    """Every reply the recorder saved."""
    replies = []
    for path in sorted(Path(directory).glob("*.npz")):
        with np.load(path) as saved:
            replies.append({key: saved[key] for key in saved.files})
    return replies


def leaks(replies: list[dict[str, np.ndarray]], X: np.ndarray, p: int) -> list[str]:
    """What in ``replies`` breaks the privacy floor for the data ``X`` (all clients' rows).

    A leak is any row of any 2-D array equal to a data row that fewer than
    ``p`` rows of ``X`` hold (a value p identical rows share is what the floor
    allows; duplicates are counted over ``X``, which is one client's count
    when no value is shared between clients), a per-feature value of a bounds
    reply equal to the exact minimum or maximum of that feature on any client,
    a centroid sent with a count between 0 and ``p``, or a radius (FeCA) equal
    to the distance from its centroid to 1 to p - 1 rows of ``X`` (to 1e-9
    relative: the client's distances come from the expanded form ``|x|^2 -
    2 x.c + |c|^2``, not from the direct difference used here).
    """
    values, holders = np.unique(np.asarray(X, dtype=np.float64) + 0.0, axis=0, return_counts=True)
    rows = {row.tobytes() for row in values[holders < p]}
    found = []
    for reply in replies:
        kind = str(reply["message_type"])
        for key, value in reply.items():
            if key == "result.mean":  # a moments reply's mean of one row would be that row
                value = value[None, :]
            if value.ndim == 2:
                hits = [i for i, row in enumerate(np.asarray(value, np.float64) + 0.0)
                        if row.tobytes() in rows]
                if hits:
                    found.append(f"{kind}: {key} row(s) {hits[:5]} are data rows")
        counts = reply.get("result.counts")
        if "result.centroids" in reply and counts is not None:
            small = np.flatnonzero((counts > 0) & (counts < p))
            if len(small):
                found.append(f"{kind}: centroid(s) {small[:5].tolist()} of counts "
                             f"{counts[small[:5]].tolist()} < {p}")
        if "result.radii" in reply:
            distances = np.linalg.norm(np.asarray(X, np.float64)[None, :, :]
                                       - reply["result.centroids"][:, None, :], axis=2)
            radii = np.asarray(reply["result.radii"], np.float64)[:, None]
            at_radius = np.isclose(distances, radii, rtol=1e-9, atol=0).sum(axis=1)
            few = np.flatnonzero((at_radius > 0) & (at_radius < p))
            if len(few):
                found.append(f"{kind}: radius(es) of centroid(s) {few[:5].tolist()} are the "
                             f"distance of fewer than {p} rows")
    return found


def extreme_values(replies: list[dict[str, np.ndarray]], parts: list[np.ndarray]) -> list[str]:
    """Bounds replies that hold a client's exact per-feature minimum or maximum."""
    extremes = {float(v) for part in parts for v in (*part.min(axis=0), *part.max(axis=0))}
    return [f"{reply['message_type']}: {key} holds an exact extreme value"
            for reply in replies for key in ("result.low", "result.high")
            if key in reply and any(float(v) in extremes for v in reply[key])]
