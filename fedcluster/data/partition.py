"""Dividing a dataset's rows among simulated clients.

Every scheme is seeded (equal arguments give equal partitions) and follows
the paper that uses it:

``iid``
    A random permutation cut into nearly equal parts (every paper's IID
    setting).
``dirichlet:ALPHA``
    Label skew "following Hsu, Qi & Brown (2019)" as the FeCA paper
    (``004``) uses it: for each label, client shares drawn from
    ``Dirichlet(ALPHA)``, with the balance rule of its authors' code (a client
    that already holds ``n / clients`` rows gets no further rows). Needs
    labels.
``distance:BETA``
    Spatial skew of Garst & Reinders (``002``, eq. 2): clients placed in the
    data's bounding box claim the points near them. Needs the points.
``kmeans-noniid``
    The DWF paper's non-IID split (``000``, section 3.2): each client is one
    cluster of a 5-step k-means (``n_init = 5``) with as many clusters as
    clients. Needs the points.
``half-iid``
    The DWF paper's half-IID split: half of the rows IID, the other half as
    ``kmeans-noniid``. Needs the points.
``clusters-per-client:C1,C2,...``
    Garst & Reinders' split with "a large variability of local clusters per
    client" (``002``, Fig. 4: five clients with 1, 4, 7, 10 and 16 of the 16
    clusters; the authors' data, ``data/cluster_wise_small`` of
    ``swiergarst/fedKMeans``, has 16, 1, 3, 10 and 7): client ``i`` holds the
    first ``Ci`` labels. Needs labels.
``by-label``
    Client ``i`` gets exactly the rows of the ``i``-th label: for data whose
    labels name their owner, such as Triebe & Rajagopal's (``003``), where
    each client's rows come from one Gaussian. Needs labels.

Library choice: ``flwr-datasets`` (Flower's own) has IID and Dirichlet
partitioners; its ``DirichletPartitioner(..., self_balancing=True,
min_partition_size=10)`` is the same scheme as ``dirichlet`` here, up to
details (it excludes clients above, not at, the average size, cuts each
label's rows in dataset order rather than shuffled, and gives up after 10
draws). But it works on Hugging Face ``datasets`` objects and pulls in
``datasets``, ``pyarrow`` and their dependencies, for a few dozen lines of
NumPy; and the other schemes are not there as the papers define them (its
``PathologicalPartitioner`` gives every client the same number of classes).
fedcluster keeps its own code and adds no dependency.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from fedcluster._version import __version__
from fedcluster.data.atomic import atomic_write
from fedcluster.data.files import WRITABLE_SUFFIXES, output_suffix, write_points
from fedcluster.data.validation import DataError, validate_points
from fedcluster.numerics.kmeans import kmeans
from fedcluster.numerics.lloyd import assign

__all__ = [
    "MANIFEST_NAME",
    "SPLIT_FORMS",
    "SPLIT_HELP",
    "SPLIT_KINDS",
    "Split",
    "parse_split",
    "partition_file",
    "partition_indices",
    "write_partitions",
]

SplitKind = Literal[
    "iid", "dirichlet", "distance", "kmeans-noniid", "half-iid", "clusters-per-client", "by-label"
]
#: Every scheme :func:`partition_indices` knows.
SPLIT_KINDS: tuple[str, ...] = (
    "iid", "dirichlet", "distance", "kmeans-noniid", "half-iid", "clusters-per-client", "by-label"
)
#: The accepted specifications in one line (for error messages and help texts).
SPLIT_FORMS = (
    "'iid', 'dirichlet:ALPHA' with ALPHA > 0 (e.g. 'dirichlet:0.3'), "
    "'distance:BETA' with BETA > 0 (e.g. 'distance:1'), 'kmeans-noniid', 'half-iid', "
    "'clusters-per-client:C1,C2,...' with one integer >= 1 per client "
    "(e.g. 'clusters-per-client:1,4,7,10,16'), 'by-label'"
)
SPLIT_HELP = (
    "how rows are divided among clients: 'iid' (a seeded random permutation "
    "cut into nearly equal parts); 'dirichlet:ALPHA' with ALPHA > 0 "
    "(label skew after Hsu et al. 2019 as the FeCA paper uses it: for each label, "
    "client shares drawn from Dirichlet(ALPHA), a client holding n/clients rows "
    "takes no more; smaller ALPHA is more skewed; needs labels); 'distance:BETA' "
    "with BETA > 0 (spatial skew after Garst & Reinders, eq. 2: clients placed "
    "uniformly in the data's bounding box each claim a point with probability "
    "1 - exp(-BETA / distance), ties drawn at random, unclaimed points go to the "
    "nearest client; BETA is in the data's units, smaller is more skewed); "
    "'kmeans-noniid' (DWF paper: each client is one cluster of a 5-step k-means "
    "with k = clients); 'half-iid' (DWF paper: half the rows IID, half as "
    "kmeans-noniid); 'clusters-per-client:C1,C2,...' (Garst & Reinders: client i "
    "holds the first Ci labels, one count per client; needs labels); 'by-label' "
    "(client i gets the rows of the i-th label, one client per label; needs labels)"
)
MANIFEST_NAME = "manifest.json"
#: Redraws allowed before giving up on giving every client its minimum of rows.
MAX_DIRICHLET_DRAWS = 10_000
#: Client placements tried before giving up on giving every client a row.
MAX_DISTANCE_DRAWS = 1_000
#: Rows each client must hold after a Dirichlet draw (the FeCA authors' code
#: redraws until every client has 10); fewer when there are fewer than 10 rows
#: per client on average.
DIRICHLET_MIN_ROWS = 10
#: k-means of the DWF paper's non-IID split: Lloyd steps and restarts.
KMEANS_SPLIT_STEPS = 5
KMEANS_SPLIT_RESTARTS = 5

_CLIENT_FILE = re.compile(r"client_\d+\.(npy|npz|csv)")
_NEEDS_LABELS = ("dirichlet", "clusters-per-client", "by-label")
_NEEDS_POINTS = ("distance", "kmeans-noniid", "half-iid")


@dataclass(frozen=True)
class Split:
    """A parsed split specification.

    Attributes
    ----------
    kind : str
        The scheme, one of :data:`SPLIT_KINDS`.
    alpha : float or None
        Dirichlet concentration (> 0, finite) for ``"dirichlet"``; ``None``
        otherwise.
    beta : float or None
        Distance scale (> 0, finite) of eq. 2 of Garst & Reinders for
        ``"distance"``; ``None`` otherwise.
    counts : tuple of int or None
        Labels held by each client (each >= 1) for ``"clusters-per-client"``;
        ``None`` otherwise.
    """

    kind: SplitKind
    alpha: float | None = None
    beta: float | None = None
    counts: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in SPLIT_KINDS:
            raise ValueError(
                f"split kind must be one of {', '.join(map(repr, SPLIT_KINDS))}, got {self.kind!r}"
            )
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            wanted = (self.kind, name) in (("dirichlet", "alpha"), ("distance", "beta"))
            if not wanted and value is not None:
                raise ValueError(f"the {self.kind} split takes no {name}")
            if wanted and (value is None or not (math.isfinite(value) and value > 0)):
                raise ValueError(f"{self.kind} {name} must be finite and > 0, got {value}")
        if self.kind != "clusters-per-client":
            if self.counts is not None:
                raise ValueError(f"the {self.kind} split takes no counts")
            return
        counts = self.counts
        if (
            not isinstance(counts, tuple)
            or not counts
            or any(isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 1
                   for c in counts)
        ):
            raise ValueError(
                "clusters-per-client counts must be a non-empty tuple of integers >= 1, "
                f"got {counts!r}"
            )
        object.__setattr__(self, "counts", tuple(int(c) for c in counts))

    @property
    def needs(self) -> Literal["labels", "points"] | None:
        """What besides the number of rows the scheme needs: labels, points or nothing."""
        if self.kind in _NEEDS_LABELS:
            return "labels"
        if self.kind in _NEEDS_POINTS:
            return "points"
        return None

    def __str__(self) -> str:
        """Return the specification that :func:`parse_split` reads back."""
        if self.kind == "dirichlet":
            return f"dirichlet:{self.alpha!r}"
        if self.kind == "distance":
            return f"distance:{self.beta!r}"
        if self.kind == "clusters-per-client":
            assert self.counts is not None  # guaranteed by __post_init__
            return "clusters-per-client:" + ",".join(str(c) for c in self.counts)
        return self.kind


def parse_split(spec: str) -> Split:
    """Parse a split specification (:data:`SPLIT_FORMS`).

    Parameters
    ----------
    spec : str
        The specification; surrounding white space is ignored, and so is white
        space around the counts of ``clusters-per-client``.

    Returns
    -------
    Split

    Raises
    ------
    ValueError
        If ``spec`` has another form, ALPHA (BETA) is not a finite number > 0,
        or a count is not an integer >= 1.
    """
    text = spec.strip()
    if text in ("iid", "kmeans-noniid", "half-iid", "by-label"):
        return Split(text)  # type: ignore[arg-type]
    kind, sep, value = text.partition(":")
    if kind in ("dirichlet", "distance") and sep:
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if math.isfinite(number) and number > 0:
            return Split(kind, **{"alpha" if kind == "dirichlet" else "beta": number})
    if kind == "clusters-per-client" and sep:
        fields = [f.strip() for f in value.split(",")]
        if all(re.fullmatch(r"\d+", f) for f in fields) and all(int(f) >= 1 for f in fields):
            return Split("clusters-per-client", counts=tuple(int(f) for f in fields))
    raise ValueError(f"invalid split {spec!r}; accepted forms: {SPLIT_FORMS}")


def partition_indices(
    n: int,
    num_clients: int,
    split: Split | str,
    *,
    labels: ArrayLike | None = None,
    points: ArrayLike | None = None,
    seed: int = 0,
) -> list[np.ndarray]:
    """Divide ``range(n)`` among clients.

    Parameters
    ----------
    n : int
        Number of rows, >= 1.
    num_clients : int
        Number of parts, 1 <= num_clients <= n. ``clusters-per-client``
        needs one count per client, ``by-label`` one client per label.
    split : Split or str
        The scheme, or a specification for :func:`parse_split`.
    labels : array_like, optional
        One label per row (any sortable values, e.g. integers); required by
        ``dirichlet``, ``clusters-per-client`` and ``by-label``, ignored
        otherwise.
    points : array_like, optional
        The rows themselves, shape ``(n, d)``; required by ``distance``,
        ``kmeans-noniid`` and ``half-iid``, ignored otherwise.
    seed : int, default 0
        Seed of the :class:`numpy.random.Generator`; equal arguments give
        equal partitions.

    Returns
    -------
    list of numpy.ndarray
        ``num_clients`` sorted ``int64`` index arrays, disjoint, covering
        ``range(n)``, each non-empty.

    Raises
    ------
    ValueError
        If the sizes are invalid, the scheme lacks the labels or points it
        needs (or they do not match ``n``), or it cannot give every client a
        row (see the notes of each scheme).

    Notes
    -----
    ``iid`` shuffles the rows and cuts them into parts whose sizes differ by
    at most one.

    ``dirichlet`` follows the Dirichlet partitioner of the FeCA authors' group
    (``utils/sampling.py`` of Chen & Chao's FedBE code, the "hetero-dir"
    split common in federated-learning code that cites Hsu et al.): labels
    are taken in increasing order; for each, client shares
    ``p ~ Dir(alpha * 1)`` are drawn, clients that already hold ``n /
    num_clients`` rows or more get share 0 (the rest is renormalised), and
    the label's shuffled rows are cut at ``floor(cumsum(p) * rows)``. The
    whole draw is repeated until every client holds at least
    ``min(10, n // num_clients)`` rows (:data:`DIRICHLET_MIN_ROWS`). Hsu et
    al.'s own definition, ``q ~ Dir(alpha * prior)`` per client with equal
    client sizes, gives FeCA l2-distances on S1 near 65e4 where the FeCA
    paper reports 6.8e4 (Dirichlet(0.3)), so it is not what that paper ran.

    ``distance`` places each client uniformly at random in the bounding box
    of the points; client ``c`` claims point ``x`` with probability
    ``1 - exp(-beta / ||x - s_c||)`` (eq. 2 of Garst & Reinders),
    independently of the other clients; a point claimed by several clients
    goes to one of them drawn uniformly at random, and a point no client
    claims goes to the nearest client (the paper is silent on these; its
    authors' code does both). Placements that leave a client empty are
    rejected and redrawn.

    ``kmeans-noniid`` runs k-means with ``k = num_clients`` (greedy
    k-means++ starts, :data:`KMEANS_SPLIT_RESTARTS` restarts of
    :data:`KMEANS_SPLIT_STEPS` Lloyd steps, the lowest inertia kept, as the
    DWF authors' ``KMeans(n_clusters, max_iter=5, n_init=5)``); client ``c``
    gets the rows nearest to final centroid ``c``. Client sizes differ. A
    cluster that ends empty (duplicate points, or a centroid that lost all
    its points in the last step) is filled as scikit-learn relocates empty
    clusters: it takes the row farthest from its centroid among clusters
    that keep at least one row, so no client is empty.

    ``half-iid`` shuffles the rows, gives ``floor(n / 2)`` of them to the
    clients as ``iid`` and splits the other ``ceil(n / 2)`` as
    ``kmeans-noniid`` (k-means on that half only); client ``c`` gets IID part
    ``c`` and cluster ``c``, as in the DWF authors' code. It needs
    ``ceil(n / 2) >= num_clients``.

    ``clusters-per-client`` takes the labels in increasing order: label ``j``
    (0-based) goes to the clients with ``Ci > j``, so the clients' label sets
    are nested (client ``i`` holds the first ``Ci`` labels, as in the
    authors' ``generate_and_assign``), and the largest count must equal the
    number of labels. Each label's shuffled rows are shared out in parts that
    differ by at most one (the authors' code drops the remainder; here every
    row goes to a client).

    ``by-label`` gives client ``i`` the rows of the ``i``-th label in
    increasing order.
    """
    if isinstance(split, str):
        split = parse_split(split)
    if n < 1:
        raise ValueError(f"cannot partition {n} rows")
    if not 1 <= num_clients <= n:
        raise ValueError(
            f"num_clients must be between 1 and the number of rows ({n}), got {num_clients}"
        )
    rng = np.random.default_rng(seed)
    owner = np.empty(n, dtype=np.int64)  # owner[i] = client that gets row i
    if split.kind == "iid":
        owner[rng.permutation(n)] = _iid_clients(n, num_clients)
    elif split.needs == "points":
        if points is None:
            raise ValueError(f"split {split} needs the points; pass points=")
        X = validate_points(points, source=f"points of split {split}")
        if X.shape[0] != n:
            raise ValueError(f"expected {n} points, got {X.shape[0]}")
        if split.kind == "distance":
            assert split.beta is not None  # guaranteed by Split
            _distance_owners(owner, X, num_clients, split.beta, rng)
        elif split.kind == "kmeans-noniid":
            owner[:] = _kmeans_clients(X, num_clients, rng)
        else:
            _half_iid_owners(owner, X, num_clients, rng)
    else:
        if labels is None:
            raise ValueError(
                f"split {split} needs labels; this dataset has none. Supply them: for a CSV "
                f"file name its label column (--label-column NAME; a column named 'label' is "
                f"used by default), or use an .npz file with the points in 'X' and the labels "
                f"in 'y'; or choose a split that needs no labels (iid, distance:BETA, "
                f"kmeans-noniid, half-iid); in a bench grid, write the dataset as "
                f"'FILE.csv?label-column=NAME'"
            )
        y = np.asarray(labels)
        if y.shape != (n,):
            raise ValueError(f"expected {n} labels, got shape {y.shape}")
        classes, class_of = np.unique(y, return_inverse=True)
        class_of = class_of.reshape(n)
        if split.kind == "dirichlet":
            assert split.alpha is not None  # guaranteed by Split
            _dirichlet_owners(owner, class_of, num_clients, split.alpha, rng)
        elif split.kind == "clusters-per-client":
            assert split.counts is not None  # guaranteed by Split
            _clusters_per_client_owners(owner, class_of, classes, num_clients, split.counts, rng)
        else:
            if len(classes) != num_clients:
                raise ValueError(
                    f"split by-label gives one client per label: the labels hold "
                    f"{len(classes)} values, so num_clients must be {len(classes)}, "
                    f"got {num_clients}"
                )
            owner[:] = class_of
    return [np.flatnonzero(owner == c).astype(np.int64, copy=False) for c in range(num_clients)]


def _iid_clients(n: int, num_clients: int) -> np.ndarray:
    """Client of each of ``n`` shuffled rows: parts that differ by at most one, in order."""
    sizes = np.full(num_clients, n // num_clients)
    sizes[: n % num_clients] += 1
    return np.repeat(np.arange(num_clients), sizes)


def _dirichlet_owners(
    owner: np.ndarray,
    class_of: np.ndarray,
    num_clients: int,
    alpha: float,
    rng: np.random.Generator,
) -> None:
    """Fill ``owner`` with the balanced per-label Dirichlet assignment."""
    n = len(class_of)
    members = [np.flatnonzero(class_of == c) for c in range(int(class_of.max()) + 1)]
    cap = n / num_clients
    minimum = min(DIRICHLET_MIN_ROWS, n // num_clients)
    # Only the per-class counts decide the sizes, so the draws work on a
    # (classes x clients) table; the rows are shuffled once a draw is kept.
    for _ in range(MAX_DIRICHLET_DRAWS):
        held = np.zeros(num_clients, dtype=np.int64)
        counts = np.zeros((len(members), num_clients), dtype=np.int64)
        for c, rows in enumerate(members):
            shares = rng.dirichlet(np.full(num_clients, alpha))
            shares = np.where(held < cap, shares, 0.0)
            total = shares.sum()
            if not total > 0:  # every open client drew an exact zero (tiny alpha)
                break
            cuts = np.floor(np.cumsum(shares / total) * len(rows)).astype(np.int64)
            cuts[-1] = len(rows)  # the cumulative sum may end at 1 - eps
            counts[c] = np.diff(cuts, prepend=0)
            held += counts[c]
        else:
            if held.min() >= minimum:
                break
    else:
        rows_text = "one row" if minimum == 1 else f"{minimum} rows"
        raise ValueError(
            f"no draw of Dirichlet({alpha}) in {MAX_DIRICHLET_DRAWS} gave each of "
            f"{num_clients} clients at least {rows_text}; use fewer clients or a larger alpha"
        )
    clients = np.arange(num_clients)
    for rows, class_counts in zip(members, counts, strict=True):
        owner[rng.permutation(rows)] = np.repeat(clients, class_counts)


def _kmeans_clients(X: np.ndarray, num_clients: int, rng: np.random.Generator) -> np.ndarray:
    """The DWF paper's non-IID clients: one per cluster of a 5-step k-means, none empty."""
    result = kmeans(X, num_clients, rng=rng, n_init=KMEANS_SPLIT_RESTARTS,
                    max_iter=KMEANS_SPLIT_STEPS, tol=0.0)
    clients, sqdist = assign(X, result.centroids)
    sizes = np.bincount(clients, minlength=num_clients)
    empty = np.flatnonzero(sizes == 0)
    if empty.size:
        # scikit-learn's relocation: the rows farthest from their centroids
        # move into the empty clusters, taken only from clusters that keep a row.
        farthest = iter(np.argsort(-sqdist, kind="stable"))
        for target in empty:
            for row in farthest:
                if sizes[clients[row]] >= 2:
                    sizes[clients[row]] -= 1
                    clients[row] = target
                    sizes[target] = 1
                    break
    return clients


def _half_iid_owners(
    owner: np.ndarray, X: np.ndarray, num_clients: int, rng: np.random.Generator
) -> None:
    """Fill ``owner``: half the rows IID, the other half one k-means cluster per client."""
    n = len(X)
    clustered = (n + 1) // 2
    if clustered < num_clients:
        raise ValueError(
            f"split half-iid needs at least {num_clients} rows in its k-means half, "
            f"i.e. n >= {2 * num_clients - 1}; got {n} rows"
        )
    order = rng.permutation(n)
    iid_rows, kmeans_rows = order[clustered:], order[:clustered]
    owner[iid_rows] = _iid_clients(len(iid_rows), num_clients)
    owner[kmeans_rows] = _kmeans_clients(X[kmeans_rows], num_clients, rng)


def _clusters_per_client_owners(
    owner: np.ndarray,
    class_of: np.ndarray,
    classes: np.ndarray,
    num_clients: int,
    counts: tuple[int, ...],
    rng: np.random.Generator,
) -> None:
    """Fill ``owner``: client ``i`` holds the first ``counts[i]`` labels."""
    if len(counts) != num_clients:
        raise ValueError(
            f"split clusters-per-client:{','.join(map(str, counts))} names {len(counts)} "
            f"clients, but num_clients is {num_clients}"
        )
    held = np.asarray(counts)
    if held.max() != len(classes):
        raise ValueError(
            f"split clusters-per-client: the labels hold {len(classes)} values, so the "
            f"largest count must be {len(classes)} (every label goes to a client), "
            f"got {held.max()}"
        )
    for c in range(len(classes)):
        holders = np.flatnonzero(held > c)
        rows = rng.permutation(np.flatnonzero(class_of == c))
        base, extra = divmod(len(rows), len(holders))
        sizes = np.full(len(holders), base)
        sizes[rng.permutation(len(holders))[:extra]] += 1
        owner[rows] = np.repeat(holders, sizes)
    sizes = np.bincount(owner, minlength=num_clients)
    if sizes.min() == 0:
        empty = int(np.argmin(sizes))
        raise ValueError(
            f"split clusters-per-client: client {empty} would get no rows (label "
            f"{classes[0]!r} has {int(np.sum(class_of == 0))} rows for {num_clients} clients)"
        )


def _distance_owners(
    owner: np.ndarray,
    X: np.ndarray,
    num_clients: int,
    beta: float,
    rng: np.random.Generator,
) -> None:
    """Fill ``owner`` with the spatial assignment of Garst & Reinders (eq. 2)."""
    low, high = X.min(axis=0), X.max(axis=0)
    for _ in range(MAX_DISTANCE_DRAWS):
        sites = rng.uniform(low, high, size=(num_clients, X.shape[1]))
        chosen = _claims(X, sites, beta, rng)
        if np.bincount(chosen, minlength=num_clients).min() >= 1:
            owner[:] = chosen
            return
    raise ValueError(
        f"no placement of {num_clients} clients in {MAX_DISTANCE_DRAWS} draws gave each "
        f"client at least one row; use fewer clients or a larger beta"
    )


def _claims(X: np.ndarray, sites: np.ndarray, beta: float, rng: np.random.Generator) -> np.ndarray:
    """The client of each row for clients at ``sites`` (eq. 2 and its tie rules)."""
    # One client at a time keeps the memory at O(n d + n clients).
    dist = np.column_stack([np.linalg.norm(X - site, axis=1) for site in sites])
    shape = dist.shape
    with np.errstate(divide="ignore"):  # a row on a client's site: claimed surely
        claimed = rng.random(shape) < -np.expm1(-beta / dist)
    # A uniform random key per (row, client); the claimant with the largest key
    # keeps the row, which picks each claimant with equal probability.
    keys = np.where(claimed, rng.random(shape), -1.0)
    return np.where(claimed.any(axis=1), keys.argmax(axis=1), dist.argmin(axis=1))


def write_partitions(
    X: ArrayLike,
    parts: list[np.ndarray],
    out_dir: str | os.PathLike[str],
    *,
    labels: ArrayLike | None = None,
    fmt: str = "npy",
    overwrite: bool = False,
    split: Split | str | None = None,
    seed: int | None = None,
    dataset: str | None = None,
) -> list[Path]:
    """Write one file per client plus ``manifest.json``.

    Parameters
    ----------
    X : array_like
        All points, shape ``(n, d)``.
    parts : list of array_like
        Row indices per client, as from :func:`partition_indices`; disjoint
        and non-empty.
    out_dir : str or os.PathLike
        Directory; created if missing.
    labels : array_like, optional
        Labels of all rows, written with each client's rows (``npz``/``csv``).
    fmt : {"npy", "npz", "csv"}, default "npy"
        File format of the client files ``client_000.<fmt>``, ...
    overwrite : bool, default False
        Allow a non-empty ``out_dir``. Earlier client files and manifest in it
        are removed first, so no stale client is left behind; other files are
        kept.
    split, seed, dataset : optional
        Recorded in the manifest only.

    Returns
    -------
    list of pathlib.Path
        The client files, in client order. The manifest is
        ``out_dir / MANIFEST_NAME``, written last: its presence means the
        set is complete.

    Raises
    ------
    FileExistsError
        If ``out_dir`` is not empty and ``overwrite`` is false.
    ValueError
        If ``fmt`` is unknown or cannot hold labels, or ``parts`` are invalid.
    """
    if f".{fmt}" not in WRITABLE_SUFFIXES:
        raise ValueError(f"fmt must be one of npy, npz, csv; got {fmt!r}")
    output_suffix(f"client_000.{fmt}", with_labels=labels is not None)
    X = validate_points(X, source="points to partition")
    parts = _check_parts(parts, len(X))
    y = None if labels is None else np.asarray(labels)
    if y is not None and y.shape != (len(X),):
        raise ValueError(f"expected {len(X)} labels, got shape {y.shape}")

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        if not overwrite:
            raise FileExistsError(
                f"{out} is not empty; choose another directory or pass overwrite=True"
            )
        _remove_previous(out)

    paths = []
    for i, rows in enumerate(parts):
        path = out / f"client_{i:03d}.{fmt}"
        write_points(path, X[rows], None if y is None else y[rows])
        paths.append(path)
    manifest = {
        "fedcluster_version": __version__,
        "dataset": dataset,
        "split": None if split is None else str(split),
        "seed": seed,
        "format": fmt,
        "dimension": X.shape[1],
        "n_points": int(sum(len(rows) for rows in parts)),
        "labels": y is not None,
        "clients": [
            {"file": p.name, "rows": len(rows)} for p, rows in zip(paths, parts, strict=True)
        ],
    }
    with atomic_write(out / MANIFEST_NAME, "w") as fh:
        json.dump(manifest, fh, indent=2)
        fh.write("\n")
    return paths


def partition_file(directory: str | os.PathLike[str], partition_id: int) -> Path:
    """The file of client ``partition_id`` in a directory written by :func:`write_partitions`.

    Raises
    ------
    DataError
        The manifest is missing or unreadable, or ``partition_id`` is out of range.
    """
    directory = Path(directory)
    try:
        manifest = json.loads((directory / MANIFEST_NAME).read_text(encoding="utf-8"))
        files = [entry["file"] for entry in manifest["clients"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"partitions directory {directory}: unreadable {MANIFEST_NAME} ({exc})") from None
    if not 0 <= partition_id < len(files):
        raise DataError(
            f"partition-id {partition_id} is out of range: {directory} holds {len(files)} partitions"
        )
    return directory / files[partition_id]


def _check_parts(parts: list[np.ndarray], n: int) -> list[np.ndarray]:
    """Return ``parts`` as int64 arrays after checking range, emptiness, overlap."""
    checked = []
    for i, rows in enumerate(parts):
        idx = np.asarray(rows)
        if idx.ndim != 1 or idx.dtype.kind not in "iu" or len(idx) == 0:
            raise ValueError(
                f"part {i}: expected a non-empty 1-D integer index array, "
                f"got shape {idx.shape} dtype {idx.dtype}"
            )
        if idx.min() < 0 or idx.max() >= n:
            raise ValueError(
                f"part {i}: row indices must lie in [0, {n}), got {idx.min()}..{idx.max()}"
            )
        checked.append(idx.astype(np.int64, copy=False))
    if not checked:
        raise ValueError("no parts to write")
    times = np.bincount(np.concatenate(checked), minlength=n)
    if times.max() > 1:
        raise ValueError(f"parts overlap: row {int(np.argmax(times > 1))} is in more than one part")
    return checked


def _remove_previous(out: Path) -> None:
    """Delete a previous manifest and client files; leave anything else."""
    # Manifest first: while files are rewritten, none claims to be complete.
    (out / MANIFEST_NAME).unlink(missing_ok=True)
    for path in out.iterdir():
        if _CLIENT_FILE.fullmatch(path.name):
            path.unlink()
