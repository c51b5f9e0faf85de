"""Named datasets: the SIPU S-sets and G2-sets, the papers' synthetic sets, scikit-learn's, or a file.

Shipped data (read from the package itself with :mod:`importlib.resources`,
so they load the same from a source checkout and from an installed wheel):

* ``s1`` .. ``s4``: the SIPU S-sets (FeCA paper, Table 1);
* ``g2-D-S``: 80 SIPU G2-sets, D in 1, 2, 4, ..., 128 and S in 10, 20, ...,
  100 (FFCM paper, Table 5; :data:`G2_NAMES`).

Generated, seeded (each with a frozen parameter dataclass, see
:data:`DATASET_PARAMS`):

* ``blobs``: the DWF paper's synthetic set (:class:`BlobsParams`);
* ``garst-grid``: Garst & Reinders' 16 Gaussians on a 4 x 4 grid
  (:class:`GarstGridParams`);
* ``triebe``: Triebe & Rajagopal's one Gaussian per client, labels = client
  (:class:`TriebeParams`);
* ``ffcm-case1``: the FFCM paper's case 1, three Gaussians over three
  clients, labels = client (:class:`FFCMCase1Params`).

And the small UCI sets bundled with scikit-learn, loaded through it when it is
installed (:data:`SKLEARN_SETS`): ``digits`` (1797 x 64), ``iris`` (150 x 4),
``wine`` (178 x 13) and ``breast-cancer`` (569 x 30); ``mnist`` and ``mnist-test``,
the shipped MNIST training and test images (``fedcluster/data/mnist/``).
"""

from __future__ import annotations

import gzip
import math
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from fedcluster.data.files import READABLE_SUFFIXES, read_file
from fedcluster.data.validation import DataError, validate_points

__all__ = [
    "DATASET_NAMES",
    "DATASET_PARAMS",
    "G2_NAMES",
    "NOISE_LABEL",
    "BlobsParams",
    "Dataset",
    "FFCMCase1Params",
    "GarstGridParams",
    "GoogleSyntheticParams",
    "TriebeParams",
    "load_dataset",
    "make_blobs",
    "make_ffcm_case1",
    "make_garst_grid",
    "make_google_synthetic",
    "make_triebe",
]

#: The UCI sets bundled with scikit-learn: name -> (its loader in sklearn.datasets,
#: citation, image shape of a row or None).
SKLEARN_SETS = {
    "digits": ("load_digits", "E. Alpaydin and C. Kaynak, Optical Recognition of Handwritten "
               "Digits, UCI Machine Learning Repository, 1998", (1, 8, 8)),
    "iris": ("load_iris", "R. A. Fisher, Iris, UCI Machine Learning Repository, 1936", None),
    "wine": ("load_wine", "S. Aeberhard and M. Forina, Wine, UCI Machine Learning "
             "Repository, 1991", None),
    "breast-cancer": ("load_breast_cancer", "W. Wolberg, O. Mangasarian, N. Street and "
                      "W. Street, Breast Cancer Wisconsin (Diagnostic), UCI Machine Learning "
                      "Repository, 1995", None),
}
#: The datasets known by name (besides the G2 family, :data:`G2_NAMES`).
DATASET_NAMES = ("s1", "s2", "s3", "s4", "blobs", "garst-grid", "triebe", "ffcm-case1",
                 "google-synthetic", *SKLEARN_SETS, "mnist", "mnist-test")
#: Dimensions and standard deviations of the shipped G2-sets.
G2_DIMENSIONS = (1, 2, 4, 8, 16, 32, 64, 128)
G2_DEVIATIONS = (10, 20, 30, 40, 50, 60, 70, 80, 90, 100)
#: The shipped G2-sets, ``"g2-D-S"``.
G2_NAMES = tuple(f"g2-{d}-{s}" for d in G2_DIMENSIONS for s in G2_DEVIATIONS)

