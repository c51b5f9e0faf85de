"""The messages between the fedcluster server and its clients.

Every request carries the global centroids (if any) in the ``ArrayRecord``
``"model"`` and its parameters in the ``ConfigRecord`` ``"config"``; every reply
carries arrays in ``"result"`` and scalars in the ``MetricRecord`` ``"metrics"``.
Only summaries travel: centroids, per-cluster counts, sums of squared distances,
per-feature minima and maxima, and the number of local points.

Both sides decode with the functions below, which reject anything malformed
with :class:`ProtocolError` so that a bad request gets an error reply and a bad
reply is dropped by the server.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

from .data.validation import MAX_ABS_VALUE

# Message types: "<category>.<action>" as Flower routes them.
LLOYD = "train"
EVALUATE = "evaluate"
BOUNDS = "query.bounds"
LOCAL_KMEANS = "query.local_kmeans"
GARST_INIT = "query.garst_init"
GARST = "train.garst"
FUZZY = "train.fuzzy"
FECA = "query.feca"
MINIBATCH = "train.minibatch"

#: Largest magnitude of any value in a message: the bound client data is held
#: to (:data:`fedcluster.data.validation.MAX_ABS_VALUE`), so that no party's
#: sums of squares over a checked message overflow float64.
MAX_MAGNITUDE = MAX_ABS_VALUE

MODEL_KEY = "model"
CONFIG_KEY = "config"
RESULT_KEY = "result"
METRICS_KEY = "metrics"

NUM_EXAMPLES = "num-examples"
SSE = "sse"
#: Metric of a reply: the client's stable position for sampling (see :func:`make_reply`).
SAMPLING_KEY = "sampling-key"


class ProtocolError(ValueError):
    """A request or reply that does not follow the protocol."""


@dataclass(frozen=True)
class ClientSummary:
    """What one client reports for one request.

    Attributes
    ----------
    n : int
        Number of local points.
    centroids : ndarray of shape (k, d) or None
        Local centroids (Lloyd steps, local k-means).
    counts : ndarray of shape (k,) or None
        Points per cluster (against the global centroids for a Lloyd step).
    sse : float
        Sum of squared distances to the nearest global centroid (NaN if not asked).
    low, high : ndarray of shape (d,) or None
        Per-feature minima and maxima (bounds request).
    weights : ndarray of shape (k,) or None
        Per-cluster weights that are not point counts (fuzzy supports).
    radii : ndarray of shape (k,) or None
        Per-centroid radii (FeCA).
    """

    n: int
    centroids: np.ndarray | None = None
    counts: np.ndarray | None = None
    sse: float = math.nan
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    weights: np.ndarray | None = None
    radii: np.ndarray | None = None


def make_request(
    message_type: str,
    dst_node_id: int,
    config: Mapping[str, int | float | str | bool],
    centroids: np.ndarray | None = None,
) -> Message:
    """Build one request for one client."""
    content = RecordDict({CONFIG_KEY: ConfigRecord(dict(config))})
    if centroids is not None:
        content[MODEL_KEY] = ArrayRecord({"centroids": Array(np.ascontiguousarray(centroids))})
    return Message(content=content, dst_node_id=dst_node_id, message_type=message_type)


def read_request(msg: Message) -> tuple[dict, np.ndarray | None]:
    """Return a request's config and centroids, or raise :class:`ProtocolError`."""
    content = msg.content
    if CONFIG_KEY not in content.config_records:
        raise ProtocolError(f"request has no ConfigRecord '{CONFIG_KEY}'")
    config = dict(content.config_records[CONFIG_KEY])
    centroids = None
    if MODEL_KEY in content.array_records:
        record = content.array_records[MODEL_KEY]
        if "centroids" not in record:
            raise ProtocolError("request model has no array 'centroids'")
        centroids = _finite_array(record["centroids"].numpy(), "request centroids", ndim=2)
    return config, centroids


def make_reply(msg: Message, summary: ClientSummary, sampling_key: int | None = None) -> Message:
    """Encode a client's summary as the reply to ``msg``.

    ``sampling_key`` (a simulated client's partition id) lets the server order
    its clients the same way in every run although Flower draws new node ids
    for each simulation (see :func:`reply_sampling_key`).
    """
    arrays = {
        name: Array(np.ascontiguousarray(value, dtype=np.float64))
        for name, value in (
            ("centroids", summary.centroids),
            ("counts", summary.counts),
            ("low", summary.low),
            ("high", summary.high),
            ("weights", summary.weights),
            ("radii", summary.radii),
        )
        if value is not None
    }
    metrics: dict[str, int | float] = {NUM_EXAMPLES: int(summary.n)}
    if not math.isnan(summary.sse):
        metrics[SSE] = float(summary.sse)
    if sampling_key is not None:
        metrics[SAMPLING_KEY] = int(sampling_key)
    content = RecordDict({RESULT_KEY: ArrayRecord(arrays), METRICS_KEY: MetricRecord(metrics)})
    return Message(content=content, reply_to=msg)


def reply_sampling_key(content: RecordDict) -> int | None:
    """The sampling key a reply declares, if it declares a valid one.

    The key only orders the clients before the server draws positions among
    them, so a client that lies about it gains no more rounds than any other.
    """
    metrics = content.metric_records.get(METRICS_KEY)
    key = None if metrics is None else metrics.get(SAMPLING_KEY)
    return key if isinstance(key, int) and not isinstance(key, bool) else None


