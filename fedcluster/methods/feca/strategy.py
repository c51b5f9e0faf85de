"""FeCA, Federated Centroid Aggregation (Xu, Chen, Chao & Zhang, "Jigsaw Game", paper ``004``).

One shot (Algorithm 1): every connected client runs k-means++ and Lloyd with
``k'`` clusters, removes one-fit-many centroids (Algorithm 2), gives each
remaining centroid a radius (Algorithm 4, or Algorithm 3 with
``radius="theoretical"``) and sends the centroid-radius pairs with their
cluster sizes (``query.feca``, :func:`fedcluster.methods.feca.client.feca_request`);
the server groups all received centroids, largest radius first, and returns
the means of the ``k`` largest groups (Algorithm 5,
:func:`fedcluster.methods.feca.kernels.feca_aggregate`).

Privacy floor: a client sends only centroids of at least ``min-cluster-size``
rows (after its refinement), so a small local cluster contributes no pair, and
each radius is a statistic of at least that many rows of its own cluster (see
:mod:`.kernels`, "Radii and the privacy floor"); the server groups the pairs it
gets, and says so when they form fewer than ``k`` groups (the result then has
fewer centroids).
"""

from __future__ import annotations

from logging import INFO, WARNING

import numpy as np

from ...logs import counted, log
from ...strategies.initialisation import local_kmeans_settings, validate_local_centroids
from ...strategies.oneshot import OneShotStrategy
from .client import FECA
from .kernels import feca_aggregate
from .options import FeCAOptions



class FeCA(OneShotStrategy):
    """FeCA: clients refine their local k-means and assign radii; the server groups by radius.

    Choices where the paper is open (the numerical ones are documented in
    :mod:`fedcluster.methods.feca.kernels`):

    * clients run ``k' = k`` clusters by default, as Algorithm 1 does
      (``ClientUpdate(k)``); appendix E also studies ``k' != k``;
    * the local Lloyd run starts from k-means++ (the paper does not say how
      it starts) and runs to convergence;
    * the server's group means are unweighted, ``mean(S_j)`` (Algorithm 5); the
      clients' cluster sizes travel with the centroids but only feed the
      ``points-in-groups`` metric;
    * the received centroids are pooled in an order given by their values, so
      that ties of the largest radius (and of group sizes) never depend on
      node ids or reply order;
    * with fewer than ``k`` groups (for example when every client converged to
      the same local solution, section 4.3), the result has fewer than ``k``
      centroids and the log says so.

    Its settings are :class:`~.options.FeCAOptions`: besides those of every
    method, ``k_prime`` (0: ``k``) and ``radius``, the clients' radius rule:
    ``"algorithm4"`` (per centroid, the paper's choice for its experiments)
    or ``"theoretical"`` (Algorithm 3, one radius per client).
    """

    Options = FeCAOptions

    def request(self):
        """Every connected client's refined centroids, radii and cluster sizes."""
        settings = {**local_kmeans_settings(self, self.options.local_k), "radius": self.radius}
        return (FECA, settings,
                lambda s: validate_local_centroids(s, self.options.local_k,
                                                   expect=("centroids", "counts", "radii")),
                f"FeCA (local k' = {self.options.local_k}, radius {self.radius})")

    def combine(self, exchange, what):
        """Algorithm 5 over all received centroid-radius pairs."""
        summaries = self.weighed(exchange)
        centroids = np.concatenate([s.centroids for s in summaries])
        radii = np.concatenate([s.radii for s in summaries])
        counts = np.concatenate([s.counts for s in summaries])
        if len(centroids) == 0:
            log(WARNING, "%s: the clients sent no centroid", what)
            return None
        order = np.lexsort(np.column_stack([centroids, radii, counts]).T[::-1])
        centroids, radii, counts = centroids[order], radii[order], counts[order]
        result = feca_aggregate(centroids, radii, self.k)
        sizes = [len(m) for m in result.members]
        log(INFO, "%s: %s from %s formed %s; kept %d of sizes %s", what,
            counted(len(centroids), "centroid"), counted(len(summaries), "client"),
            counted(result.n_groups, "group"), len(sizes), sizes)
        if result.n_groups < self.k:
            log(WARNING, "%s: only %d groups, fewer than k = %d: the result has %d centroids",
                what, result.n_groups, self.k, result.n_groups)
        return result.centroids
