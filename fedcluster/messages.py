"""What the server and its clients say to each other, apart from any transport.

A request is a message kind, a config of scalars and, for most kinds, the
global centroids; a reply is a :class:`ClientSummary`. Both sides check what
they receive with the functions below, whatever carried it (Flower messages,
:mod:`fedcluster.protocol`, or a direct call, :mod:`fedcluster.client.memory`),
and reject anything malformed with :class:`ProtocolError`. This module does
not import Flower.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import AllowInfNan, BaseModel, TypeAdapter, ValidationError

from .data.validation import MAX_ABS_VALUE

# The kinds every method may use; a method's own kinds live in its folder
# (``fedcluster/methods/<name>/``). Flower routes "<category>.<action>".
EVALUATE = "evaluate"
BOUNDS = "query.bounds"
LOCAL_KMEANS = "query.local_kmeans"
#: Federated standardisation and model selection (:mod:`fedcluster.preprocessing`).
MOMENTS = "query.moments"
SILHOUETTE = "query.silhouette"

#: Largest magnitude of any value in a message: the bound client data is held
#: to (:data:`fedcluster.data.validation.MAX_ABS_VALUE`), so that no party's
#: sums of squares over a checked message overflow float64.
MAX_MAGNITUDE = MAX_ABS_VALUE


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
    mean, std : ndarray of shape (d,) or None
        Per-feature mean and population standard deviation of all local rows
        (moments request).
    silhouette : float
        Sum over all local rows of the simplified silhouette (NaN if not asked).
    sums : ndarray of shape (k, d) or None
        Per-cluster sums of (clipped) rows, the sum form of a Lloyd step
        (:mod:`fedcluster.privacy`).
    payload : mapping or None
        A secure-aggregation stage's values (public keys, encrypted shares,
        a masked vector; :mod:`fedcluster.privacy.secagg` checks them, not
        :func:`validate_reply`); such a reply's ``n`` is 0.
    arrays : mapping of str to ndarray, or None
        Named arrays of any shape and real dtype: a model's parameters (the
        network weights of DeepFeCA). :func:`validate_reply` keeps them only
        when the caller gives the model they must match (``arrays=``).
    own : mapping of str to ndarray, or None
        The arrays a method declares for its own replies besides the ones
        above (:class:`ReplyArray`, :attr:`fedcluster.methods.spec.Method.reply_arrays`),
        so that a method's new array needs no new field here.
        :func:`validate_reply` keeps those the caller declares (``own=``).
    """

    n: int
    centroids: np.ndarray | None = None
    counts: np.ndarray | None = None
    sse: float = math.nan
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    weights: np.ndarray | None = None
    radii: np.ndarray | None = None
    mean: np.ndarray | None = None
    std: np.ndarray | None = None
    silhouette: float = math.nan
    sums: np.ndarray | None = None
    payload: Mapping[str, Any] | None = None
    arrays: Mapping[str, np.ndarray] | None = None
    own: Mapping[str, np.ndarray] | None = None


#: An axis of a :class:`ReplyArray`: the clusters, the features, or a fixed length.
Axis = Literal["k", "d"] | int


@dataclass(frozen=True)
class ReplyArray:
    """An array a method's replies carry besides the shared ones (:attr:`ClientSummary.own`).

    Checked by :func:`validate_reply` as the shared arrays are: real-valued,
    finite, within :data:`MAX_MAGNITUDE`, sent as float64, of the declared
    shape.

    Attributes
    ----------
    name : str
        Its name in the reply (and in ``validate_reply``'s ``expect``); not
        the name of a shared array.
    shape : tuple
        One entry per axis: ``"k"`` (as many as the clusters of the reply, the
        ``k`` asked for or its centroids' and counts'), ``"d"`` (the
        features) or a fixed length; ``("k",)`` is a per-cluster value,
        ``("k", "d")`` a per-cluster vector, ``("d",)`` a per-feature one.
    nonnegative : bool
        No value may be negative (a weight, a spread).
    """

    name: str
    shape: tuple[Axis, ...]
    nonnegative: bool = False

    def __post_init__(self) -> None:
        if self.name in (*SUMMARY_ARRAYS, "bounds", "sse", "silhouette") or not self.name:
            raise ValueError(f"reply array name {self.name!r} is empty or a shared entry's")
        if any(axis not in ("k", "d") and not (isinstance(axis, int) and axis >= 0)
               for axis in self.shape):
            raise ValueError(f"reply array '{self.name}': each axis is 'k', 'd' or a length, "
                             f"got {self.shape}")

    def expected(self, k: int | None, dim: int | None) -> tuple[int | None, ...]:
        """The shape it must have (None: any length) for ``k`` clusters of ``dim`` features."""
        return tuple(k if axis == "k" else dim if axis == "d" else axis for axis in self.shape)


