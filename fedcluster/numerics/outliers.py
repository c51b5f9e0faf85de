"""Clients whose declared figures are outliers among the others' (Flower-free).

Three checks the server runs on what the replies carry anyway, so that one
careless or lying client cannot capture the model's start or its reported
score (issue 24):

* :func:`spread_outliers`: a client whose per-feature spread is ``ratio``
  times the other clients' (data in other units), from local centroids and
  counts;
* :func:`declared_row_factors`: how much of each client's declared row count
  the federated score and ``n_points`` believe, against the median client's;
* :func:`reach_outliers`: a client whose centroids (or bounds) lie ``ratio``
  times farther from the federation's centre than the other clients'.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: A client whose per-feature spread is this many times the median of the other clients' is
#: named by DWF's rounds and kept out of the starts (honest federations: 40 at most; see
#: :func:`spread_outliers`).
SPREAD_RATIO = 100.0
#: A client declaring more than this many times the median client's rows is an
#: outlier for the aggregations and the score (see :func:`declared_row_factors` for the margin).
ROW_CAP_MULTIPLE = 1000.0
#: A reply whose points reach this many times farther from the federation's centre than the
#: other clients' is rejected. Honest federations (starts and rounds): 5.4 at most (wine,
#: distance:10, 10 clients), S1-S4 1.6, digits 3.4, breast-cancer 3.3; a client of S1 (data in
#: [0, 1e6]) sending one centroid at (5e6, 5e6): 12.5; every centroid at 1e7: about 25 (see
#: :func:`reach_outliers` and :func:`fedcluster.strategies.initialisation.reject_far_replies`).
REACH_RATIO = 10.0
#: How many of the other clients' farthest reaches :func:`reach_outliers` leaves out of its
#: reference: up to one client more than this telling one lie together are still caught.
REACH_SKIPPED = 1

__all__ = ["REACH_RATIO", "ROW_CAP_MULTIPLE", "SPREAD_RATIO", "declared_row_factors",
           "reach_outliers", "reach_reference", "spread_outliers"]


def declared_row_factors(rows: Sequence[float], *, multiple: float = ROW_CAP_MULTIPLE
                         ) -> np.ndarray:
    """The share of each client's declared rows that the federated score believes.

    A client declaring more than ``multiple`` times the median of all
    clients' declared rows is counted as the median client: its factor is
    ``median / rows`` (its rows, counts and fuzzy weights are scaled by it
    in the aggregations, ``n_points`` and the counts; the exact score leaves
    it out of its mean, :func:`fedcluster.strategies.base.exact_score`);
    every other client's factor is exactly 1.0, so a federation without
    such a client gets what it always got, bit for bit. The federated score
    then cannot move however many rows one client declares (a liar of 5
    declaring x1e9 moved it 10^8-fold before), and the client weighs as one
    typical client in a weighted mean.

    Why the median and not a cap at ``multiple x median``: an honest client
    can hold 13 times the median client's rows (below), so the cap must sit
    well above that, and a liar counted at ``multiple`` times the median
    would still own ``multiple / (m - 1 + multiple)`` of the score; counted
    at the median it owns ``1 / m``. What it does not bound: a liar
    declaring just under the threshold keeps that weight (at most ``multiple``
    typical clients); a client counted at the median that truly holds so
    many rows has its mean weighted as one client's (it is named in the
    log); with fewer than 3 clients the median is no reference (every factor
    is 1).

    Why ``multiple`` = 1000 (:data:`ROW_CAP_MULTIPLE`): over every partition
    of the committed benchmark grids (``benchmarks/*.toml`` with results;
    457 partitions: IID, half-IID, Dirichlet 0.1 and 0.3, k-means non-IID,
    distance 0.1 / 1 / 10, by-label; 5 to 100 clients), the largest client
    held at most 13.2 times the median client's rows (breast-cancer,
    k-means non-IID, 50 clients; Dirichlet 0.3: 1.55; Dirichlet 0.1: 5.2;
    distance 0.1: 6.4). But where most owners are small the median is a small
    one: two sites of 2,500 rows beside owners of 3, 20 and 24 rows
    (``tests/test_floor_every_owner.py``) hold 104 times the median, and 100
    counted both as 24-row clients. 1000 leaves a margin of 9.6 over that
    federation and still names a client declaring 10^9 times its rows; a
    federation more skewed than 1000 : 1 (one site of a million rows beside
    clinics of a hundred) needs ``--trust-clients``.

    Parameters
    ----------
    rows : sequence of float
        Each client's declared number of rows (> 0).
    multiple : float
        How many times the median client's rows make a client an outlier.

    Returns
    -------
    numpy.ndarray of shape (m,), float64
        Each client's factor, in ``(0, 1]``.
    """
    rows = np.asarray(rows, dtype=np.float64)
    factors = np.ones(len(rows))
    if len(rows) < 3:
        return factors
    median = float(np.median(rows))
    outliers = rows > multiple * median
    factors[outliers] = median / rows[outliers]
    return factors


def spread_outliers(
    local_centroids: Sequence[np.ndarray],
    counts: Sequence[np.ndarray],
    *,
    ratio: float = SPREAD_RATIO,
    floor: float = 0.1,
) -> list[tuple[int, int, float]]:
    """Clients whose per-feature spread is ``ratio`` times the other clients' or more.

    A client's spread in feature f is the count-weighted root mean square
    distance of its centroids from a common centre, ``sqrt(sum_j n_ij (c_ijf -
    z_f)^2 / sum_j n_ij)``, where ``z`` is the per-feature median over the
    clients of their count-weighted centroid means. It is the spread of the
    client's data (coarsened to its centroids) around the federation's centre,
    computed from the local centroids and counts the replies carry (a Lloyd
    round's or a local k-means'), so it reveals no row. A client whose data is
    in other units (x 1e3, x 1e6) or far from everybody else's has a spread
    that many times the others'. Each client is compared with the median of
    the other clients' spreads in that feature, floored at ``floor`` times the
    median of the others' spreads over all features (root mean square), so
    that a nearly constant feature (an image's border pixel, a rare one-hot
    category) is not flagged for a few non-zero values: with features of one
    range, an honest client's ratio stays below about ``1 / floor`` times that
    range over the typical spread. The price: in a feature whose spread is far
    below the other features' (mixed scales), a client is flagged only when it
    exceeds ``ratio * floor`` times the typical overall spread. A spread many
    times *smaller* than the others' is not flagged: a client whose rows all
    sit near the centre looks so too.

    On honest federations the largest ratio seen was 3 on S1 and S4 (IID,
    Dirichlet 0.1, k-means non-IID, half-IID; 10 and 50 clients), 5 on the
    DWF paper's blobs, 40 on digits and 39 on MNIST (k-means non-IID, the most
    skewed split); data times 1e6 gives about 2e6.

    Parameters
    ----------
    local_centroids : sequence of arrays of shape (k_i, n_features)
        Each client's local centroids (the number may differ between clients).
    counts : sequence of arrays of shape (k_i,)
        Each client's points per centroid; clients with no counted point are
        left out.
    ratio : float
        How many times the others' spread flags a client.
    floor : float
        Relative floor of the others' per-feature spread (see above).

    Returns
    -------
    list of (client index, feature, ratio)
        One entry per flagged client, for its feature with the largest ratio.
        Empty with fewer than three clients: with two, neither can be blamed.
    """
    means, totals = [], []
    for centroids, weights in zip(local_centroids, counts):
        centroids = np.asarray(centroids, dtype=np.float64)
        weights = np.asarray(weights, dtype=np.float64)
        total = float(weights.sum())
        totals.append(total)
        means.append(weights @ centroids / total if total > 0 else None)
    usable = [i for i, mean in enumerate(means) if mean is not None]
    if len(usable) < 3:
        return []
    centre = np.median(np.stack([means[i] for i in usable]), axis=0)
    spreads = np.stack([
        np.sqrt(np.asarray(counts[i], dtype=np.float64)
                @ (np.asarray(local_centroids[i], dtype=np.float64) - centre) ** 2 / totals[i])
        for i in usable
    ])
    overall = np.sqrt(np.mean(spreads ** 2, axis=1, keepdims=True))
    reference = np.maximum(_median_of_the_others(spreads), floor * _median_of_the_others(overall))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(reference > 0, spreads / np.where(reference > 0, reference, 1.0), 0.0)
    return _flagged(ratios, usable, ratio)


def _flagged(ratios: np.ndarray, clients: Sequence[int], ratio: float
             ) -> list[tuple[int, int, float]]:
    """(client, feature, ratio) of each row whose largest ratio is ``ratio`` or more."""
    features = np.argmax(ratios, axis=1)
    return [(i, int(f), float(ratios[row, f]))
            for row, (i, f) in enumerate(zip(clients, features)) if ratios[row, f] >= ratio]


def _median_of_the_others(values: np.ndarray) -> np.ndarray:
    """Row i: the per-column median of every row but i, exactly, from one sort (m >= 2)."""
    m = values.shape[0]
    order = np.argsort(values, axis=0, kind="stable")
    ordered = np.take_along_axis(values, order, axis=0)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(m)[:, None], order.shape), axis=0)

    def remaining(q: int) -> np.ndarray:  # the q-th smallest once row i is left out
        return np.where(q < rank, ordered[q][None, :], ordered[min(q + 1, m - 1)][None, :])

    return (remaining((m - 2) // 2) + remaining((m - 1) // 2)) / 2


def reach_outliers(
    points: Sequence[np.ndarray],
    *,
    ratio: float = REACH_RATIO,
    reference: np.ndarray | None = None,
) -> list[tuple[int, int, float]]:
    """Clients whose points reach ``ratio`` times farther than the other clients' or more.

    ``points[i]`` are what client i's reply places in feature space: its
    local centroids (those that hold points), or its per-feature bounds as
    two points. The centre ``z`` is the per-feature median over the clients
    of the midpoints of their points' ranges; client i's reach in feature f
    is ``max_j |p_ijf - z_f|``, how far its farthest point lies from the
    federation's centre. Each reach is compared with the *second largest*
    of the other clients' reaches in that feature (:data:`REACH_SKIPPED`
    largest left out), floored at the same statistic of their root mean
    square reach over all features. Why the second largest: the reference is
    the federation's extent, as the clients that reach farthest see it, not a
    typical client's (in a Dirichlet 0.1 split of breast-cancer three of ten
    honest clients hold the far cluster, and a median client's reach is a
    twentieth of theirs); leaving the largest out means two clients telling
    one lie together are still measured against an honest reach. Three are
    not, and an honest cluster held by one client only, 10 times farther
    than everything else, is rejected (``--trust-clients``). With three
    clients the farther of the two others is the reference (one of them
    alone is no federation's extent). A liar is never part of its own
    reference. The floor: a nearly constant feature
    (a border pixel, a rare one-hot category) is measured against the data's
    typical scale, not against zero; its price is that in a feature whose
    scale is far below the others' (mixed units) a lie is bounded only by
    ``ratio`` times the typical scale (``--standardize`` gives every feature
    one scale).

    A reach, unlike a spread, is bounded for an honest client by the data's
    own extent from its centre, however its rows are split. Measured ratios
    on honest federations: see :data:`REACH_RATIO`.

    With ``reference`` (a :func:`reach_reference` of an earlier step over
    more clients, the start's), every client is measured against it instead,
    from its centre: a round that samples five clients of fifty, each
    holding one cluster, is then not judged by those five alone.

    Parameters
    ----------
    points : sequence of arrays of shape (r_i, n_features)
        Each client's points; a client with none is left out.
    ratio : float
        How many times the others' reach flags a client.
    reference : array of shape (2, n_features), optional
        The centre and the reference reach per feature (:func:`reach_reference`).

    Returns
    -------
    list of (client index, feature, ratio)
        One entry per flagged client, for its feature with the largest ratio.
        Without ``reference``, empty with fewer than three usable clients
        (with two, neither can be blamed).
    """
    usable = [i for i, p in enumerate(points) if len(p)]
    if not usable or (reference is None and len(usable) < 3):
        return []
    clouds = [np.asarray(points[i], dtype=np.float64) for i in usable]
    centre = _centre(clouds) if reference is None else reference[0]
    reaches = _reaches(clouds, centre)
    if reference is None:
        overall = np.sqrt(np.mean(reaches ** 2, axis=1, keepdims=True))
        scale = np.maximum(_largest_of_the_others(reaches, REACH_SKIPPED),
                           _largest_of_the_others(overall, REACH_SKIPPED))
    else:
        scale = reference[1][None, :]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratios = np.where(scale > 0, reaches / np.where(scale > 0, scale, 1.0),
                          np.where(reaches > 0, np.inf, 0.0))
    return _flagged(ratios, usable, ratio)


def reach_reference(points: Sequence[np.ndarray]) -> np.ndarray | None:
    """The centre and reference reach of :func:`reach_outliers` over every client's points.

    The reference of the whole federation: per feature, the second largest
    reach (:data:`REACH_SKIPPED` largest left out), floored as there; the
    clients a check has rejected should be left out of ``points``. None with
    fewer than three usable clients.

    Returns
    -------
    numpy.ndarray of shape (2, n_features) or None
        Row 0 the centre, row 1 the reference reach.
    """
    clouds = [np.asarray(p, dtype=np.float64) for p in points if len(p)]
    if len(clouds) < 3:
        return None
    centre = _centre(clouds)
    reaches = _reaches(clouds, centre)
    overall = np.sqrt(np.mean(reaches ** 2, axis=1, keepdims=True))
    rank = min(REACH_SKIPPED, len(clouds) - 2)
    scale = np.maximum(-np.sort(-reaches, axis=0)[rank], -np.sort(-overall, axis=0)[rank])
    return np.stack([centre, scale])


def _centre(clouds: Sequence[np.ndarray]) -> np.ndarray:
    """The per-feature median over the clients of their points' midranges."""
    return np.median(np.stack([(c.min(axis=0) + c.max(axis=0)) / 2 for c in clouds]), axis=0)


def _reaches(clouds: Sequence[np.ndarray], centre: np.ndarray) -> np.ndarray:
    """Row i: how far client i's farthest point lies from ``centre``, per feature."""
    return np.stack([np.abs(c - centre).max(axis=0) for c in clouds])


def _largest_of_the_others(values: np.ndarray, skipped: int) -> np.ndarray:
    """Row i: per column, the largest value of every row but i once the ``skipped`` largest are
    left out, as long as two rows are left to choose from (m >= 3)."""
    m = values.shape[0]
    rank = max(0, min(skipped, m - 3))
    return np.stack([-np.sort(-np.delete(values, i, axis=0), axis=0)[rank] for i in range(m)])