SSETS_CITATION = (
    "P. Fränti and O. Virmajoki, Iterative shrinking method for clustering "
    "problems, Pattern Recognition 39(5), 2006; "
    "P. Fränti and S. Sieranoja, K-means properties on six clustering "
    "benchmark datasets, Applied Intelligence 48(12):4743-4759, 2018."
)
G2_CITATION = (
    "P. Fränti, R. Mariescu-Istodor and C. Zhong, XNN graph, S+SSPR 2016, "
    "LNCS 10029:207-217; P. Fränti and S. Sieranoja, K-means properties on six "
    "clustering benchmark datasets, Applied Intelligence 48(12):4743-4759, 2018."
)
BLOBS_CITATION = (
    "Synthetic set after P. Holzer, T. Jacob and S. Kavane, Dynamically "
    "Weighted Federated k-Means (5 Gaussian blobs plus uniform noise)."
)
GARST_CITATION = (
    "Synthetic set after S. Garst and M. Reinders, Federated K-Means Clustering "
    "(16 Gaussian clusters on a 4 x 4 grid with spacing 5)."
)
TRIEBE_CITATION = (
    "Synthetic set after O. J. Triebe and R. Rajagopal, Federated K-Means: "
    "Clustering Algorithm and Proof of Concept (one Gaussian per client)."
)
GOOGLE_SYNTHETIC_CITATION = (
    "Google, Differentially Private K-means Clustering (learning/clustering in "
    "google/differential-privacy), README, section Synthetic Dataset"
)
FFCM_CITATION = (
    "Synthetic set after M. Stallmann and A. Wilbik, Towards Federated Clustering: "
    "A Federated Fuzzy c-Means Algorithm (FFCM), case 1."
)

#: Label of the uniform noise points in :func:`make_blobs`.
NOISE_LABEL = -1


@dataclass(frozen=True)
class Dataset:
    """Points with optional ground truth.

    Attributes
    ----------
    name : str
        Dataset name (``"s1"``, ``"blobs"``) or the path it was read from.
    X : numpy.ndarray
        ``float64`` points, shape ``(n, d)``.
    labels : numpy.ndarray or None
        ``int64`` ground-truth labels, shape ``(n,)``.
    true_centers : numpy.ndarray or None
        ``float64`` generating centres, shape ``(k, d)``.
    citation : str
        Where the data comes from; empty for user files.
    image_shape : tuple of int or None
        C, H, W of a row read as an image (rows flattened in C,H,W order):
        digits, MNIST and CIFAR-10 say it, so that DeepFeCA need not be told.

    A dataset read from a file (:func:`load_dataset` with a path) carries the
    labels and true centres the file holds (CSV label column, ``.npz`` ``y``
    and ``centers``), else ``None``.
    """

    name: str
    X: np.ndarray
    labels: np.ndarray | None
    true_centers: np.ndarray | None
    citation: str
    image_shape: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        # Frozen dataclass: normalise through object.__setattr__.
        X = validate_points(self.X, source=f"dataset {self.name}")
        object.__setattr__(self, "X", X)
        if self.labels is not None:
            labels = np.asarray(self.labels)
            if labels.shape != (len(X),) or labels.dtype.kind not in "iu":
                raise DataError(
                    f"dataset {self.name}: labels must be {len(X)} integers, "
                    f"got shape {labels.shape} dtype {labels.dtype}"
                )
            object.__setattr__(self, "labels", labels.astype(np.int64, copy=False))
        if self.true_centers is not None:
            centers = validate_points(
                self.true_centers,
                expected_dim=X.shape[1],
                source=f"dataset {self.name} true centres",
            )
            object.__setattr__(self, "true_centers", centers)

    @property
    def known_k(self) -> int | None:
        """The number of clusters the ground truth gives, or ``None`` without ground truth.

        The number of true centres when the dataset has them, else the number
        of distinct labels. Centres come first: the labels of ``triebe`` and
        ``ffcm-case1`` are clients, not clusters, and those of ``blobs``
        include the noise label.
        """
        if self.true_centers is not None:
            return int(self.true_centers.shape[0])
        if self.labels is not None:
            return int(np.unique(self.labels).size)
        return None


