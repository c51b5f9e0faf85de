"""Privacy a data owner can state: secure aggregation and differential privacy.

* :mod:`.options`: the settings (``dp``, ``dp-epsilon``, ``dp-delta``,
  ``dp-noise-multiplier``, ``dp-clip``, ``data-bounds``, ``dp-bounds-share``,
  ``dp-start-share``, ``dp-rounds``,
  ``secure-aggregation``, ``secagg-threshold``, ``secagg-neighbours``,
  ``secagg-fraction-bits``) and
  which methods can honour them;
* :mod:`.mechanism`: the sum form of a Lloyd step, clipping, sensitivity and
  the Gaussian mechanism;
* :mod:`.accountant`: the budget, counted with ``dp-accounting``;
* :mod:`.bounds`: per-feature bounds estimated under DP (a run without
  ``data-bounds``);
* :mod:`.start`: the private start (``init = private``);
* :mod:`.secagg`: the SecAgg and SecAgg+ protocol (key agreement, Shamir
  shares, masks, the neighbour graph, fixed point);
* :mod:`.checks`: the checks of a secure total.

Each side's part of a private round stands with that side's other steps:
the client's sum step and protocol stages in :mod:`fedcluster.local.private`,
the server's rounds beside the round loop in :mod:`fedcluster.strategies.private`.

No module here imports Flower.
"""
