"""What a data owner computes on its own rows, below the methods that use it.

* :mod:`.floor`: the privacy floor every reply is held to (``min-cluster-size``);
* :mod:`.steps`: the steps every method may ask for (a local k-means, the
  score of given centroids, the data's bounds);
* :mod:`.summaries`: the moments and silhouettes of the rows;
* :mod:`.private`: the sum form of a Lloyd step and the client's side of
  secure aggregation and DP (noise, the run's privacy settings held to the
  client's own floor).

The methods' own client steps (:mod:`fedcluster.methods`) import these; the
dispatcher that answers a request with the step of its kind
(:mod:`fedcluster.client.respond`) stands above the methods.
"""
