"""The Flower encoding of fedcluster's messages (:mod:`fedcluster.messages`).

Every request carries the global centroids (if any) in the ``ArrayRecord``
``"model"`` and its parameters in the ``ConfigRecord`` ``"config"``; every reply
carries arrays in ``"result"`` and scalars in the ``MetricRecord`` ``"metrics"``.
Only summaries travel: centroids, per-cluster counts, sums of squared distances,
per-feature minima and maxima, and the number of local points. Named arrays (a
network's weights, :attr:`fedcluster.messages.Request.arrays`) travel in the
``ArrayRecord`` ``"arrays"`` of a request or a reply, with their own dtypes; the
arrays a method declares for its replies (:attr:`fedcluster.messages.ClientSummary.own`)
in the ``ArrayRecord`` ``"own"``, as float64 like those of ``"result"``.

The functions below only put values into records and take them out; the
checks of what they carry are :func:`fedcluster.messages.validate_reply` (the
server's, of every reply) and the client's step (of every request).
"""

from __future__ import annotations

import math

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

from .messages import SUMMARY_ARRAYS, ClientSummary, ProtocolError, Request, validate_reply


MODEL_KEY = "model"
CONFIG_KEY = "config"
RESULT_KEY = "result"
METRICS_KEY = "metrics"
#: The ArrayRecord of a message's named arrays (a network's weights).
ARRAYS_KEY = "arrays"
#: The ArrayRecord of a reply's arrays its method declares (ClientSummary.own): apart
#: from "result", so that no method's name can shadow a shared array's.
OWN_KEY = "own"

NUM_EXAMPLES = "num-examples"
SSE = "sse"
#: Metric of a reply: the client's stable position for sampling (see :func:`make_reply`).
SAMPLING_KEY = "sampling-key"
#: Request record of the run's standardisation (arrays "shift" and "scale").
TRANSFORM_KEY = "transform"
SILHOUETTE = "silhouette"
#: The ConfigRecord of a secure-aggregation stage's reply (ClientSummary.payload).
PAYLOAD_KEY = "payload"


def make_request(request: Request, dst_node_id: int) -> Message:
    """Encode ``request`` as a message to one client."""
    content = RecordDict({CONFIG_KEY: ConfigRecord(dict(request.config))})
    if request.centroids is not None:
        content[MODEL_KEY] = ArrayRecord(
            {"centroids": Array(np.ascontiguousarray(request.centroids))})
    if request.shift is not None:
        content[TRANSFORM_KEY] = ArrayRecord({name: Array(np.ascontiguousarray(value)) for name, value
                                              in (("shift", request.shift), ("scale", request.scale))})
    if request.arrays is not None:
        content[ARRAYS_KEY] = _named_record(request.arrays)
    return Message(content=content, dst_node_id=dst_node_id, message_type=request.kind)


def read_request(msg: Message) -> Request:
    """Decode a request (its centroids are checked by the client's step, not here).

    Raises
    ------
    ProtocolError
        The request lacks its config, or its model lacks the centroids.
    """
    content = msg.content
    if CONFIG_KEY not in content.config_records:
        raise ProtocolError(f"request has no ConfigRecord '{CONFIG_KEY}'")
    config = dict(content.config_records[CONFIG_KEY])
    centroids = None
    if MODEL_KEY in content.array_records:
        record = content.array_records[MODEL_KEY]
        if "centroids" not in record:
            raise ProtocolError("request model has no array 'centroids'")
        centroids = record["centroids"].numpy()
    transform = {}
    if TRANSFORM_KEY in content.array_records:
        record = content.array_records[TRANSFORM_KEY]
        if set(record) != {"shift", "scale"}:
            raise ProtocolError("request transform must hold exactly the arrays 'shift' and 'scale'")
        transform = {name: record[name].numpy() for name in ("shift", "scale")}
    return Request(msg.metadata.message_type, config, centroids,
                   arrays=_named_arrays(content), **transform)