@dataclass(frozen=True)
class Request:
    """What the server asks of a client.

    Attributes
    ----------
    kind : str
        The message kind (a method's step, or one of the kinds above).
    config : mapping
        The step's settings (scalars only, so that Flower's ``ConfigRecord``
        can carry them).
    centroids : ndarray of shape (k, d) or None
        The global centroids, for the steps that start from them.
    shift, scale : ndarray of shape (d,) or None
        The run's standardisation: the client answers about ``(X - shift) /
        scale`` (:mod:`fedcluster.preprocessing`).
    arrays : mapping of str to ndarray, or None
        Named arrays for the steps that take them (a model's weights, see
        :attr:`fedcluster.methods.spec.Method.array_steps`); a request of any
        other kind that carries some is refused by the client.
    """

    kind: str
    config: Mapping[str, int | float | str | bool]
    centroids: np.ndarray | None = None
    shift: np.ndarray | None = None
    scale: np.ndarray | None = None
    arrays: Mapping[str, np.ndarray] | None = None


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


def request_option(config: Mapping, model: type[BaseModel], key: str):
    """A method setting a request carries, checked against its one declaration.

    The server validated the setting with ``model`` (the method's options,
    :mod:`fedcluster.options`); the client checks what arrives with the same
    field: its type, strictly (no bool for a number, no float for an
    integer), and its range. :class:`ProtocolError` names a bad value.
    """
    if key not in config:
        raise ProtocolError(f"request config lacks '{key}'")
    try:
        return _option_adapter(model, key).validate_python(config[key], strict=True)
    except ValidationError as exc:
        reason = exc.errors()[0]["msg"]
        raise ProtocolError(f"request config '{key}' has an invalid value {config[key]!r} "
                            f"({reason})") from None


@lru_cache(maxsize=None)
def _option_adapter(model: type[BaseModel], key: str) -> TypeAdapter:
    field = model.model_fields[key.replace("-", "_")]
    finite = (AllowInfNan(False),) if field.annotation is float else ()
    metadata = (*field.metadata, *finite)
    return TypeAdapter(Annotated[field.annotation, *metadata] if metadata else field.annotation)


def finite_array(array: np.ndarray, what: str, ndim: int | None = None) -> np.ndarray:
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


def check_shape(array: np.ndarray, expected: tuple[int | None, ...], name: str) -> None:
    if array.ndim != len(expected) or any(
        want is not None and got != want for got, want in zip(array.shape, expected)
    ):
        shown = tuple("?" if e is None else e for e in expected)
        raise ProtocolError(f"'{name}' has shape {array.shape}, expected {shown}")


def validate_reply(
    summary: ClientSummary,
    *,
    k: int | None = None,
    dim: int | None = None,
    expect: tuple[str, ...] = (),
    all_counted: bool = False,
    arrays: Mapping[str, np.ndarray] | None = None,
    arrays_bound: float = MAX_MAGNITUDE,
    own: Sequence[ReplyArray] = (),
) -> ClientSummary:
    """Check a client's reply and return it with every array as float64.

    The one check of every reply, whatever carried it: the server runs it on
    the summaries that :func:`fedcluster.protocol.decode_reply` takes out of a
    Flower message and on those an in-memory client returns.

    Parameters
    ----------
    summary : ClientSummary
        The reply as received (its fields may hold anything).
    k, dim : int, optional
        Expected number of clusters and dimension (checked when given).
    expect : tuple of str
        Entries that must be present: any of ``"centroids"``, ``"counts"``,
        ``"weights"``, ``"radii"``, ``"sums"``, ``"sse"``, ``"bounds"``,
        ``"mean"``, ``"std"``, ``"silhouette"``, and the names in ``own``.
    all_counted : bool
        The counts must add up to exactly the number of points (every point
        is in one cluster, as in the score request); otherwise they may add
        up to less (a client may withhold small clusters).
    arrays : mapping of str to ndarray, optional
        The model the reply's named arrays must match
        (:func:`validate_named_arrays`, bounded by ``arrays_bound``); without
        it, named arrays in a reply are dropped unread.
    own : sequence of ReplyArray
        The method's own arrays (:attr:`ClientSummary.own`) the reply may
        carry; the others it carries are dropped unread.

    Raises
    ------
    ProtocolError
        Missing entries, wrong shapes, values that are not real numbers, not
        finite or beyond :data:`MAX_MAGNITUDE`, negative or fractional counts,
        negative weights, radii or distances, or counts that add up to more
        than the number of points.
    """
    n = summary.n
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ProtocolError(f"'num-examples' must be a positive integer, got {n!r}")
    n = int(n)
    values = {name: finite_array(np.asarray(value), f"'{name}'")
              for name in SUMMARY_ARRAYS if (value := getattr(summary, name)) is not None}
    for name in SUMMARY_ARRAYS:
        wanted = name in expect or (name in ("low", "high") and "bounds" in expect)
        if wanted and name not in values:
            raise ProtocolError(f"reply lacks the array '{name}'")
    centroids = values.get("centroids")
    if centroids is not None:
        check_shape(centroids, (k, dim), "centroids")
        if k is None:
            k = centroids.shape[0]
    for name in ("mean", "std"):
        if name in values:
            check_shape(values[name], (dim,), name)
    if "std" in values and np.any(values["std"] < 0):
        raise ProtocolError("'std' has negative values")
    for name in ("counts", "weights", "radii"):
        if name not in values:
            continue
        per_cluster = values[name]
        check_shape(per_cluster, (k if k is not None else per_cluster.shape[0],), name)
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
            check_shape(values[name], (dim,), name)
    if "sums" in values:
        check_shape(values["sums"], (k if k is not None else values["sums"].shape[0], dim), "sums")
        if counts is not None and values["sums"].shape[0] != counts.shape[0]:
            raise ProtocolError("'sums' and 'counts' disagree on the number of clusters")
    if "low" in values and "high" in values and np.any(values["low"] > values["high"]):
        raise ProtocolError("'low' exceeds 'high' in some feature")
    sse = summary.sse
    if isinstance(sse, bool) or not isinstance(sse, (int, float)):
        raise ProtocolError(f"'sse' must be a number, got {sse!r}")
    if "sse" in expect and (not math.isfinite(sse) or sse < 0):
        raise ProtocolError(f"'sse' must be a finite non-negative number, got {sse!r}")
    silhouette = summary.silhouette
    if isinstance(silhouette, bool) or not isinstance(silhouette, (int, float)):
        raise ProtocolError(f"'silhouette' must be a number, got {silhouette!r}")
    # Each row's simplified silhouette lies in [-1, 1].
    if "silhouette" in expect and not (math.isfinite(silhouette) and abs(silhouette) <= n):
        raise ProtocolError(f"'silhouette' must be a finite sum of {n} values in [-1, 1], "
                            f"got {silhouette!r}")
    named = None if arrays is None else validate_named_arrays(summary.arrays, arrays, arrays_bound)
    if k is None and counts is not None:
        k = counts.shape[0]
    if dim is None and centroids is not None:
        dim = centroids.shape[1]
    checked_own = _own_arrays(summary.own, own, expect, k, dim) if own else None
    return ClientSummary(n=n, sse=float(sse), silhouette=float(silhouette), arrays=named,
                         own=checked_own, **values)


