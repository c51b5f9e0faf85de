"""Request kinds and config keys of private rounds, shared by the clients and the server."""

#: One Lloyd step in sum form (:func:`fedcluster.privacy.client.sums_request`).
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
#: Request config key: the bounds step's noise multiplier ``z_b`` (0 or absent: bounds declared).
BOUNDS_NOISE_KEY = "dp-bounds-noise-multiplier"