def make_reply(msg: Message, summary: ClientSummary, sampling_key: int | None = None) -> Message:
    """Encode a client's summary as the reply to ``msg``.

    ``sampling_key`` (a simulated client's partition id) lets the server order
    its clients the same way in every run although Flower draws new node ids
    for each simulation (see :func:`reply_sampling_key`).
    """
    return Message(content=reply_content(summary, sampling_key), reply_to=msg)


def reply_content(summary: ClientSummary, sampling_key: int | None = None) -> RecordDict:
    """The records of a reply carrying ``summary`` (:func:`decode_reply` reads them back)."""
    arrays = {name: value for name in SUMMARY_ARRAYS if (value := getattr(summary, name)) is not None}
    metrics: dict[str, int | float] = {NUM_EXAMPLES: int(summary.n)}
    if not math.isnan(summary.sse):
        metrics[SSE] = float(summary.sse)
    if not math.isnan(summary.silhouette):
        metrics[SILHOUETTE] = float(summary.silhouette)
    if sampling_key is not None:
        metrics[SAMPLING_KEY] = int(sampling_key)
    content = RecordDict({RESULT_KEY: _float_record(arrays), METRICS_KEY: MetricRecord(metrics)})
    if summary.own is not None:
        content[OWN_KEY] = _float_record(summary.own)
    if summary.payload is not None:
        content[PAYLOAD_KEY] = ConfigRecord(dict(summary.payload))
    if summary.arrays is not None:
        content[ARRAYS_KEY] = _named_record(summary.arrays)
    return content


def _float_record(arrays) -> ArrayRecord:
    return ArrayRecord({name: Array(np.ascontiguousarray(value, dtype=np.float64))
                        for name, value in arrays.items()})


def _named_record(arrays) -> ArrayRecord:
    return ArrayRecord({name: Array(np.ascontiguousarray(value)) for name, value in arrays.items()})


def _named_arrays(content: RecordDict, key: str = ARRAYS_KEY) -> dict[str, np.ndarray] | None:
    """The arrays of the message's record ``key``, unchecked, or None if it has none."""
    if key not in content.array_records:
        return None
    return {name: array.numpy() for name, array in content.array_records[key].items()}


def reply_sampling_key(content: RecordDict) -> int | None:
    """The sampling key a reply declares, if it declares a valid one.

    The key only orders the clients before the server draws positions among
    them, so a client that lies about it gains no more rounds than any other.
    """
    metrics = content.metric_records.get(METRICS_KEY)
    key = None if metrics is None else metrics.get(SAMPLING_KEY)
    return key if isinstance(key, int) and not isinstance(key, bool) else None


def decode_reply(content: RecordDict) -> ClientSummary:
    """Take a reply's summary out of its records, unchecked (see :func:`~fedcluster.messages.validate_reply`).

    Raises
    ------
    ProtocolError
        The reply lacks its records.
    """
    if RESULT_KEY not in content.array_records or METRICS_KEY not in content.metric_records:
        raise ProtocolError(f"reply lacks '{RESULT_KEY}' arrays or '{METRICS_KEY}' metrics")
    arrays = content.array_records[RESULT_KEY]
    metrics = content.metric_records[METRICS_KEY]
    payload = content.config_records.get(PAYLOAD_KEY)
    return ClientSummary(
        n=metrics.get(NUM_EXAMPLES),
        sse=metrics.get(SSE, math.nan),
        silhouette=metrics.get(SILHOUETTE, math.nan),
        payload=None if payload is None else dict(payload),
        arrays=_named_arrays(content),
        own=_named_arrays(content, OWN_KEY),
        **{name: arrays[name].numpy() for name in SUMMARY_ARRAYS if name in arrays},
    )


def read_reply(content: RecordDict, **expected) -> ClientSummary:
    """:func:`decode_reply`, then :func:`~fedcluster.messages.validate_reply` with ``expected``."""
    return validate_reply(decode_reply(content), **expected)