@dataclass(frozen=True)
class BlobsParams:
    """Parameters of :func:`make_blobs`.

    The defaults are the synthetic set of the DWF k-means paper: 5 isotropic
    Gaussian blobs with centres drawn uniformly from [-1, 1]^2, standard
    deviation 0.2, 10,000 points, plus 100 points uniform in the same box.

    Attributes
    ----------
    n_samples : int
        Points drawn from the blobs (noise not included), >= ``centers``.
    centers : int
        Number of blobs, >= 1.
    n_features : int
        Dimension, >= 1.
    cluster_std : float
        Standard deviation of every blob, > 0.
    center_box : tuple of float
        ``(low, high)``, the box for the centres and the noise, low < high.
    n_noise : int
        Uniform noise points, >= 0.
    """

    n_samples: int = 10_000
    centers: int = 5
    n_features: int = 2
    cluster_std: float = 0.2
    center_box: tuple[float, float] = (-1.0, 1.0)
    n_noise: int = 100

    def __post_init__(self) -> None:
        for name, minimum in (("centers", 1), ("n_features", 1), ("n_noise", 0)):
            _check_int(name, getattr(self, name), minimum)
        _check_int("n_samples", self.n_samples, self.centers)
        if not (math.isfinite(self.cluster_std) and self.cluster_std > 0):
            raise ValueError(f"cluster_std must be finite and > 0, got {self.cluster_std}")
        low, high = self.center_box
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(
                f"center_box must be finite (low, high) with low < high, got {self.center_box}"
            )


def _check_int(name: str, value: object, minimum: int) -> None:
    # bool is an int subclass, but True blobs is a caller's mistake.
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def make_blobs(params: BlobsParams | None = None, *, seed: int) -> Dataset:
    """Draw Gaussian blobs plus uniform noise.

    Blob sizes differ by at most one (the first ``n_samples % centers`` blobs
    get one extra point). Noise points are labelled :data:`NOISE_LABEL` (-1)
    rather than by their nearest centre: no centre generated them, and a
    separate label lets metrics count or exclude them explicitly. Rows are
    shuffled, so the file order carries no cluster information.

    Parameters
    ----------
    params : BlobsParams, optional
        Defaults to ``BlobsParams()``.
    seed : int
        Seed of the :class:`numpy.random.Generator`; equal seeds give equal
        datasets.

    Returns
    -------
    Dataset
        ``name="blobs"``; ``true_centers`` are the generating centres, and
        ``labels`` index them (0 .. centers-1), -1 for noise.
    """
    p = BlobsParams() if params is None else params
    rng = np.random.default_rng(seed)
    low, high = p.center_box
    centers = rng.uniform(low, high, size=(p.centers, p.n_features))
    sizes = np.full(p.centers, p.n_samples // p.centers)
    sizes[: p.n_samples % p.centers] += 1
    blob_labels = np.repeat(np.arange(p.centers, dtype=np.int64), sizes)
    blobs = centers[blob_labels] + rng.normal(0.0, p.cluster_std, size=(p.n_samples, p.n_features))
    noise = rng.uniform(low, high, size=(p.n_noise, p.n_features))
    X = np.concatenate([blobs, noise])
    labels = np.concatenate([blob_labels, np.full(p.n_noise, NOISE_LABEL, dtype=np.int64)])
    order = rng.permutation(len(X))
    return Dataset("blobs", X[order], labels[order], centers, BLOBS_CITATION)


def _check_positive_float(params: object, name: str) -> None:
    """Check a finite number > 0 and store it as a float (frozen dataclass)."""
    value = getattr(params, name)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not (math.isfinite(value) and value > 0)
    ):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    object.__setattr__(params, name, float(value))


def _check_bool(params: object, name: str) -> None:
    """Check a flag (a bool, or the text 'true' / 'false' of a URL-style spec) and store a bool."""
    value = getattr(params, name)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    object.__setattr__(params, name, bool(value))


@dataclass(frozen=True)
class GarstGridParams:
    """Parameters of :func:`make_garst_grid`.

    The defaults are the "regular synthetic dataset" of Garst & Reinders
    (paper ``002``, section 3, Fig. 1a): sixteen centres on a 4 x 4 grid with
    spacing 5 (coordinates -7.5, -2.5, 2.5, 7.5), 50 points per centre drawn
    from an isotropic normal distribution with standard deviation 1. Their
    noise experiment raises the deviation from 1 to 1.5 with 50 or 200
    points per cluster (Fig. 2, 3).

    Attributes
    ----------
    points : int
        Points per cluster, >= 1.
    noise : float
        Standard deviation of every coordinate, > 0.
    spacing : float
        Distance between neighbouring centres, > 0.
    side : int
        Centres per side of the grid (``side ** 2`` clusters), >= 1.
    """

    points: int = 50
    noise: float = 1.0
    spacing: float = 5.0
    side: int = 4

    def __post_init__(self) -> None:
        _check_int("points", self.points, 1)
        _check_int("side", self.side, 1)
        _check_positive_float(self, "noise")
        _check_positive_float(self, "spacing")


