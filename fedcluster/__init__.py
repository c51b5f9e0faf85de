"""fedcluster: federated k-means-style clustering on Flower.

Each data owner computes on its own rows and sends only centroids, counts and
similar summaries; the server aggregates them with the method of one of the
papers this project implements.

The public names are imported on first use: ``import fedcluster.numerics``
(or the ClientApp) must not pay for the estimator, every method and SciPy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_names
from ._version import __version__

if TYPE_CHECKING:
    from .estimator import FederatedKMeans
    from .estimator import select_k

#: Public name -> the module that defines it.
_LAZY = {"FederatedKMeans": ".estimator", "select_k": ".estimator"}

__all__ = ["FederatedKMeans", "__version__", "select_k"]

__getattr__ = lazy_names(__name__, _LAZY, globals())
