"""The privacy floor: no message leaving a client holds a statistic of fewer than p rows.

A centroid of one row is that row, and a centroid of two rows with one known
gives the other away. Every request carries the run's ``min-cluster-size``
(p); a data owner may raise it for its own node with ``min-cluster-size`` in
its SuperNode's ``--node-config``, and no request can lower it below
:data:`ABSOLUTE_FLOOR`. The client steps apply the floor as each method's
docstring says: a small cluster is withheld (left out of a reply of local
clusters by :func:`keep_large`, or, in a reply about the k global clusters,
sent back by :func:`withhold_small` as the global centroid it was given with
a count of zero, exactly as an empty cluster), and the rest of the reply is
sent. A client of fewer than p x k rows therefore answers with the clusters
of p rows or more it has; only a client of fewer than p rows in all
(:func:`check_rows`) has nothing to send and answers with an error.
:func:`check_reply` then verifies every reply before it leaves, so that no
step can break the floor by mistake: a reply that would is replaced by an
error reply.

Identical rows. p identical rows are p rows: their mean is a value that p
rows of the client share, which is what p allows (the same as any cluster of
p rows whose mean reveals what those p rows have in common). So a centroid
may equal a local row exactly only when at least p local rows (of all the
client's rows, counted exactly) hold that value. A centroid equal to a value
that 1 to p - 1 local rows hold is withheld like a small cluster
(:func:`exposed`), whatever its count: it is either the mean of fewer than p
rows, or a mean of p rows or more that coincides with a rare row, and the
server could not tell the two apart. A cluster of p or more identical rows
is sent; a client whose data hold duplicates answers.

What the floor does not cover: differences between rounds (a cluster of 5
rows in one round and 4 in the next reveals something of the row that left),
which only secure aggregation or differential privacy address.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..numerics import to_numpy
from ..messages import ClientSummary, ProtocolError, request_setting

#: The run-config and node-config key of p.
MIN_CLUSTER_SIZE_KEY = "min-cluster-size"
#: No request lowers p below this: a centroid of a single row is the row.
ABSOLUTE_FLOOR = 2
#: Fewest rows behind a moments reply, whatever p: the mean and standard
#: deviation of two values give both values (mean -+ std) of every feature.
MOMENTS_MIN_ROWS = 3
#: Significant digits kept by :func:`private_bounds`, rounded outward.
BOUNDS_DIGITS = 2


class PrivacyFloorError(ProtocolError):
    """A reply would carry a statistic of fewer than p rows (never sent)."""


def floor_of(config: Mapping[str, Any], node_config: Mapping[str, Any]) -> int:
    """p for this request: the larger of the run's and the data owner's, at least 2."""
    requested = request_setting(config, MIN_CLUSTER_SIZE_KEY, int, lambda v: v >= 1) \
        if MIN_CLUSTER_SIZE_KEY in config else ABSOLUTE_FLOOR
    own = node_config.get(MIN_CLUSTER_SIZE_KEY, ABSOLUTE_FLOOR)
    if not isinstance(own, int) or isinstance(own, bool) or own < 1:
        raise ProtocolError(f"node config '{MIN_CLUSTER_SIZE_KEY}' must be a positive integer, "
                            f"got {own!r}")
    return max(requested, own, ABSOLUTE_FLOOR)


def check_rows(n: int, p: int) -> None:
    """Refuse a request when this client has fewer than p rows: nothing can be sent.

    Every reply's scalars sum over all ``n`` rows, and a cluster needs p rows,
    so a client of fewer rows has no statistic the floor lets out. A client of
    p rows or more always answers: with fewer than p rows per requested
    cluster it sends the clusters of p rows it has and withholds the others.
    """
    if n < p:
        raise PrivacyFloorError(f"this client has {n} rows, fewer than min-cluster-size {p}: "
                                "it cannot take part without revealing single rows")


def withhold_small(X, centroids: np.ndarray, counts: np.ndarray, sizes: np.ndarray, p: int,
                   given: np.ndarray, *more: np.ndarray) -> tuple[np.ndarray, ...]:
    """A reply about the k global clusters, with every cluster the floor forbids withheld.

    ``sizes`` are the rows behind each centroid, ``counts`` the weights sent
    with them (often the same). A cluster is withheld when fewer than p rows
    are behind its centroid, when its count is positive but below p (a
    count of 0 with a centroid of p rows or more is sent: DWF's first
    assignment may leave a cluster empty that a later local step fills), or
    when its centroid equals a value fewer than p of the local rows ``X``
    hold (:func:`exposed`). A withheld cluster goes back as the global
    centroid ``given`` by the server, with count 0 and 0 in each of ``more``
    (supports), which the server treats as a cluster this client has no rows
    of. Returns ``(centroids, counts, *more)`` as new arrays.
    """
    small = (sizes < p) | ((counts > 0) & (counts < p)) | exposed(X, centroids, p)
    centroids = np.where(small[:, None], given, centroids)
    return (centroids, *(np.where(small, 0.0, a) for a in (counts, *more)))


def withhold_small_sums(X, sums: np.ndarray, counts: np.ndarray, sizes: np.ndarray, p: int
                        ) -> tuple[np.ndarray, np.ndarray]:
    """A sum-form reply (per-cluster sums and counts) with every cluster the floor forbids withheld.

    The same rule as :func:`withhold_small` for the cluster's mean ``sums /
    counts``: withheld when fewer than p rows are behind it (``sizes``) or
    when that mean equals a value fewer than p local rows hold; a withheld
    cluster is sent as sums 0 and count 0, which adds nothing to the totals.
    Returns new arrays.
    """
    sums = np.asarray(sums, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    filled = counts > 0
    means = sums / np.where(filled, counts, 1.0)[:, None]
    small = (np.asarray(sizes) < p) | (filled & exposed(X, means, p))
    return np.where(small[:, None], 0.0, sums), np.where(small, 0.0, counts)


def keep_large(X, centroids: np.ndarray, counts: np.ndarray, p: int) -> np.ndarray:
    """Mask of the local clusters a reply may carry (the others are left out of it).

    A cluster is kept when it has at least p rows and its centroid equals no
    value that fewer than p of the local rows ``X`` hold (:func:`exposed`).
    """
    return (counts >= p) & ~exposed(X, centroids, p)


def exposed(X, centroids: np.ndarray, p: int) -> np.ndarray:
    """Mask of the ``centroids`` equal to a value that 1 to p - 1 of the local rows hold.

    Exact comparison of float64 values (-0.0 equals 0.0): a centroid within
    rounding of a row is not that row. A centroid that p or more local rows
    equal reveals a value shared by p rows and is not exposed (see the
    module's "Identical rows").
    """
    holders, _ = _equal_rows(to_numpy(X), np.asarray(centroids, dtype=np.float64))
    return (holders > 0) & (holders < p)


def private_bounds(X, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature bounds that reveal no row: means of p extreme values, rounded outward.

    The lower bound of a feature is the mean of its p smallest values rounded
    down to :data:`BOUNDS_DIGITS` significant digits, the upper bound the mean
    of its p largest rounded up: each is a statistic of p rows, coarsened, and
    the box still covers all but the most extreme rows (a random start only
    needs the region of the data).
    """
    X = to_numpy(X)
    p = min(p, X.shape[0])
    ordered = np.sort(X, axis=0)
    low = ordered[:p].mean(axis=0)
    high = ordered[-p:].mean(axis=0)
    return _round_outward(low, np.floor), _round_outward(high, np.ceil)


def _round_outward(values: np.ndarray, direction) -> np.ndarray:
    magnitude = np.abs(values)
    exponent = np.floor(np.log10(np.where(magnitude > 0, magnitude, 1.0))) - (BOUNDS_DIGITS - 1)
    step = 10.0 ** exponent
    return np.where(magnitude > 0, direction(values / step) * step, 0.0)


def check_reply(X, summary: ClientSummary, p: int, given: np.ndarray | None) -> None:
    """Verify that ``summary`` respects the floor before it leaves the client.

    No count may lie between 0 and p (exclusive), and no centroid may equal a
    value that fewer than p local rows hold (which catches a centroid of one
    row whatever its count, and lets through a cluster of p identical rows;
    a centroid of 0 count that is not the one the request carried is made of
    at least p rows by the step that sent it); the client must hold at least
    p rows.

    Raises
    ------
    PrivacyFloorError
        Naming the first violation; the client then sends an error reply.
    """
    check_rows(summary.n, p)
    if summary.mean is not None or summary.std is not None or not math.isnan(summary.silhouette):
        _check_over_all_rows(X, summary, p)
    if summary.centroids is None:
        return
    centroids = np.asarray(summary.centroids, dtype=np.float64)
    counts = summary.counts
    if counts is None:
        raise PrivacyFloorError("a reply with centroids must say how many rows each holds")
    for j in np.flatnonzero((counts > 0) & (counts < p)):
        raise PrivacyFloorError(
            f"centroid {j} stands for {counts[j]:g} rows, fewer than min-cluster-size {p}")
    returned = np.zeros(len(centroids), dtype=bool)
    if given is not None and given.shape == centroids.shape:
        returned = np.all(centroids == given, axis=1)
    holders, first = _equal_rows(to_numpy(X), centroids)
    for j in np.flatnonzero(~returned & (holders > 0) & (holders < p)):
        raise PrivacyFloorError(
            f"centroid {j} equals local row {first[j]} exactly, a value {holders[j]} local row(s) "
            f"hold, fewer than min-cluster-size {p}")


def _check_over_all_rows(X, summary: ClientSummary, p: int) -> None:
    """A moments or silhouette reply must be a statistic of every local row (at least p).

    Its count is the client's row count, not a number the step chose, and a
    moments reply needs :data:`MOMENTS_MIN_ROWS` rows.
    """
    if summary.n != X.shape[0]:
        raise PrivacyFloorError(f"a reply of sums over the rows declares {summary.n} rows, but the "
                                f"client holds {X.shape[0]}")
    if summary.mean is not None or summary.std is not None:
        check_rows(summary.n, max(p, MOMENTS_MIN_ROWS))


def _equal_rows(X: np.ndarray, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per centroid, how many rows of ``X`` equal it exactly, and the first of them (-1: none).

    A row can equal a centroid only if its first feature equals that
    centroid's, which keeps the rows worth a closer look: usually none on
    continuous data, where hashing every row took a fifth of a local fit at
    k = 16 (NumPy's ``isin`` compares one column with each of a few values,
    and sorts when they are many). Those rows are hashed (their float64 bit
    patterns, -0.0 as 0.0), and only rows whose hash matches a centroid's are
    compared with it, so data whose first feature is often shared (pixels,
    categories) cost one hash per row as before.
    """
    X = np.asarray(X, dtype=np.float64)
    holders = np.zeros(len(centroids), dtype=np.int64)
    first = np.full(len(centroids), -1, dtype=np.int64)
    near = np.flatnonzero(np.isin(X[:, 0], centroids[:, 0]))
    rows, wanted = _row_hashes(X[near]), _row_hashes(centroids)
    match = np.isin(rows, wanted)
    hits, rows = near[match], rows[match]
    for j in np.flatnonzero(np.isin(wanted, rows)):
        same = hits[rows == wanted[j]]
        equal = same[np.all(X[same] == centroids[j], axis=1)]
        holders[j] = len(equal)
        first[j] = equal[0] if len(equal) else -1
    return holders, first


def _row_hashes(A: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(A + 0.0).view(np.uint64)
    hashes = np.full(A.shape[0], 0xCBF29CE484222325, dtype=np.uint64)
    for column in bits.T:
        hashes ^= column
        hashes *= np.uint64(0x100000001B3)
    return hashes
