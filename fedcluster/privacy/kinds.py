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