def read_reply(
    content: RecordDict,
    *,
    k: int | None = None,
    dim: int | None = None,
    expect: tuple[str, ...] = (),
    all_counted: bool = False,
) -> ClientSummary:
    """Decode and check a reply.

    Parameters
    ----------
    content : RecordDict
        The reply's content.
    k, dim : int, optional
        Expected number of clusters and dimension (checked when given).
    expect : tuple of str
        Entries that must be present: any of ``"centroids"``, ``"counts"``,
        ``"weights"``, ``"radii"``, ``"sse"``, ``"bounds"``.
    all_counted : bool
        The counts must add up to exactly the number of points (every point
        is in one cluster, as in the score request); otherwise they may add
        up to less (a client may withhold small clusters).

    Raises
    ------
    ProtocolError
        Missing entries, wrong shapes, values that are not real numbers, not
        finite or beyond :data:`MAX_MAGNITUDE`, negative or fractional counts,
        negative weights, radii or distances, or counts that add up to more
        than the number of points.
    """
    if RESULT_KEY not in content.array_records or METRICS_KEY not in content.metric_records:
        raise ProtocolError(f"reply lacks '{RESULT_KEY}' arrays or '{METRICS_KEY}' metrics")
    arrays = content.array_records[RESULT_KEY]
    metrics = content.metric_records[METRICS_KEY]
    n = metrics.get(NUM_EXAMPLES)
    if not isinstance(n, int) or n < 1:
        raise ProtocolError(f"'{NUM_EXAMPLES}' must be a positive integer, got {n!r}")
    values: dict[str, np.ndarray] = {}
    for name in arrays:
        values[name] = _finite_array(arrays[name].numpy(), f"'{name}'")
    for name in ("centroids", "counts", "weights", "radii", "low", "high"):
        wanted = name in expect or (name in ("low", "high") and "bounds" in expect)
        if wanted and name not in values:
            raise ProtocolError(f"reply lacks the array '{name}'")
    centroids = values.get("centroids")
    if centroids is not None:
        _check_shape(centroids, (k, dim), "centroids")
        if k is None:
            k = centroids.shape[0]
    for name in ("counts", "weights", "radii"):
        if name not in values:
            continue
        per_cluster = values[name]
        _check_shape(per_cluster, (k if k is not None else per_cluster.shape[0],), name)
        if np.any(per_cluster < 0):
            raise ProtocolError(f"'{name}' has negative values")
        if centroids is not None and centroids.shape[0] != per_cluster.shape[0]:
            raise ProtocolError(f"'centroids' and '{name}' disagree on the number of clusters")
    counts = values.get("counts")
    if counts is not None:
        if np.any(counts != np.floor(counts)):
            raise ProtocolError("'counts' are not whole numbers")
        total = int(counts.sum())
        if total > n:
            raise ProtocolError(f"'counts' add up to {total}, more than the {n} points")
        if all_counted and total != n:
            raise ProtocolError(f"'counts' add up to {total}, not to the {n} points")
    for name in ("low", "high"):
        if name in values:
            _check_shape(values[name], (dim,), name)
    if "low" in values and "high" in values and np.any(values["low"] > values["high"]):
        raise ProtocolError("'low' exceeds 'high' in some feature")
    sse = metrics.get(SSE, math.nan)
    if "sse" in expect:
        if not isinstance(sse, (int, float)) or not math.isfinite(sse) or sse < 0:
            raise ProtocolError(f"'{SSE}' must be a finite non-negative number, got {sse!r}")
    return ClientSummary(
        n=n,
        centroids=centroids,
        counts=counts,
        sse=float(sse),
        low=values.get("low"),
        high=values.get("high"),
        weights=values.get("weights"),
        radii=values.get("radii"),
    )


def request_setting(config: Mapping, key: str, kind: type, valid: Callable[[Any], bool]):
    """One value of a request's config, checked; :class:`ProtocolError` names a bad one.

    ``kind`` is ``int``, ``float`` (an int is accepted) or ``str``; ``valid``
    says whether the value is in range.
    """
    if key not in config:
        raise ProtocolError(f"request config lacks '{key}'")
    value = config[key]
    if kind is str:
        ok_type = isinstance(value, str)
    else:
        ok_type = isinstance(value, (int, float)) and not isinstance(value, bool) and (
            kind is not int or isinstance(value, int))
    if not ok_type:
        raise ProtocolError(f"request config '{key}' must be {kind.__name__}, got {value!r}")
    if not valid(value):
        raise ProtocolError(f"request config '{key}' has an invalid value {value!r}")
    return kind(value)


def _finite_array(array: np.ndarray, what: str, ndim: int | None = None) -> np.ndarray:
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise ProtocolError(f"{what} is not real-valued (dtype {array.dtype})")
    if ndim is not None and array.ndim != ndim:
        raise ProtocolError(f"{what} must be {ndim}-D, got shape {array.shape}")
    array = np.asarray(array, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        raise ProtocolError(f"{what} has non-finite values")
    if array.size and float(np.max(np.abs(array))) > MAX_MAGNITUDE:
        raise ProtocolError(f"{what} has values beyond +-{MAX_MAGNITUDE:g} "
                            f"(largest {float(np.max(np.abs(array))):.3g})")
    return array


def _check_shape(array: np.ndarray, expected: tuple[int | None, ...], name: str) -> None:
    if array.ndim != len(expected) or any(
        want is not None and got != want for got, want in zip(array.shape, expected)
    ):
        shown = tuple("?" if e is None else e for e in expected)
        raise ProtocolError(f"'{name}' has shape {array.shape}, expected {shown}")
