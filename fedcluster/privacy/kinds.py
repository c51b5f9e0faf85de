"""Request kinds and config keys of private rounds, shared by the clients and the server."""

#: One Lloyd step in sum form (:func:`fedcluster.local.private.sums_request`).
SUMS = "train.sums"
#: The number of features of a client's data (the only thing such a reply holds).
DIMENSION = "query.dimension"
#: Request config key: the standard deviation of a client's own noise on each sum (distributed DP).
CLIENT_NOISE_KEY = "dp-client-noise"
#: Request config key: the rounds a DP run's budget allows (a client checks its noise multiplier
#: spends at most ``dp-epsilon`` over them).
ROUNDS_KEY = "dp-rounds"
#: A histogram of each feature over a fixed grid, for bounds estimated under DP (:mod:`.bounds`).
HISTOGRAM = "query.histogram"
#: Per cell the request carries, the sum of the clipped rows nearest it and their number, for a
#: private start (:mod:`.start`).
CELL_SUMS = "query.cell_sums"
#: Request config key: the one multiplier of a DP run's setup steps together (bounds step,
#: private start; 0 or absent: none), which the accountant composes before the rounds.
SETUP_NOISE_KEY = "dp-setup-noise-multiplier"
#: Request config key of a setup step's request: that step's own noise multiplier.
STEP_NOISE_KEY = "dp-step-noise-multiplier"
