"""FeCA, Federated Centroid Aggregation (Xu, Chen, Chao & Zhang, "Jigsaw Game", paper ``004``).

Flower-free steps of Algorithm 1:

* client (:func:`feca_client_update`): from the centroids of the client's
  local Lloyd run, remove one-fit-many centroids (Algorithm 2,
  :func:`remove_one_fit_many`) and give each remaining centroid a radius
  (Algorithm 4, :func:`empirical_radii`, or Algorithm 3,
  :func:`theoretical_radius`), each a statistic of at least p rows (see
  "Radii and the privacy floor" below);
* server (:func:`feca_aggregate`): group all received centroids, largest
  radius first, and return the means of the ``k`` largest groups
  (Algorithm 5, :func:`group_by_radius`).

Where the paper leaves a detail open, the choice is stated in the function
that makes it.

Radii and the privacy floor. The paper's ``r'_i`` (Algorithms 3 and 4, line
3 and 2) is the largest distance from a row of ``D_i`` to ``c_i``: the
distance of one row, which with the centroid sent places that row on a
sphere (in one dimension, at one of two points). Here ``r'_i`` is the mean
of the p largest distances from rows of ``D_i`` to ``c_i`` (p the client's
``min-cluster-size``; p = 1 is the paper's maximum), a statistic of p rows
like every other value sent. Not the p-th largest distance: that is one
row's distance again. The mean of the p largest lies between the p-th
largest distance and the largest, so the radius still aims at the cluster's
outer edge as the paper intends (a quantile of the distances would sit
further in, and is again one row's distance unless interpolated); what it
costs is a smaller ``r'_i`` (more so for small or skewed clusters, whose
farthest row stands far out), so Algorithm 4's ``min(r'_i, d_ij / 2)`` more
often takes ``r'_i`` and the server's groups (Algorithm 5) come out smaller.
The clusters are those of the centroids the floor lets out: the rows of a
withheld local cluster belong to no cluster sent (they would otherwise join
the nearest sent one and set its radius), and ``d_ij`` runs over sent
centroids only. The data may be NumPy or CuPy (only :func:`cluster_geometry`
reads it); everything after works on a few summaries per cluster on the host.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import numpy as np

from ...numerics._validation import check_positive_int
from ...numerics.backend import namespace_of, to_numpy
from ...numerics.distance import sq_distances
from ...numerics.lloyd import DEFAULT_CHUNK_SIZE, assign, cluster_stats

__all__ = [
    "RADIUS_RULES",
    "ClientUpdate",
    "ClusterGeometry",
    "ServerAggregate",
    "cluster_geometry",
    "empirical_radii",
    "feca_aggregate",
    "feca_client_update",
    "group_by_radius",
    "merged_sse",
    "remove_one_fit_many",
    "theoretical_radius",
]

#: Radius rules of the client: Algorithm 4 (the paper's default for experiments)
#: and Algorithm 3 (the variant of its theory, Theorem 4.1).
RADIUS_RULES = ("algorithm4", "theoretical")
RadiusRule = Literal["algorithm4", "theoretical"]


class ClusterGeometry(NamedTuple):
    """What Algorithms 2-4 need to know of each local cluster ``D_i`` (host arrays).

    Attributes
    ----------
    counts : ndarray of shape (k,)
        ``|D_i|``, the points nearest to centroid ``c_i``.
    means : ndarray of shape (k, d)
        Mean of ``D_i`` (``c_i`` itself once Lloyd has converged).
    sse : ndarray of shape (k,)
        ``G_i = sum_{x in D_i} ||x - c_i||^2`` (eq. 3).
    reach : ndarray of shape (k,)
        ``r'_i`` of Algorithms 3 and 4: the mean of the ``min_rows`` largest
        distances ``||x - c_i||``, ``x`` in ``D_i`` (the paper's maximum for
        ``min_rows = 1``; see the module's "Radii and the privacy floor");
        the mean of all of them for a cluster of fewer rows, 0 for an empty
        one.
    """

    counts: np.ndarray
    means: np.ndarray
    sse: np.ndarray
    reach: np.ndarray

    def subset(self, rows: np.ndarray) -> ClusterGeometry:
        """The geometry of the clusters selected by ``rows`` (mask or indices)."""
        return ClusterGeometry(*(field[rows] for field in self))


class ClientUpdate(NamedTuple):
    """What a FeCA client sends: refined centroids with their radii and sizes.

    Attributes
    ----------
    centroids : ndarray of shape (k_m, d)
        The centroids Algorithm 2 keeps, in their Lloyd order.
    radii : ndarray of shape (k_m,)
        Their radii (Algorithm 4, or Algorithm 3's uniform radius).
    counts : ndarray of shape (k_m,)
        Their cluster sizes ``|D_i|``.
    """

    centroids: np.ndarray
    radii: np.ndarray
    counts: np.ndarray


class ServerAggregate(NamedTuple):
    """Outcome of Algorithm 5.

    Attributes
    ----------
    centroids : ndarray of shape (min(k, n_groups), d)
        Means of the largest groups, largest first.
    members : list of ndarray
        Indices (into the received centroids) of each returned group, in the
        order of `centroids`.
    n_groups : int
        Number of groups Algorithm 5 formed before keeping the ``k`` largest.
    """

    centroids: np.ndarray
    members: list[np.ndarray]
    n_groups: int


def _as_centroids(centroids: Any, name: str = "centroids") -> np.ndarray:
    centroids = np.asarray(to_numpy(centroids), dtype=np.float64)
    if centroids.ndim != 2 or centroids.shape[1] < 1:
        raise ValueError(f"{name} must be a 2-D array of shape (k, d), got shape {centroids.shape}")
    if not np.all(np.isfinite(centroids)):
        raise ValueError(f"{name} must not contain NaN or infinity")
    return centroids


def _as_per_centroid(values: Any, k: int, name: str) -> np.ndarray:
    values = np.asarray(to_numpy(values), dtype=np.float64)
    if values.shape != (k,):
        raise ValueError(f"{name} must have shape ({k},), one value per centroid, got {values.shape}")
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError(f"{name} must be finite and non-negative")
    return values


def _pairwise_distances(centroids: np.ndarray) -> np.ndarray:
    """Euclidean distances between all pairs of rows (the direct form: exact to rounding)."""
    return np.sqrt(sq_distances(centroids, centroids))


def _nearest_other(distances: np.ndarray) -> np.ndarray:
    """Distance from each row to its nearest other row (inf for a single row)."""
    masked = distances + np.diag(np.full(len(distances), np.inf))
    return masked.min(axis=1)


def cluster_geometry(X: Any, centroids: Any, *, min_rows: int = 1,
                     chunk_size: int = DEFAULT_CHUNK_SIZE) -> ClusterGeometry:
    """Assign the samples to their nearest centroid and summarise each cluster.

    Parameters
    ----------
    X : array of shape (n_samples, d)
        The client's samples (NumPy or CuPy).
    centroids : array of shape (k, d)
        The client's Lloyd centroids ``C^(m)``.
    min_rows : int, default=1
        Rows behind each ``r'_i`` (p of the privacy floor).
    chunk_size : int, default=DEFAULT_CHUNK_SIZE
        Number of rows processed at once.

    Returns
    -------
    ClusterGeometry
        On the host; the clusters ``D_i`` are the Voronoi sets of the
        centroids (ties to the lowest index), as in the paper's appendix A.
    """
    xp = namespace_of(X)
    min_rows = check_positive_int(min_rows, "min_rows")
    centroids = xp.asarray(centroids, dtype=xp.float64)
    stats = cluster_stats(X, centroids, chunk_size=chunk_size)
    labels, sqdist = assign(X, centroids, chunk_size=chunk_size)
    k = centroids.shape[0]
    # Per-cluster sums of squares on the data's device: only k numbers come to
    # the host, not the n labels and distances (and k x min_rows for reach).
    sse = xp.bincount(labels, weights=sqdist, minlength=k)
    counts = to_numpy(stats.counts)
    filled = np.where(counts > 0, counts, 1.0)
    means = np.where(counts[:, None] > 0, to_numpy(stats.sums) / filled[:, None], to_numpy(centroids))
    return ClusterGeometry(counts, means, to_numpy(sse), _mean_of_largest(labels, sqdist, counts, min_rows))


def _mean_of_largest(labels, sqdist, counts: np.ndarray, m: int) -> np.ndarray:
    """Per cluster, the mean of its ``m`` largest distances (of all, if fewer; 0 if none).

    Sorting the rows by cluster, then by distance, puts each cluster's ``m``
    farthest rows at the end of its run; only those ``k x m`` distances come
    to the host.
    """
    xp = namespace_of(sqdist)
    order = xp.lexsort(xp.stack([sqdist, labels.astype(xp.float64)]))
    ends = np.cumsum(counts).astype(np.int64)
    taken = np.minimum(counts, m).astype(np.int64)
    steps = np.arange(m)
    valid = steps[None, :] < taken[:, None]
    rows = np.where(valid, ends[:, None] - 1 - steps[None, :], 0)
    distances = np.sqrt(np.maximum(to_numpy(sqdist[order][xp.asarray(rows)]), 0.0))
    return np.where(valid, distances, 0.0).sum(axis=1) / np.maximum(taken, 1)


def merged_sse(centroids: np.ndarray, geometry: ClusterGeometry, p: int, q: int) -> float:
    """``G_j`` of eq. 4: squared distances of ``D_p u D_q`` to their common mean ``c_j``.

    By Huygens' theorem, with ``m_s`` the mean of ``D_s`` and
    ``W_s = G_s - |D_s| ||m_s - c_s||^2`` its squared distances to ``m_s``,
    ``G_j = W_p + W_q + |D_p| |D_q| / (|D_p| + |D_q|) ||m_p - m_q||^2``: no
    second pass over the data.
    """
    n_p, n_q = geometry.counts[p], geometry.counts[q]
    within = [max(geometry.sse[s] - geometry.counts[s] * np.sum((geometry.means[s] - centroids[s]) ** 2),
                  0.0) for s in (p, q)]
    between = n_p * n_q / (n_p + n_q) * np.sum((geometry.means[p] - geometry.means[q]) ** 2)
    return float(within[0] + within[1] + between)


def remove_one_fit_many(centroids: Any, geometry: ClusterGeometry) -> np.ndarray:
    """Algorithm 2, lines 3-13: which centroids survive the removal of one-fit-many centroids.

    Each pass takes the candidate one-fit-many centroid ``c_i`` (the cluster
    with the largest standard deviation) and the candidate many-fit-one pair
    ``c_p, c_q`` (the smallest pairwise distance), and removes ``c_i`` with its
    cluster if ``G_i >= G_j`` (eq. 3, eq. 4); otherwise, or when fewer than two
    centroids are left, it stops. ``c_p`` and ``c_q`` are only merged
    tentatively: they stay.

    The standard deviation of cluster ``D_i`` is ``sqrt(G_i / |D_i|)``, the
    root mean squared deviation of its points from their centroid (a point's
    deviation being its distance to ``c_i``, appendix A.1). The paper's
    wording ("standard deviation of distances to c_i") could also mean the
    spread of the distance values about their own mean; that spread is small
    for a centroid midway between clusters, whose points are all about
    equally far, and would not single it out.

    With two centroids at a Lloyd fixed point nothing is ever removed: the
    only pair is the candidate and the other, and their merged cluster costs
    at least the candidate's own (``G_j >= G_i``). A local solution of
    ``k' = 2`` that spends one centroid on a few outlying rows and the other
    on all the rest is therefore sent as it is (the paper's own limit at
    k = 2, not relieved here: the paper refines a single Lloyd solution).

    Parameters
    ----------
    centroids : array of shape (k, d)
        The client's centroids.
    geometry : ClusterGeometry
        Their clusters (:func:`cluster_geometry`); every cluster must hold a point.

    Returns
    -------
    ndarray of bool, shape (k,)
        True for the centroids kept. Ties (largest deviation, closest pair) go
        to the lowest indices.
    """
    centroids = _as_centroids(centroids)
    k = centroids.shape[0]
    counts = _as_per_centroid(geometry.counts, k, "geometry.counts")
    if np.any(counts <= 0):
        raise ValueError("every cluster must hold at least one point; drop empty clusters first")
    sse = _as_per_centroid(geometry.sse, k, "geometry.sse")
    spread = np.sqrt(sse / counts)
    distances = _pairwise_distances(centroids)
    keep = np.ones(k, dtype=bool)
    while np.count_nonzero(keep) >= 2:
        alive = np.flatnonzero(keep)
        i = alive[np.argmax(spread[alive])]
        between = distances[np.ix_(alive, alive)] + np.diag(np.full(len(alive), np.inf))
        a, b = np.unravel_index(np.argmin(between), between.shape)
        p, q = sorted((alive[a], alive[b]))
        if sse[i] >= merged_sse(centroids, geometry, p, q):
            keep[i] = False
        else:
            break
    return keep


def empirical_radii(centroids: Any, reach: Any) -> np.ndarray:
    """Algorithm 4: ``r_i = min(r'_i, d_ij / 2)``, ``d_ij`` the distance to the nearest other centroid.

    A client left with a single centroid has no ``d_ij``; its radius is
    ``r'_i`` (the minimum over the one term there is).

    Parameters
    ----------
    centroids : array of shape (k, d)
        The centroids Algorithm 2 kept.
    reach : array of shape (k,)
        ``r'_i`` of :class:`ClusterGeometry` (the paper's largest distance
        from a point of ``D_i`` to ``c_i``, here the mean of the p largest).

    Returns
    -------
    ndarray of shape (k,)
    """
    centroids = _as_centroids(centroids)
    reach = _as_per_centroid(reach, centroids.shape[0], "reach")
    return np.minimum(reach, 0.5 * _nearest_other(_pairwise_distances(centroids)))


def theoretical_radius(centroids: Any, reach: Any) -> float:
    """Algorithm 3: half the smallest distance between centroids that are not many-fit-one.

    Visiting the centroids in index order (lines 4-9), a centroid still in the
    tentative set is removed together with its nearest remaining neighbour
    ``c_j`` when their balls overlap, ``r'_i + r'_j > d_ij``; the radius is
    half the smallest pairwise distance of the centroids left (lines 10-11).

    If fewer than two centroids are left, the paper's radius is undefined;
    the smallest distance between all the given centroids stands in for it
    (Algorithm 3 without its many-fit-one filter), and a single centroid gets
    ``r'_1``, as Algorithm 4 would give it.

    Parameters
    ----------
    centroids : array of shape (k, d)
        The centroids Algorithm 2 kept.
    reach : array of shape (k,)
        ``r'_i`` of :class:`ClusterGeometry` (the paper's largest distance
        from a point of ``D_i`` to ``c_i``, here the mean of the p largest).

    Returns
    -------
    float
        The client's uniform radius ``r^(m)``.
    """
    centroids = _as_centroids(centroids)
    k = centroids.shape[0]
    reach = _as_per_centroid(reach, k, "reach")
    if k == 1:
        return float(reach[0])
    distances = _pairwise_distances(centroids)
    tentative = np.ones(k, dtype=bool)
    for i in range(k):
        others = np.flatnonzero(tentative)
        others = others[others != i]
        if not tentative[i] or len(others) == 0:
            continue
        j = others[np.argmin(distances[i, others])]
        if reach[i] + reach[j] > distances[i, j]:
            tentative[[i, j]] = False
    rows = tentative if np.count_nonzero(tentative) >= 2 else np.ones(k, dtype=bool)
    return float(0.5 * _nearest_other(distances[np.ix_(rows, rows)]).min())


def feca_client_update(
    X: Any,
    centroids: Any,
    sizes: Any,
    *,
    sendable: Any = None,
    min_rows: int = 1,
    radius: RadiusRule = "algorithm4",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> ClientUpdate:
    """A FeCA client's refinement of its Lloyd solution (Algorithm 2, then 4 or 3).

    The clusters ``D_i`` are the Voronoi sets of all the given centroids.
    Only those the privacy floor lets out (``sendable``) take part, and of
    those only the ones whose set holds ``min_rows`` rows or more (their
    ``r'_i`` needs p rows; an empty set describes no data and has no radius,
    the "almost-empty" centroids of appendix C.6, which the paper lets
    Algorithm 5 discard); the rows of the others belong to no cluster sent.

    Parameters
    ----------
    X : array of shape (n_samples, d)
        The client's samples (NumPy or CuPy).
    centroids : array of shape (k, d)
        All the centroids of the client's Lloyd run (Algorithm 2, line 2),
        withheld ones included.
    sizes : array of shape (k,)
        The rows behind each centroid (the Lloyd run's last assignment, whose
        means the centroids are): the count sent with a kept centroid, so
        that it counts the rows the centroid averages, not the Voronoi set
        that the refinement reassigns.
    sendable : array of bool, shape (k,), default=None (all)
        The centroids the privacy floor lets out.
    min_rows : int, default=1
        p of the privacy floor (1: the paper's radii).
    radius : {"algorithm4", "theoretical"}, default="algorithm4"
        Per-centroid radii of Algorithm 4, or the uniform radius of Algorithm 3.
    chunk_size : int, default=DEFAULT_CHUNK_SIZE
        Number of rows processed at once.

    Returns
    -------
    ClientUpdate
        The kept centroids, their radii and sizes (host arrays); none when
        no cluster may be sent.
    """
    if radius not in RADIUS_RULES:
        raise ValueError(f"radius must be one of {', '.join(RADIUS_RULES)}, got {radius!r}")
    geometry = cluster_geometry(X, centroids, min_rows=min_rows, chunk_size=chunk_size)
    centroids = _as_centroids(centroids)
    sizes = _as_per_centroid(sizes, centroids.shape[0], "sizes")
    usable = geometry.counts >= min_rows
    if sendable is not None:
        usable &= np.asarray(sendable, dtype=bool)
    centroids, sizes, geometry = centroids[usable], sizes[usable], geometry.subset(usable)
    if not len(centroids):
        return ClientUpdate(centroids, np.zeros(0), sizes)
    keep = remove_one_fit_many(centroids, geometry)
    centroids, geometry = centroids[keep], geometry.subset(keep)
    if radius == "algorithm4":
        radii = empirical_radii(centroids, geometry.reach)
    else:
        radii = np.full(len(centroids), theoretical_radius(centroids, geometry.reach))
    return ClientUpdate(centroids, radii, sizes[keep])


def group_by_radius(centroids: Any, radii: Any) -> list[np.ndarray]:
    """Algorithm 5, lines 2-8: group the received centroids, largest radius first.

    Repeatedly the ungrouped centroid ``c_i`` with the largest radius ``r_i``
    takes every ungrouped centroid within distance ``r_i`` of it (itself
    included, the boundary included) as the next group.

    Parameters
    ----------
    centroids : array of shape (n, d)
        All received centroids, in an order that does not depend on the
        clients (ties of the largest radius go to the first).
    radii : array of shape (n,)
        Their radii.

    Returns
    -------
    list of ndarray
        Indices of each group, in the order the groups were formed.
    """
    centroids = _as_centroids(centroids)
    radii = _as_per_centroid(radii, centroids.shape[0], "radii")
    ungrouped = np.ones(len(centroids), dtype=bool)
    groups = []
    while ungrouped.any():
        candidates = np.flatnonzero(ungrouped)
        i = candidates[np.argmax(radii[candidates])]
        distances = np.sqrt(sq_distances(centroids[candidates], centroids[i:i + 1])[:, 0])
        members = candidates[distances <= radii[i]]
        ungrouped[members] = False
        groups.append(members)
    return groups


def feca_aggregate(centroids: Any, radii: Any, k: int) -> ServerAggregate:
    """Algorithm 5: the means of the ``k`` largest groups of :func:`group_by_radius`.

    The means are unweighted, ``mean(S_j)`` as in the paper (line 10 and the
    proof of Theorem 4.1). Groups of equal size keep the order in which they
    were formed (larger radius first). With fewer than ``k`` groups, all of
    them are returned.

    Parameters
    ----------
    centroids : array of shape (n, d)
        All received centroids (see :func:`group_by_radius` on their order).
    radii : array of shape (n,)
        Their radii.
    k : int
        Number of global centroids wanted.

    Returns
    -------
    ServerAggregate
    """
    k = check_positive_int(k, "k")
    centroids = _as_centroids(centroids)
    if len(centroids) == 0:
        raise ValueError("no centroids to aggregate")
    groups = group_by_radius(centroids, radii)
    largest = sorted(range(len(groups)), key=lambda g: -len(groups[g]))[:k]
    members = [groups[g] for g in largest]
    means = np.array([centroids[m].mean(axis=0) for m in members])
    return ServerAggregate(means, members, len(groups))