def make_garst_grid(params: GarstGridParams | None = None, *, seed: int) -> Dataset:
    """Draw Garst & Reinders' grid of Gaussian clusters.

    The centres run over the grid with the first coordinate outermost, as in
    the authors' notebook: label 0 is (-7.5, -7.5), label 1 (-7.5, -2.5), ...,
    label 15 (7.5, 7.5) for the defaults; ``clusters-per-client`` splits
    take the labels in this order. Rows are shuffled.

    Parameters
    ----------
    params : GarstGridParams, optional
        Defaults to ``GarstGridParams()``.
    seed : int
        Seed of the :class:`numpy.random.Generator`.

    Returns
    -------
    Dataset
        ``name="garst-grid"``, labels 0 .. side**2 - 1 indexing ``true_centers``.
    """
    p = GarstGridParams() if params is None else params
    rng = np.random.default_rng(seed)
    offsets = (np.arange(p.side) - (p.side - 1) / 2) * p.spacing
    centers = np.array([(a, b) for a in offsets for b in offsets], dtype=np.float64)
    labels = np.repeat(np.arange(len(centers), dtype=np.int64), p.points)
    X = centers[labels] + rng.normal(0.0, p.noise, size=(len(labels), 2))
    order = rng.permutation(len(X))
    return Dataset("garst-grid", X[order], labels[order], centers, GARST_CITATION)


@dataclass(frozen=True)
class TriebeParams:
    """Parameters of :func:`make_triebe`.

    The defaults are the data of Triebe & Rajagopal (paper ``003``, section
    2.1): 50 clients, each with 10 samples from one of 5 one-dimensional
    Gaussians with means 1, ..., 5 and scale 0.2, the Gaussian drawn at
    random for each client. The authors' code
    (``clustering/utils_data.py``) differs from the text: it gives every
    Gaussian the same number of clients (``balanced=True``) and uses scale
    0.5 (the default of its ``create_dummy_data``).

    Attributes
    ----------
    clients : int
        Number of clients, >= 1.
    clusters : int
        Number of Gaussians, >= 1; Gaussian ``c`` has mean ``c + 1`` in every
        coordinate.
    samples : int
        Samples per client, >= 1.
    scale : float
        Standard deviation of every Gaussian, > 0.
    dims : int
        Dimension, >= 1.
    balanced : bool
        ``False``: each client's Gaussian is drawn uniformly at random (the
        paper's text); ``True``: client ``i`` gets Gaussian ``i % clusters``
        (the authors' code).
    """

    clients: int = 50
    clusters: int = 5
    samples: int = 10
    scale: float = 0.2
    dims: int = 1
    balanced: bool = False

    def __post_init__(self) -> None:
        for name in ("clients", "clusters", "samples", "dims"):
            _check_int(name, getattr(self, name), 1)
        _check_positive_float(self, "scale")
        _check_bool(self, "balanced")


def make_triebe(params: TriebeParams | None = None, *, seed: int) -> Dataset:
    """Draw Triebe & Rajagopal's one-Gaussian-per-client data.

    Parameters
    ----------
    params : TriebeParams, optional
        Defaults to ``TriebeParams()``.
    seed : int
        Seed of the :class:`numpy.random.Generator`.

    Returns
    -------
    Dataset
        ``name="triebe"``; ``labels`` are the clients (0 .. clients-1, so the
        ``by-label`` split gives each client its rows), ``true_centers`` the
        ``clusters`` Gaussian means (all of them, even one no client drew).
        Rows are shuffled.
    """
    p = TriebeParams() if params is None else params
    rng = np.random.default_rng(seed)
    centers = np.repeat(np.arange(1.0, p.clusters + 1.0)[:, None], p.dims, axis=1)
    if p.balanced:
        gaussian = np.arange(p.clients) % p.clusters
    else:
        gaussian = rng.integers(p.clusters, size=p.clients)
    labels = np.repeat(np.arange(p.clients, dtype=np.int64), p.samples)
    X = centers[gaussian[labels]] + rng.normal(0.0, p.scale, size=(len(labels), p.dims))
    order = rng.permutation(len(X))
    return Dataset("triebe", X[order], labels[order], centers, TRIEBE_CITATION)


