"""k-FED (Dennis, Li & Smith, "Heterogeneity for the Win: One-Shot Federated Clustering", ICML 2021).

One shot: every connected client runs k-means with ``k'`` clusters on its rows
and sends the centres once; the server seeds ``k`` of them by farthest-point
traversal from one client's centres and runs one Lloyd round over all
received centres (:func:`fedcluster.numerics.kfed.kfed_centres`). The same
computation starts the iterative methods with ``init="kfed"``
(:func:`.initialisation.kfed_init`).

Privacy floor: a client leaves its local clusters of fewer than
``min-cluster-size`` rows out of its reply, so it may send fewer than ``k'``
centres; the server seeds and clusters whatever centres it receives, and fails
the run with a clear message if they are fewer than ``k``.
"""

from __future__ import annotations

from ...messages import LOCAL_KMEANS
from ...strategies.initialisation import kfed_from_replies, local_kmeans_settings, validate_local_centroids
from ...strategies.oneshot import OneShotStrategy
from .options import KFedOptions



class KFed(OneShotStrategy):
    """k-FED: one-shot farthest-point clustering of the clients' local k'-means centres.

    Its settings are :class:`~.options.KFedOptions`: besides those of every
    method, ``k_prime``, the clusters of each client's local k-means (``k'``;
    0: ``k``). The paper's analysis asks for ``k' <= sqrt(k)`` true clusters
    per client; a client with fewer distinct rows sends fewer centres.

    Notes
    -----
    Where this departs from the paper or fills a gap:

    * Clients run k-means++ and Lloyd to convergence (the ``query.local_kmeans``
      request), not the Awasthi-Sheffet spectral k-means of the paper's
      Algorithm 1; the two agree on well separated local data.
    * Every connected client is asked (``participation`` does not apply):
      k-FED is one-shot, and a client left out would never contribute.
    * The client whose centres start the traversal is drawn from the
      restart's generator, after sorting the replies by their content, so a
      seed gives the same centres whatever the node ids.
    """

    Options = KFedOptions

    def request(self):
        """The centres of every connected client's local k'-means."""
        return (LOCAL_KMEANS, local_kmeans_settings(self, self.options.local_k),
                lambda s: validate_local_centroids(s, self.options.local_k), f"k-FED (local k' = {self.options.local_k})")

    def combine(self, exchange, what):
        """k-FED's central step over the accepted replies."""
        return kfed_from_replies(self, exchange)
