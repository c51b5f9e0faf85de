"""The names both sides of secure aggregation share (:mod:`.secagg`): request kinds, config keys.

Kept apart from the protocol so that a client process, which needs these
names to route a request, loads the protocol's stage code (and its
cryptography) only when a secure-aggregation stage actually runs.
"""

SETUP = "query.secagg_setup"
SHARE = "query.secagg_share"
MASKED = "query.secagg_masked"
UNMASK = "query.secagg_unmask"
#: The request kinds of the four stages, in order.
STAGES = (SETUP, SHARE, MASKED, UNMASK)

#: Request config keys of the protocol (the masked stage carries the inner step's config too).
ID_KEY = "secagg-id"
INNER_KIND_KEY = "secagg-kind"
FIELDS_KEY = "secagg-fields"
BITS_KEY = "secagg-fraction-bits"
#: Fraction bits of the fixed-point encoding by default.
DEFAULT_FRACTION_BITS = 24
#: Payload key of a masked-stage reply that names the senders whose key shares this
#: receiver could not decrypt, or that named another sender or receiver (instead of a vector).
UNREADABLE = "unreadable"
#: The vector fields a masked stage may carry, in the order they are packed.
FIELDS = ("sums", "counts", "sse", "n")
#: Key of the client's protocol state (a JSON text) in its session.
STATE_KEY = "secagg-state"