@dataclass(frozen=True)
class FFCMCase1Params:
    """Parameters of :func:`make_ffcm_case1`.

    Case 1 of the FFCM paper (``001``): three 2-D Gaussians with means
    (-2, -2), (0, 0), (2, 2) over three clients. In the first experiment
    every client has 333 points of each (``equal=True``); in the second, the
    one of Table 2, clients 1 and 2 keep that and client 3 has no point of
    the third Gaussian but 500 of each of the other two (``equal=False``,
    the default). The paper gives no standard deviation; 0.5 reproduces its
    centrally clustered within-SSE of Table 2 (0.312 in the paper's measure,
    see :mod:`fedcluster.metrics`), 0.4 and 0.6 give 0.25 and 0.38.

    Attributes
    ----------
    points : int
        Points of each Gaussian on each client holding it, >= 1.
    std : float
        Standard deviation of every coordinate, > 0.
    equal : bool
        Every client holds ``points`` of each Gaussian.
    third_client_points : int
        With ``equal=False``, points of the first and of the second Gaussian
        on client 3, >= 1.
    """

    points: int = 333
    std: float = 0.5
    equal: bool = False
    third_client_points: int = 500

    def __post_init__(self) -> None:
        _check_int("points", self.points, 1)
        _check_int("third_client_points", self.third_client_points, 1)
        _check_positive_float(self, "std")
        _check_bool(self, "equal")


#: Means of the FFCM paper's case 1.
FFCM_CASE1_MEANS = np.array([[-2.0, -2.0], [0.0, 0.0], [2.0, 2.0]])


def make_ffcm_case1(params: FFCMCase1Params | None = None, *, seed: int) -> Dataset:
    """Draw the FFCM paper's case 1.

    Parameters
    ----------
    params : FFCMCase1Params, optional
        Defaults to ``FFCMCase1Params()`` (Table 2's setting).
    seed : int
        Seed of the :class:`numpy.random.Generator`.

    Returns
    -------
    Dataset
        ``name="ffcm-case1"``; ``labels`` are the clients 0, 1, 2 (split with
        ``by-label``), ``true_centers`` the three means. Rows are shuffled.
    """
    p = FFCMCase1Params() if params is None else params
    rng = np.random.default_rng(seed)
    third = (p.points,) * 3 if p.equal else (p.third_client_points, p.third_client_points, 0)
    sizes = np.array([(p.points,) * 3, (p.points,) * 3, third])  # clients x Gaussians
    gaussian = np.concatenate([np.repeat(np.arange(3), row) for row in sizes])
    labels = np.repeat(np.arange(3, dtype=np.int64), sizes.sum(axis=1))
    X = FFCM_CASE1_MEANS[gaussian] + rng.normal(0.0, p.std, size=(len(labels), 2))
    order = rng.permutation(len(X))
    return Dataset("ffcm-case1", X[order], labels[order], FFCM_CASE1_MEANS.copy(), FFCM_CITATION)


@dataclass(frozen=True)
class GoogleSyntheticParams:
    """Parameters of :func:`make_google_synthetic`.

    The defaults are the synthetic set of Google's practical DP clustering
    benchmark (its README): 100,000 points in 100 dimensions from 64 equally
    weighted Gaussians, standard deviation 0.0125 per coordinate, centres
    uniform in the ball of radius 0.875 about the origin, every point then
    projected into the unit ball. Its generator states the two radii through
    one ratio ``r`` of the spread between clusters to the spread within:
    centres in radius ``radius * (1 - 1/r)`` and deviation
    ``sqrt(radius) / (r sqrt(dim))``; r = 8 gives 0.875 and 0.0125.

    Attributes
    ----------
    points : int
        Number of points, >= ``clusters``.
    dim : int
        Dimension, >= 1.
    clusters : int
        Number of Gaussians, >= 1.
    ratio : float
        The ratio ``r`` above, > 1.
    radius : float
        Every point lies in the ball of this radius about the origin, > 0.
    """

    points: int = 100_000
    dim: int = 100
    clusters: int = 64
    ratio: float = 8.0
    radius: float = 1.0

    def __post_init__(self) -> None:
        _check_int("dim", self.dim, 1)
        _check_int("clusters", self.clusters, 1)
        _check_int("points", self.points, self.clusters)
        _check_positive_float(self, "radius")
        _check_positive_float(self, "ratio")
        if self.ratio <= 1:
            raise ValueError(f"ratio must be > 1 (centres inside the ball), got {self.ratio}")