def _own_arrays(arrays: Any, declared: Sequence[ReplyArray], expect: tuple[str, ...],
                k: int | None, dim: int | None) -> dict[str, np.ndarray] | None:
    """The declared arrays of a method's reply, checked; None if it carries none of them.

    ``k`` and ``dim`` are the clusters and features the reply's shared arrays
    fixed (None: the first own array with such an axis fixes it for the rest).
    """
    if arrays is None:
        arrays = {}
    if not isinstance(arrays, Mapping):
        raise ProtocolError(f"reply's own arrays are not named arrays ({type(arrays).__name__})")
    checked = {}
    for spec in declared:
        if spec.name not in arrays:
            if spec.name in expect:
                raise ProtocolError(f"reply lacks the array '{spec.name}'")
            continue
        value = finite_array(np.asarray(arrays[spec.name]), f"'{spec.name}'")
        check_shape(value, spec.expected(k, dim), spec.name)
        for axis, length in zip(spec.shape, value.shape):
            k = length if axis == "k" and k is None else k
            dim = length if axis == "d" and dim is None else dim
        if spec.nonnegative and np.any(value < 0):
            raise ProtocolError(f"'{spec.name}' has negative values")
        checked[spec.name] = value
    return checked or None


def validate_named_arrays(arrays: Any, reference: Mapping[str, np.ndarray], bound: float
                          ) -> dict[str, np.ndarray]:
    """Check named arrays (a model's weights) against the model they update.

    The names, each array's shape and each dtype must be the reference's
    exactly; every value must be finite and at most ``bound`` in magnitude
    (a reply that would swamp an average is refused, not clipped). Returns
    the arrays in the reference's order.

    Raises
    ------
    ProtocolError
        Naming the first array that differs and how.
    """
    if not isinstance(arrays, Mapping):
        raise ProtocolError("reply lacks its named arrays (the model's weights)")
    if missing := [name for name in reference if name not in arrays]:
        raise ProtocolError(f"named arrays lack {missing[:3]} ({len(missing)} of {len(reference)})")
    if extra := [name for name in arrays if name not in reference]:
        raise ProtocolError(f"named arrays hold {extra[:3]}, which the model does not have")
    checked = {}
    for name, want in reference.items():
        got = arrays[name]
        if not isinstance(got, np.ndarray) or got.dtype != want.dtype or got.shape != want.shape:
            shown = (f"{got.dtype} {got.shape}" if isinstance(got, np.ndarray)
                     else type(got).__name__)
            raise ProtocolError(f"array '{name}' is {shown}, the model's is {want.dtype} {want.shape}")
        if not np.all(np.isfinite(got)):
            raise ProtocolError(f"array '{name}' has non-finite values")
        if got.size and (largest := float(np.max(np.abs(got)))) > bound:
            raise ProtocolError(f"array '{name}' has values beyond +-{bound:g} (largest {largest:.3g})")
        checked[name] = got
    return checked


#: The array fields of a :class:`ClientSummary`, in declaration order: the one list of the
#: arrays a reply may carry (the codec, the reply check and the replies' order use it).
SUMMARY_ARRAYS = tuple(f.name for f in fields(ClientSummary) if f.type == "np.ndarray | None")
