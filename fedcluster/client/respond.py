"""A client's answer to a request, apart from any transport.

:func:`respond` is everything a client does with a request once it has its
rows: it finds the step of the request's kind (:data:`STEPS`: the steps every
method may use, then each method's own, from its spec), checks the global
centroids the request carries, runs the step under the privacy floor and
checks the reply against that floor (:mod:`fedcluster.local.floor`) before it leaves. The
Flower ClientApp (:mod:`.app`) and the in-memory federation
(:mod:`fedcluster.client.memory`) both call it, so a client answers the
same whatever carries the request; :func:`failure` turns what went wrong into
the error code and reason both report.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from ..data import DataError
from ..logs import logger
from ..messages import (BOUNDS, EVALUATE, LOCAL_KMEANS, MOMENTS, SILHOUETTE, ClientSummary,
                        ProtocolError, Request, finite_array)
from ..local.floor import MIN_CLUSTER_SIZE_KEY, check_reply, floor_of
from ..local.private import (SETUP_STEPS, Masking, cell_sums_request, check_dp_request,
                             dimension_request, histogram_request, secure_stage, sums_request)
from ..local.steps import bounds_request, evaluate_request, local_kmeans_request
from ..local.summaries import moments_request, silhouette_request, transformed
from ..methods import METHODS
from ..privacy.kinds import CELL_SUMS, DIMENSION, HISTOGRAM, SUMS
from ..privacy.secagg_names import BITS_KEY
from ..privacy.secagg_names import STAGES as SECAGG_STAGES

#: Error code of a reply that reports bad input (request or local data).
BAD_INPUT = 400
#: Error code of a reply that reports an unexpected failure on the client.
CLIENT_FAILURE = 500

Step = Callable[[Any, Any, dict], ClientSummary]

#: Request kind -> the step that computes the reply from the rows alone.
ROW_STEPS: dict[str, Step] = {
    EVALUATE: evaluate_request,
    BOUNDS: bounds_request,
    LOCAL_KMEANS: local_kmeans_request,
    MOMENTS: moments_request,
    SILHOUETTE: silhouette_request,
    SUMS: sums_request,
    HISTOGRAM: histogram_request,
    CELL_SUMS: cell_sums_request,
    **{kind: step for method in METHODS.values() for kind, step in method.steps.items()},
}

#: Request kind -> the step of a request that carries named arrays (a network's weights),
#: called with :data:`ROW_STEPS` too, so that it can answer a clustering of rows it wraps
#: (DeepFeCA's, on features) without importing this dispatcher, which sits above the methods.
ARRAY_STEPS: dict[str, Callable[[Any, Any, dict, Mapping, Mapping[str, Step]], ClientSummary]] = {
    kind: step for method in METHODS.values() for kind, step in method.array_steps.items()}

#: Request kind -> the step that computes the reply: every kind a client answers.
STEPS: dict[str, Callable[..., ClientSummary]] = {**ROW_STEPS, **ARRAY_STEPS}

#: The request kinds of a round in sum form (the only ones a client answers under DP), as
#: the methods declare them (:attr:`~fedcluster.methods.spec.Method.sum_form`).
SUM_FORMS = frozenset({SUMS, *(method.sum_form for method in METHODS.values() if method.sum_form)})

_log = logger


def respond(X, request: Request, node_config: Mapping[str, Any],
            session: MutableMapping[str, Any] | None = None, node: int = 0,
            masking: Masking | None = None) -> ClientSummary:
    """The reply to ``request`` from the rows ``X`` (NumPy or CuPy, already checked).

    ``node_config`` may raise the privacy floor for this client
    (``min-cluster-size``) and set its DP floor
    (:func:`~fedcluster.local.private.check_dp_request`, which every request
    but a dimension query or a protocol stage passes first). A
    secure-aggregation stage (:data:`~fedcluster.privacy.secagg_names.STAGES`)
    needs the client's ``session`` (its state between stages) and its
    ``node`` id; its masked stage answers the request it wraps with this
    function, with the stage's ``masking`` (only this function sets it, so a
    request cannot claim to be masked; its fraction bits replace any the
    request carries).

    Raises
    ------
    ProtocolError
        A request of an unknown kind, with bad settings or bad centroids, or a
        reply that would break the privacy floor.
    DataError
        The rows do not fit the request (another dimension, too few rows).
    """
    if request.kind in SECAGG_STAGES:
        if session is None:
            raise ProtocolError("this client keeps no session: it cannot take part in secure "
                                "aggregation")
        return secure_stage(request, session, node,
                            lambda inner, masking: respond(X, inner, node_config, masking=masking))
    if request.kind == DIMENSION:
        return dimension_request(X)
    step = STEPS.get(request.kind)
    if step is None:
        raise ProtocolError(f"unknown request kind {request.kind!r}")
    p = floor_of(request.config, node_config)
    # Every step, and the privacy check, sees the run's standardised rows.
    X = transformed(X, request)
    centroids = None
    if request.centroids is not None:
        centroids = finite_array(request.centroids, "request centroids", ndim=2)
        if X.shape[1] != centroids.shape[1]:
            raise DataError(
                f"client data has dimension {X.shape[1]}, the global model {centroids.shape[1]}")
    setup = SETUP_STEPS.get(request.kind)
    check_dp_request(request.kind in SUM_FORMS or setup is not None, request.config, node_config,
                     masking, X.shape[1],
                     setup(X.shape[1], request.config) if setup is not None else 0.0)
    config = {key: value for key, value in request.config.items() if key != BITS_KEY}
    config[MIN_CLUSTER_SIZE_KEY] = p
    if masking is not None:
        config[BITS_KEY] = masking.fraction_bits
    if request.kind in ARRAY_STEPS:
        summary = ARRAY_STEPS[request.kind](X, centroids, config, request.arrays or {},
                                            ROW_STEPS)
    elif request.arrays is not None:
        raise ProtocolError(f"a {request.kind!r} request carries no named arrays")
    else:
        summary = step(X, centroids, config)
    check_reply(X, summary, p, centroids)
    return summary


def failure(kind: str, exc: Exception) -> tuple[int, str]:
    """The error code and reason a client reports for ``exc``, logged on the client."""
    if isinstance(exc, (ProtocolError, DataError)):
        _log.error("Rejected %s request: %s", kind, exc)
        return BAD_INPUT, str(exc)
    _log.error("Failed %s request:\n%s", kind, traceback.format_exc())
    return CLIENT_FAILURE, f"{type(exc).__name__}: {exc}"