def _uniform_in_ball(rng: np.random.Generator, n: int, dim: int, radius: float) -> np.ndarray:
    """n points uniform in the dim-ball: a Gaussian direction, a radius with density ~ r^(dim-1)."""
    direction = rng.normal(size=(n, dim))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return direction * (radius * rng.uniform(size=(n, 1)) ** (1.0 / dim))


def make_google_synthetic(params: GoogleSyntheticParams | None = None, *, seed: int) -> Dataset:
    """Draw the synthetic set of Google's DP clustering benchmark (see :class:`GoogleSyntheticParams`).

    Choices its description leaves open or that differ from its generator:
    the cluster sizes differ by at most one (its generator puts the whole
    remainder in the last cluster: with the defaults 63 clusters of 1,562
    and one of 1,594, here 32 of 1,563 and 32 of 1,562), and the rows are
    shuffled so that the file order carries no cluster information.
    A point outside the ball is scaled onto its sphere, as the README says.

    Parameters
    ----------
    params : GoogleSyntheticParams, optional
        Defaults to ``GoogleSyntheticParams()`` (the README's set).
    seed : int
        Seed of the :class:`numpy.random.Generator`.

    Returns
    -------
    Dataset
        ``name="google-synthetic"``; ``true_centers`` the generating
        centres, ``labels`` index them (0 .. clusters-1).
    """
    p = GoogleSyntheticParams() if params is None else params
    rng = np.random.default_rng(seed)
    centers = _uniform_in_ball(rng, p.clusters, p.dim, p.radius * (1.0 - 1.0 / p.ratio))
    sizes = np.full(p.clusters, p.points // p.clusters)
    sizes[: p.points % p.clusters] += 1
    labels = np.repeat(np.arange(p.clusters, dtype=np.int64), sizes)
    std = math.sqrt(p.radius) / (p.ratio * math.sqrt(p.dim))
    X = centers[labels] + rng.normal(0.0, std, size=(p.points, p.dim))
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    X *= np.minimum(1.0, p.radius / np.maximum(norms, np.finfo(float).tiny))
    order = rng.permutation(p.points)
    return Dataset("google-synthetic", X[order], labels[order], centers, GOOGLE_SYNTHETIC_CITATION)


#: Parameter dataclass of every generated dataset; ``load_dataset(name, **fields)``.
DATASET_PARAMS: dict[str, type] = {
    "blobs": BlobsParams,
    "garst-grid": GarstGridParams,
    "triebe": TriebeParams,
    "ffcm-case1": FFCMCase1Params,
    "google-synthetic": GoogleSyntheticParams,
}
_GENERATORS = {
    "blobs": make_blobs,
    "garst-grid": make_garst_grid,
    "triebe": make_triebe,
    "ffcm-case1": make_ffcm_case1,
    "google-synthetic": make_google_synthetic,
}


def load_dataset(
    spec: str,
    *,
    seed: int = 0,
    blobs: BlobsParams | None = None,
    label_column: str | None = None,
    **params: Any,
) -> Dataset:
    """Load a named dataset or a file.

    Parameters
    ----------
    spec : str
        One of :data:`DATASET_NAMES` or :data:`G2_NAMES`, or the path of a
        file readable by :func:`~fedcluster.data.files.read_file`.
    seed : int, default 0
        Seed of the generated datasets; the shipped sets, digits and files
        are fixed data.
    blobs : BlobsParams, optional
        Parameters for ``"blobs"``; an error with any other ``spec``.
    label_column : str, optional
        For a CSV file: the column holding the labels (not a feature);
        ``None`` keeps the ``label`` convention, ``""`` reads every column as
        a feature (see :mod:`fedcluster.data.files`). An error for any other
        dataset (an ``.npz`` file holds its labels in ``y``).
    **params
        Fields of the generated dataset's parameter dataclass
        (:data:`DATASET_PARAMS`), for example
        ``load_dataset("garst-grid", seed=1, points=200, noise=1.2)``; an error
        for a dataset that is not generated.

    Returns
    -------
    Dataset
        For ``s1``..``s4``: 5000 x 2 points, labels 1..15 (label ``c`` belongs
        to ``true_centers[c - 1]``) and the 15 generating centres. For
        ``g2-D-S``: 2048 x D points, labels 0 and 1 (first and second 1024
        rows) and the two true centres. For ``digits``: 1797 x 64 pixel
        values 0..16, labels 0..9, no centres; ``iris``, ``wine`` and
        ``breast-cancer``: their raw features and classes, no centres. For ``mnist`` (``mnist-test``):
        60000 (10000) x 784 pixels scaled to [0, 1], labels 0..9, no centres.
        Generated sets: see their
        ``make_*`` function. For a file: its points, its labels (CSV label
        column, ``.npz`` ``y``) and its true centres (``.npz`` ``centers``),
        each ``None`` where the file has none.

    Raises
    ------
    DataError
        If ``spec`` is neither a known name nor an existing file, the file is
        invalid, or a set of :data:`SKLEARN_SETS` is asked for without scikit-learn.
    ValueError
        If parameters are given for a dataset that takes none, or are not
        fields of its parameter dataclass, or are out of range.
    """
    if blobs is not None and spec != "blobs":
        raise ValueError(f"blobs parameters given, but the dataset is {spec!r}")
    if label_column is not None and (spec in DATASET_NAMES or spec in G2_NAMES):
        raise ValueError(
            f"label_column ({label_column!r}) names a column of a CSV file; "
            f"the dataset {spec!r} is not a file"
        )
    if spec in _GENERATORS:
        if blobs is not None:
            if params:
                raise ValueError(
                    "give the blobs parameters either as blobs= or as keywords, not both")
            return make_blobs(blobs, seed=seed)
        return _GENERATORS[spec](_make_params(spec, params), seed=seed)
    if params:
        raise ValueError(
            f"dataset {spec!r} takes no parameters, got {', '.join(sorted(params))}; "
            f"the generated datasets {', '.join(_GENERATORS)} do"
        )
    if spec in ("s1", "s2", "s3", "s4"):
        return _load_sset(spec)
    if spec in G2_NAMES:
        return _load_g2(spec)
    if spec in SKLEARN_SETS:
        return _load_sklearn(spec)
    if spec in MNIST_FILES:
        return _load_mnist(spec)
    path = Path(spec)
    if path.suffix.lower() in READABLE_SUFFIXES or len(path.parts) > 1:
        if not path.exists():
            raise DataError(f"data file {spec}: no such file (looked in {path.resolve().parent})")
        if not path.is_file():
            raise DataError(f"data file {spec}: not a file")
    elif not path.is_file():
        raise DataError(
            f"unknown dataset {spec!r}: not one of {', '.join(DATASET_NAMES)}, not a "
            f"shipped G2-set 'g2-D-S' (D in {', '.join(map(str, G2_DIMENSIONS))}; "
            f"S in {', '.join(map(str, G2_DEVIATIONS))}) and not an existing file"
        )
    X, labels, centers = read_file(spec, label_column=label_column)
    return Dataset(spec, X, labels, centers, "")


def _make_params(name: str, params: dict[str, Any]) -> Any:
    """Build the parameter dataclass of generated dataset ``name`` from keywords."""
    cls = DATASET_PARAMS[name]
    known = [f.name for f in fields(cls)]
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ValueError(
            f"dataset {name!r} has no parameter {', '.join(map(repr, unknown))}; "
            f"its parameters: {', '.join(known)}"
        )
    return cls(**params)


def _load_sset(name: str) -> Dataset:
    """Read a vendored SIPU S-set (points, labels, centres)."""
    folder = resources.files("fedcluster.data").joinpath("sipu")
    with folder.joinpath(f"{name}.txt").open("r", encoding="ascii") as fh:
        X = np.loadtxt(fh, dtype=np.float64, ndmin=2)
    with folder.joinpath(f"{name}-cb.txt").open("r", encoding="ascii") as fh:
        centers = np.loadtxt(fh, dtype=np.float64, ndmin=2)
    labels_text = folder.joinpath(f"{name}-label.pa").read_text(encoding="ascii")
    return Dataset(name, X, _parse_pa(labels_text, f"{name}-label.pa"), centers, SSETS_CITATION)


def _load_g2(name: str) -> Dataset:
    """Read a vendored SIPU G2-set; the first 1024 rows are label 0, the rest label 1."""
    folder = resources.files("fedcluster.data").joinpath("sipu")
    with folder.joinpath(f"{name}.txt.gz").open("rb") as raw:
        with gzip.open(raw, "rt", encoding="ascii") as fh:
            X = np.loadtxt(fh, dtype=np.float64, ndmin=2)
    with folder.joinpath(f"{name}-gt.txt").open("r", encoding="ascii") as fh:
        centers = np.loadtxt(fh, dtype=np.float64, ndmin=2)
    half = len(X) // 2
    labels = np.repeat(np.array([0, 1], dtype=np.int64), [half, len(X) - half])
    return Dataset(name, X, labels, centers, G2_CITATION)


def _load_sklearn(name: str) -> Dataset:
    """A UCI set bundled with scikit-learn (no download): raw features, class labels, no centres."""
    loader, citation, image_shape = SKLEARN_SETS[name]
    try:
        from sklearn import datasets
    except ImportError:
        raise DataError(
            f"dataset {name!r} is loaded through scikit-learn, which is not installed; "
            "install it with `pip install scikit-learn`"
        ) from None
    bunch = getattr(datasets, loader)()
    return Dataset(name, np.asarray(bunch.data, dtype=np.float64),
                   np.asarray(bunch.target, dtype=np.int64), None,
                   f"{citation} (the copy bundled with scikit-learn, sklearn.datasets.{loader}).",
                   image_shape=image_shape)


MNIST_CITATION = (
    "Y. LeCun, C. Cortes and C. J. C. Burges, The MNIST database of handwritten digits "
    "(the original IDX files, shipped in fedcluster/data/mnist/)."
)
#: The shipped MNIST files of each set: (images, labels), each (file name, sha256 of its
#: uncompressed bytes, as in ``fedcluster/data/mnist/README.md``).
MNIST_FILES = {
    "mnist": (
        ("train-images.idx3-ubyte.gz", "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"),
        ("train-labels.idx1-ubyte.gz", "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"),
    ),
    "mnist-test": (
        ("t10k-images.idx3-ubyte.gz", "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"),
        ("t10k-labels.idx1-ubyte.gz", "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"),
    ),
}


def _load_mnist(name: str) -> Dataset:
    """The shipped MNIST set ``name``: pixels / 255 as float64 (784 features), labels 0-9.

    The DWF paper's preprocessing (pixels scaled to [0, 1]). Each file's
    uncompressed bytes are checked against the sha256 of the README before use.
    """
    (images_file, images_sha), (labels_file, labels_sha) = MNIST_FILES[name]
    images = _read_idx(images_file, images_sha, magic=0x0803, dims=3)
    labels = _read_idx(labels_file, labels_sha, magic=0x0801, dims=1)
    if images.shape[0] != labels.shape[0]:
        raise DataError(f"fedcluster/data/mnist/{images_file}: {images.shape[0]} images but "
                        f"{labels.shape[0]} labels in {labels_file}")
    X = images.reshape(images.shape[0], -1).astype(np.float64)
    X /= 255.0
    return Dataset(name, X, labels.astype(np.int64), None, MNIST_CITATION, image_shape=(1, 28, 28))


def _read_idx(file: str, sha256: str, *, magic: int, dims: int) -> np.ndarray:
    """Read a gzip-compressed IDX file shipped in ``fedcluster/data/mnist/``, checking its sha256."""
    import hashlib

    source = f"fedcluster/data/mnist/{file}"
    try:
        with resources.files("fedcluster.data").joinpath("mnist", file).open("rb") as raw:
            with gzip.open(raw, "rb") as fh:
                data = fh.read()
    except (OSError, EOFError) as exc:
        raise DataError(f"{source}: cannot read it ({exc}); reinstall fedcluster") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise DataError(f"{source}: sha256 of the uncompressed bytes is {digest}, expected {sha256} "
                        "(the file is damaged or not the original; reinstall fedcluster)")
    header = 4 + 4 * dims
    found = int.from_bytes(data[:4], "big")
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims))
    if found != magic or len(data) != header + math.prod(shape):
        raise DataError(f"{source}: not an IDX file of {dims} dimension(s) (magic {found:#x}, "
                        f"shape {shape}, {len(data)} bytes)")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def _parse_pa(text: str, source: str) -> np.ndarray:
    """Parse a SIPU partition file: a header ending in a ``---`` line, then one label per line."""
    lines = text.splitlines()
    ends = [i for i, line in enumerate(lines) if line.startswith("---")]
    if not ends:
        raise DataError(f"{source}: no '---' line ending the header")
    return np.array([int(line) for line in lines[ends[0] + 1 :] if line.strip()], dtype=np.int64)
