"""fedcluster: federated k-means-style clustering on Flower.

Each data owner computes on its own rows and sends only centroids, counts and
similar summaries; the server aggregates them with the method of one of the
papers this project implements.
"""

__version__ = "0.2.0"

from .estimator import FederatedKMeans  # noqa: E402 - results record __version__
from .selection import select_k  # noqa: E402

__all__ = ["FederatedKMeans", "__version__", "select_k"]
