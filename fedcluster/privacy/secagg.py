"""Secure aggregation of the clients' sums and counts: SecAgg and SecAgg+.

SecAgg is Bonawitz et al., CCS 2017; SecAgg+ is Bell et al., CCS 2020
("Secure single-server aggregation with (poly)logarithmic overhead"), what
Flower's ``SecAggPlusWorkflow`` implements: the same protocol on a sparse
graph, each client exchanging keys, shares and masks with its neighbours
only. ``secagg-neighbours`` sets the degree ``d``: by default (:data:`AUTO`)
it follows from the number ``m`` of participants as Bell et al.'s analysis
prescribes (:func:`auto_graph`: SecAgg's complete graph, ``d = m - 1``, below
20 participants, then ``O(log m)`` neighbours: 34 at 1000); 0 is the
complete graph, a number ``d`` that many neighbours.

With ``secure-aggregation = true`` the server learns the total of the round's
participants' vectors and nothing else of any one of them: each client adds
to its fixed-point vector a private mask and, for each neighbour, a pairwise
mask that the neighbour adds with the opposite sign, so the pairwise masks
cancel in the sum; a client that drops out after the key exchange leaves its
pairwise masks in its neighbours' vectors, and the server removes them by
reconstructing the dropped client's mask key from Shamir shares its
surviving neighbours hold. One aggregation is four request rounds (stages):

1. ``query.secagg_setup``: each client makes two fresh EC key pairs (P-384,
   as Flower's ``generate_key_pairs``) and sends the public keys.
2. ``query.secagg_share``: the server draws the neighbour graph
   (:func:`neighbour_graph`: a ring in an order new to each aggregation) and
   sends each client the public keys of its neighbourhood (itself and its
   ``d`` neighbours, ``n = d + 1`` clients); each client draws a mask seed,
   splits the seed and its first private key into ``t``-of-``n`` Shamir
   shares, keeps one and sends each neighbour its shares, encrypted (Fernet)
   under a key agreed from the second key pair.
3. ``query.secagg_masked``: the server forwards to each client the ciphertexts
   addressed to it; the client runs the round's step (the request carries it),
   encodes its vector in fixed point and sends it masked.
4. ``query.secagg_unmask``: the server names to each survivor (who sent a
   masked vector) the survivors and the dropped of its neighbourhood; the
   survivor sends its shares of those survivors' seeds and of those dropped
   clients' private keys, never both for one client (that would unmask it).
   With ``t`` shares of each secret the server removes every mask.

``t`` is ``secagg-threshold`` times the neighbourhood's ``n`` clients
(every participant under SecAgg), rounded up, and at least a majority and at
least 2 (by default a majority, where the graph is sparse at least what
:func:`auto_graph` needs against corrupt neighbours too, and under
distributed DP on the complete graph all ``m``:
:func:`~.options.threshold_setting`): each client
refuses a smaller ``t``, so that no server can
reconstruct a client's private mask with the shares of a minority of its
neighbourhood. A client checks what it can of the graph: it is in its
neighbourhood, the neighbourhood has the size the setting gives for the
number of participants (:func:`graph_degree`), the keys are its own and
distinct, and later ciphertexts and unmasking lists name its neighbours only.

Dropout tolerance is per neighbourhood: clients that drop out after stage 2
do not stop the round as long as every participant's neighbourhood keeps
``t`` survivors (under SecAgg: ``m - t`` of the ``m`` may drop); one that
drops before stage 2 is simply not a participant. A ``t`` of the whole
neighbourhood tolerates none: the server then starts the aggregation again
without the lost (:meth:`~fedcluster.strategies.private.SecureSum.enough`). Per client a round costs
``O(d)`` key agreements, shares and ciphertexts instead of ``O(m)``. The
price (as in Bell et al.): the server learns the total of each connected
part of the surviving clients' graph. The ring is ``d``-connected, so fewer
than ``d`` clients lost after the graph is drawn leave one part (the plain
total); more may split it into parts of ``t`` or more clients each, whose
totals the server then learns.

Cryptography: nothing of fedcluster's own making; the primitives are those
under Flower's ``flwr.common.secure_aggregation`` (the layering rule keeps
Flower out of the in-memory federation and the clients' answers, so they are
called directly): ECDH on P-384 with HKDF-SHA256 (``cryptography``) for key
agreement, Fernet for the shares in transit, Shamir secret sharing over
GF(2^128) on 16-byte blocks (``pycryptodome``, as Flower's ``create_shares``).
Masks are AES-256 in counter mode keyed by the 32-byte agreed key or seed
(the key pairs and seeds are new for every aggregation, so the zero nonce
never repeats under one key). Flower's own mask generator is not used: it
folds the seed to 32 bits before seeding NumPy, which leaves 2^32 possible
masks.

Fixed point: a value ``v`` is sent as the integer ``round(v * 2^f)`` (``f`` =
``secagg-fraction-bits``, 24 by default), split into three 64-bit words (its
low and middle 32 bits and the signed rest), so that the masked totals
modulo 2^64 never carry from one word into the next and the server rebuilds
each total exactly (:func:`encode`, :func:`decode`). The total's error is at
most ``m * 2^-(f+1)`` per entry (counts and row numbers are exact); a value
must stay below ``2^(90 - f)`` in magnitude (7e19 for ``f = 24``), else the
client refuses with an error reply that names it.

Against a dishonest client (the server's side, :class:`~fedcluster.strategies.private.SecureSum`):
a public key that is not a P-384 point, or one that two clients sent, leaves
its senders out of the aggregation by name; a receiver that cannot read a
sender's encrypted key shares (or finds them addressed to another) names the
sender in place of its masked vector (:data:`UNREADABLE`) and takes no
further part, and the server starts the aggregation again without the
accused (a false accusation costs the accused that aggregation; the log
names both); every secret is rebuilt from all its shares, the senders of
shares off the majority's polynomial named (:func:`rebuild_secret`); and
the decoded total is checked before use (:mod:`.checks`): a garbage masked
vector, or wrong shares where no majority outvotes them, fail the round.

What it does not do (SecAgg's semi-honest model): it does not check that a
client's vector is honest (a poisoned vector within the total's rules is
hidden in the total; whose vector made a total fail its check cannot be
told), and it relies on the server relaying
public keys faithfully (no key signatures: SecAgg's active-adversary variant
needs a PKI, and a server that lies about the graph or the dropped is
outside the model too). The graph is Flower's ring with an order drawn
anew each aggregation from fresh randomness; the default degree and
threshold meet Bell et al.'s bounds for 5 % corrupt and 5 % dropped
participants at statistical security 2^-40 (:func:`auto_graph`); a smaller
``secagg-neighbours`` set by the user buys cost with that margin (the
server's log says so).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import itertools
import json
import math
import os
from collections.abc import Callable, Collection, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np
from Crypto.Protocol.SecretSharing import Shamir
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..messages import ClientSummary, ProtocolError, Request
from .secagg_names import (BITS_KEY, FIELDS, FIELDS_KEY, ID_KEY, INNER_KIND_KEY, MASKED, SETUP,
                           SHARE, STAGES, STATE_KEY, UNMASK, UNREADABLE)

_CURVE = ec.SECP384R1()
#: Bytes of a private scalar and of a mask seed: the two secrets a client shares.
SCALAR_BYTES = 48
SEED_BYTES = 32
_BLOCK = 16
_WRAP = 2 ** 64


# -- primitives (the libraries under Flower's secure_aggregation) ----------------------
def new_private_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(_CURVE)


def private_bytes(key: ec.EllipticCurvePrivateKey) -> bytes:
    """The private scalar, 48 bytes (three Shamir blocks)."""
    return key.private_numbers().private_value.to_bytes(SCALAR_BYTES, "big")


def private_from_bytes(data: bytes) -> ec.EllipticCurvePrivateKey:
    return ec.derive_private_key(int.from_bytes(data, "big"), _CURVE)


def public_bytes(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.X962,
                                         serialization.PublicFormat.CompressedPoint)


def public_point(data: bytes) -> ec.EllipticCurvePublicKey:
    """A public key of the key exchange (an encoded P-384 point).

    Raises
    ------
    ProtocolError
        ``data`` is not a P-384 point: the server refuses such a key at the
        key exchange, so that no honest client fails on it later.
    """
    try:
        return ec.EllipticCurvePublicKey.from_encoded_point(_CURVE, data)
    except ValueError:
        raise ProtocolError("a public key of the key exchange is not a P-384 point") from None


def agreed_key(private: bytes, peer_public: bytes) -> bytes:
    """ECDH of our private scalar and the peer's public key, through HKDF-SHA256: 32 bytes."""
    shared = private_from_bytes(private).exchange(ec.ECDH(), public_point(peer_public))
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                info=b"fedcluster secagg").derive(shared)


def mask(key: bytes, size: int) -> np.ndarray:
    """``size`` uint64 words of AES-256-CTR keystream under ``key`` (zero nonce)."""
    encryptor = Cipher(algorithms.AES(key), modes.CTR(b"\0" * 16)).encryptor()
    return np.frombuffer(encryptor.update(b"\0" * (8 * size)), dtype="<u8").astype(np.uint64)


def seal(key: bytes, plaintext: bytes) -> bytes:
    return Fernet(base64.urlsafe_b64encode(key)).encrypt(plaintext)


def unseal(key: bytes, ciphertext: bytes) -> bytes:
    try:
        return Fernet(base64.urlsafe_b64encode(key)).decrypt(ciphertext)
    except InvalidToken:
        raise ProtocolError("a key share could not be decrypted") from None


def split_secret(secret: bytes, threshold: int, parties: int) -> list[bytes]:
    """``parties`` Shamir shares of ``secret`` (a multiple of 16 bytes), any ``threshold`` of which rebuild it.

    Share ``i`` (1-based) is the index as one byte followed by one 16-byte
    share per 16-byte block of the secret.
    """
    if len(secret) % _BLOCK or not 2 <= threshold <= parties <= 255:
        raise ValueError(f"cannot share {len(secret)} bytes {threshold} of {parties}")
    shares = [bytearray([i + 1]) for i in range(parties)]
    for start in range(0, len(secret), _BLOCK):
        for index, piece in Shamir.split(threshold, parties, secret[start:start + _BLOCK], ssss=False):
            shares[index - 1] += piece
    return [bytes(s) for s in shares]


def combine_secret(shares: Sequence[bytes]) -> bytes:
    """The secret from at least ``threshold`` of its shares (as :func:`split_secret` made them)."""
    blocks = {len(s) for s in shares}
    if len(blocks) != 1 or (blocks.pop() - 1) % _BLOCK:
        raise ProtocolError("key shares of different lengths")
    size = len(shares[0]) - 1
    return b"".join(
        Shamir.combine([(s[0], s[1 + start:1 + start + _BLOCK]) for s in shares], ssss=False)
        for start in range(0, size, _BLOCK))


# -- fixed point ------------------------------------------------------------------------
#: Each value travels as this many 64-bit words (:func:`encode`).
LIMBS = 3
_LIMB = 2 ** 32
#: Largest magnitude of an encoded integer: its top limb's total cannot wrap for any
#: number of participants below 2^32.
_LARGEST = 2 ** 90


def encode(values: np.ndarray, fraction_bits: int) -> np.ndarray:
    """Values in fixed point, ``V = round(v * 2^f)``, as three 64-bit limbs each (uint64).

    ``V`` is split into its low and middle 32 bits and the signed rest
    (``V >> 64``), each in one uint64 word (two's complement): the masked
    sums of the words cannot carry into each other below 2^32 participants,
    so :func:`decode` rebuilds every total exactly. ``|V|`` must stay below
    2^90 (a value below ``2^(90 - f)``, about 7e19 for ``f = 24``).

    Raises
    ------
    ProtocolError
        A value that is not finite or too large; the message names it.
    """
    values = np.ravel(np.asarray(values, dtype=np.float64))
    if values.size and not np.all(np.isfinite(values)):
        raise ProtocolError("a value to aggregate is not finite")
    out = np.zeros(LIMBS * values.size, dtype=np.uint64)
    for i, value in enumerate(values.tolist()):
        scaled = round(value * 2.0 ** fraction_bits)
        if abs(scaled) >= _LARGEST:
            raise ProtocolError(
                f"a value of magnitude {abs(value):.6g} does not fit the fixed-point encoding "
                f"(|value| < {_LARGEST / 2.0 ** fraction_bits:.6g} with secagg-fraction-bits "
                f"{fraction_bits}); lower secagg-fraction-bits")
        out[LIMBS * i] = scaled % _LIMB
        out[LIMBS * i + 1] = (scaled >> 32) % _LIMB
        out[LIMBS * i + 2] = (scaled >> 64) % _WRAP
    return out


def decode(total: np.ndarray, fraction_bits: int) -> np.ndarray:
    """The float64 values of summed limbs (:func:`encode`), rebuilt exactly before rounding."""
    words = np.asarray(total, dtype=np.uint64).reshape(-1, LIMBS)
    values = []
    for low, middle, high in words.tolist():
        high = high - _WRAP if high >= 2 ** 63 else high
        values.append(float(low + (middle << 32) + (high << 64)) / 2.0 ** fraction_bits)
    return np.array(values, dtype=np.float64)


def node_list(data: bytes) -> list[int]:
    """Node ids from their uint64 encoding (Flower's node ids may exceed int64)."""
    if not isinstance(data, bytes) or len(data) % 8:
        raise ProtocolError("a node list is not a sequence of 8-byte ids")
    return [int(v) for v in np.frombuffer(data, dtype="<u8")]


def node_bytes(nodes: Sequence[int]) -> bytes:
    return np.asarray(list(nodes), dtype="<u8").tobytes()


def minimum_threshold(parties: int) -> int:
    """The smallest ``t`` a client accepts for ``parties`` participants: a majority, at least 2."""
    return max(2, parties // 2 + 1)


def threshold_for(fraction: float, parties: int) -> int:
    """``t`` for ``secagg-threshold`` ``fraction`` of ``parties``, never below :func:`minimum_threshold`."""
    return min(parties, max(minimum_threshold(parties), math.ceil(fraction * parties - 1e-9)))


# -- the neighbour graph (SecAgg+) --------------------------------------------------------
#: ``secagg-neighbours`` of the default: the degree and the threshold follow from the number of
#: participants (:func:`auto_graph`).
AUTO = -1
#: The security parameters of :func:`auto_graph` (Bell et al. 2020 leave them to the user; these
#: are fedcluster's choices): gamma, the fraction of a round's participants that may be corrupt
#: (colluding with the server); delta, the fraction that may drop out after the key exchange
#: (both 5 %, the example of Bell et al.'s abstract); sigma, the statistical security parameter
#: (privacy fails with probability below 2^-sigma; 40, as Bell et al. and Google's reference
#: implementation); eta, the correctness parameter (a round fails for too few survivors with
#: probability below 2^-eta; 30, where Google's implementation takes 20: a failed round here ends
#: the run).
CORRUPT_FRACTION = 0.05
DROPOUT_FRACTION = 0.05
SECURITY_BITS = 40
CORRECTNESS_BITS = 30


def graph_degree(setting: int, parties: int) -> int:
    """The number of neighbours of each of ``parties`` participants for a user-set ``secagg-neighbours``.

    0, or a setting that reaches ``parties - 1``, gives every other participant
    (SecAgg's complete graph). Otherwise the degree is the setting rounded up
    to an even number: the ring links each participant to the ``d / 2`` on
    either side (Flower's ``SecAggPlusWorkflow`` likewise makes its number of
    shares, the degree plus one, odd). :data:`AUTO` is resolved by
    :func:`graph_rule`, never here.
    """
    even = setting + setting % 2
    return parties - 1 if setting <= 0 or even >= parties - 1 else even


def graph_rule(setting: int, parties: int, fraction: float, *, all_on_complete: bool = False
               ) -> tuple[int, int]:
    """The degree ``d`` and the threshold ``t`` of an aggregation among ``parties`` participants.

    ``setting`` is ``secagg-neighbours``: :data:`AUTO` (the default) takes
    both from :func:`auto_graph`; a number the user set wins (its degree is
    :func:`graph_degree`'s, its threshold ``secagg-threshold`` ``fraction`` of
    the ``d + 1`` clients of a neighbourhood, :func:`threshold_for`), even
    where it is below what :func:`auto_graph` would choose. With
    ``all_on_complete`` (the default threshold under distributed DP,
    :func:`~.options.threshold_setting`) ``t`` is every participant wherever
    the graph is the complete one.
    """
    if setting == AUTO:
        degree, threshold = auto_graph(parties, fraction)
    else:
        degree = graph_degree(setting, parties)
        threshold = threshold_for(fraction, degree + 1)
    return degree, parties if all_on_complete and degree == parties - 1 else threshold


@functools.lru_cache(maxsize=1024)
def auto_graph(parties: int, fraction: float) -> tuple[int, int]:
    """The smallest even degree ``d`` and its threshold ``t`` that meet Bell et al.'s conditions.

    Bell, Bonawitz, Gascon, Lepoint & Raykova, "Secure single-server
    aggregation with (poly)logarithmic overhead" (CCS 2020; IACR ePrint
    2020/704), the conditions of their semi-honest analysis: SecAgg+ is secure
    and correct on a graph of ``m`` clients if,
    with ``C = floor(gamma m)`` corrupt and ``D = floor(delta m)`` dropped
    clients placed independently of the graph (:data:`CORRUPT_FRACTION` and
    the other parameters above),

    1. the honest survivors' graph stays connected (else the server learns the
       total of each part), except with probability ``2^-(sigma+1)``;
    2. no client has ``t`` or more corrupt neighbours (they would hold ``t``
       shares of both its secrets), except with probability ``2^-(sigma+1)``;
    3. every client keeps ``t`` surviving neighbours (its masks can be
       removed), except with probability ``2^-eta``;

    the two privacy events share ``2^-sigma`` equally, and (2) and (3) are
    union bounds over the ``m`` clients. The graph is fedcluster's ring
    (:func:`neighbour_graph`, a Harary graph in a random order, where Bell et
    al. draw an Erdos-Renyi graph), so (1) is bounded as Google's reference
    implementation of the paper bounds its random Harary graph
    (``fcp/secagg/server/graph_parameter_finder.cc``): splitting the ring
    takes two runs of ``d / 2`` consecutive lost clients, ``m (m - d - 1) / 2``
    places for the pair, each with probability ``(C+D)_d / (m)_d`` (falling
    factorials) under a random order. (2) and (3) count a client's ``d``
    neighbours among the ``m - 1`` others as hypergeometric draws: corrupt
    ones out of ``C``, surviving ones out of ``m - 1 - D`` (the worst case
    for both; the client's own share is not counted among the survivors, as
    a dropped client has none). ``t`` is the smallest value that (2) allows,
    raised to ``secagg-threshold`` ``fraction`` of the neighbourhood and to a
    majority (:func:`threshold_for`: the clients refuse less, and a majority
    keeps a server that names a client dropped to some neighbours and alive to
    others from getting ``t`` honest shares of both its secrets); ``d`` is the
    smallest even degree below ``m - 1`` whose ``t`` meets (3) and whose ring
    meets (1). The degree grows as ``O(log m)``: 6 at 50 participants, 22 at
    200, 34 at 1000, 38 at 10,000 (``t`` 4, 12, 18, 21).

    Choices the paper leaves open: the parameters above; the complete graph
    (SecAgg, ``t`` as :func:`threshold_for` gives for all ``m``) wherever
    ``gamma m`` or ``delta m`` is below one client (``m < 20``: the model would
    then allow a sparse graph that a single corrupt client breaks, while the
    complete graph holds against any corrupt minority, at a cost that is small
    for such ``m``) and wherever no even degree below ``m - 1`` meets the
    conditions (as Google's implementation falls back).
    """
    full = (parties - 1, threshold_for(fraction, parties))
    corrupt = math.floor(CORRUPT_FRACTION * parties + 1e-9)
    dropped = math.floor(DROPOUT_FRACTION * parties + 1e-9)
    if corrupt < 1 or dropped < 1:
        return full
    privacy_risk = 2.0 ** -(SECURITY_BITS + 1)
    for degree in range(2, parties - 1, 2):
        if _log2_split(parties, degree, corrupt + dropped) >= math.log2(privacy_risk):
            continue
        corrupt_near = _hypergeometric(parties - 1, corrupt, degree)
        # The smallest t with P(t or more corrupt neighbours) <= privacy_risk / m.
        tail, least = 0.0, 0
        for count in range(degree, -1, -1):
            tail += corrupt_near[count]
            if tail > privacy_risk / parties:
                least = count + 1
                break
        threshold = max(least, threshold_for(fraction, degree + 1))
        alive_near = _hypergeometric(parties - 1, parties - 1 - dropped, degree)
        if sum(alive_near[:threshold]) <= 2.0 ** -CORRECTNESS_BITS / parties:
            return degree, threshold
    return full


def _hypergeometric(population: int, marked: int, draws: int) -> list[float]:
    """P(``x`` marked among ``draws`` drawn without replacement), for ``x = 0 .. draws``."""
    def log_choose(n: int, k: int) -> float:
        return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)

    whole = log_choose(population, draws)
    return [math.exp(log_choose(marked, x) + log_choose(population - marked, draws - x) - whole)
            if x <= marked and draws - x <= population - marked else 0.0
            for x in range(draws + 1)]


def _log2_split(parties: int, degree: int, lost: int) -> float:
    """log2 of a bound on P(the ring of ``degree`` splits when ``lost`` random clients leave it)."""
    if lost < degree:
        return -math.inf  # two runs of degree / 2 lost clients are needed
    pairs = math.log(parties) + math.log(parties - degree - 1) - math.log(2)
    runs = (math.lgamma(lost + 1) - math.lgamma(lost - degree + 1)
            + math.lgamma(parties - degree + 1) - math.lgamma(parties + 1))
    return (pairs + runs) / math.log(2)


def neighbour_graph(key: str, nodes: Sequence[int], degree: int) -> dict[int, list[int]]:
    """Each participant's neighbours (sorted) for the ring of ``degree`` (:func:`graph_degree` of it).

    The graph is Harary's ``H(d, m)`` on a circle, as Flower's SecAgg+ builds
    it: each participant's neighbours are the ``d / 2`` before and after it,
    so the graph is symmetric, ``d``-regular and ``d``-connected (fewer than
    ``d`` dropouts cannot split the survivors). The circle's order is the
    participants sorted by SHA-256 of ``key`` and their id. The server's key
    is the aggregation id and 128 fresh bits from the operating system, so
    the order is new for each aggregation, like Flower's shuffle, and
    independent of who may be corrupt, as :func:`auto_graph`'s analysis
    assumes (the aggregation id alone comes from the run's seeded generator,
    which a client may know).
    """
    order = sorted(set(nodes), key=lambda n: hashlib.sha256(
        key.encode() + int(n).to_bytes(8, "little")).digest())
    m = len(order)
    degree = graph_degree(degree, m)
    half = degree // 2 if degree < m - 1 else m // 2
    return {node: sorted({order[(i + offset) % m] for offset in range(-half, half + 1)} - {node})
            for i, node in enumerate(order)}


def _pack(src: int, dst: int, seed_share: bytes, key_share: bytes) -> bytes:
    return (src.to_bytes(8, "little") + dst.to_bytes(8, "little")
            + len(seed_share).to_bytes(4, "little") + seed_share + key_share)


def _unpack(data: bytes) -> tuple[int, int, bytes, bytes]:
    if len(data) < 20:
        raise ProtocolError("a decrypted key share is too short")
    size = int.from_bytes(data[16:20], "little")
    return (int.from_bytes(data[:8], "little"), int.from_bytes(data[8:16], "little"),
            data[20:20 + size], data[20 + size:])


def pack_vector(summary: ClientSummary, fields: Sequence[str]) -> np.ndarray:
    """The named fields of a summary as one float64 vector (:data:`FIELDS` order)."""
    parts = []
    for name in fields:
        value = summary.n if name == "n" else getattr(summary, name)
        if value is None or (name == "sse" and math.isnan(value)):
            raise ProtocolError(f"the step's reply has no '{name}' to aggregate")
        parts.append(np.ravel(np.asarray(value, dtype=np.float64)))
    return np.concatenate(parts) if parts else np.zeros(0)


# -- the client's side ---------------------------------------------------------------------

def _load(session: Mapping[str, Any]) -> dict[str, Any]:
    text = session.get(STATE_KEY)
    return json.loads(text) if isinstance(text, str) else {}


def _save(session: MutableMapping[str, Any], state: dict[str, Any]) -> None:
    session[STATE_KEY] = json.dumps(state)


def _hex(data: bytes) -> str:
    return data.hex()


def _require(config: Mapping[str, Any], key: str, kind: type):
    value = config.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ProtocolError(f"secure aggregation: request config '{key}' must be "
                            f"{kind.__name__}, got {type(value).__name__}")
    return value


def _bytes_list(config: Mapping[str, Any], key: str) -> list[bytes]:
    value = config.get(key)
    if not isinstance(value, list) or not all(isinstance(v, bytes) for v in value):
        raise ProtocolError(f"secure aggregation: request config '{key}' must be a list of bytes")
    return value


def client_stage(request: Request, session: MutableMapping[str, Any], node: int,
                 inner: Callable[[Request], ClientSummary]) -> ClientSummary:
    """One stage of the protocol on the client ``node``; its state lives in ``session``.

    ``inner`` answers the round's own request (the masked stage's). The reply
    carries only the stage's payload (``n`` is 0: the row count, where the
    server asks for it, travels masked). Every check failure raises
    :class:`ProtocolError`: the client then answers with an error and takes
    no further part in the aggregation.
    """
    config = request.config
    agg_id = _require(config, ID_KEY, str)
    state = _load(session)
    if request.kind == SETUP:
        return _setup(session, agg_id)
    if state.get("id") != agg_id:
        raise ProtocolError(f"secure aggregation {agg_id!r}: no key exchange of this aggregation")
    expected = {SHARE: "setup", MASKED: "share", UNMASK: "masked"}[request.kind]
    if state.get("stage") != expected:
        raise ProtocolError(f"secure aggregation {agg_id!r}: {request.kind} after stage "
                            f"{state.get('stage')!r}, expected after {expected!r}")
    if request.kind == SHARE:
        return _share(session, state, config, node)
    if request.kind == MASKED:
        return _masked(session, state, request, node, inner)
    return _unmask(session, state, config, node)


def _setup(session, agg_id: str) -> ClientSummary:
    first, second = new_private_key(), new_private_key()
    state = {"id": agg_id, "stage": "setup", "sk1": _hex(private_bytes(first)),
             "sk2": _hex(private_bytes(second)), "pk1": _hex(public_bytes(first)),
             "pk2": _hex(public_bytes(second))}
    _save(session, state)
    return ClientSummary(n=0, payload={"pk1": public_bytes(first), "pk2": public_bytes(second)})


def _share(session, state: dict, config, node: int) -> ClientSummary:
    """Shares of the seed and first key, ``t``-of-``m`` among this node and its neighbours only.

    ``nodes`` are this node and its neighbours (every participant under
    SecAgg), ``m`` of them. The client checks what it can of the graph: it is
    in it, its neighbours are as many as ``neighbours`` (the setting) gives
    for ``participants``, and ``t`` is a majority of ``m`` (:func:`minimum_threshold`):
    no minority of its neighbourhood can rebuild its seed.
    """
    nodes = node_list(_require(config, "nodes", bytes))
    pk1s, pk2s = _bytes_list(config, "pk1"), _bytes_list(config, "pk2")
    threshold = _require(config, "threshold", int)
    setting = _require(config, "neighbours", int)
    participants = _require(config, "participants", int)
    m = len(nodes)
    if len(pk1s) != m or len(pk2s) != m or len(set(nodes)) != m or node not in nodes:
        raise ProtocolError("secure aggregation: the key list is inconsistent or leaves this node out")
    if setting < 0 or participants < m or m - 1 != graph_degree(setting, participants):
        raise ProtocolError(f"secure aggregation: {m - 1} neighbours, but secagg-neighbours "
                            f"{setting} among {participants} participants gives "
                            f"{graph_degree(setting, max(participants, 1))}")
    if not minimum_threshold(m) <= threshold <= m:
        raise ProtocolError(f"secure aggregation: threshold {threshold} for {m} participants; "
                            f"this client needs between {minimum_threshold(m)} and {m}")
    me = nodes.index(node)
    if pk1s[me] != bytes.fromhex(state["pk1"]) or pk2s[me] != bytes.fromhex(state["pk2"]):
        raise ProtocolError("secure aggregation: the key list does not hold this node's own keys")
    if len(set(pk1s) | set(pk2s)) != 2 * m:
        raise ProtocolError("secure aggregation: two participants share a public key")
    seed = os.urandom(SEED_BYTES)
    seed_shares = split_secret(seed, threshold, m)
    key_shares = split_secret(bytes.fromhex(state["sk1"]), threshold, m)
    destinations, ciphertexts = [], []
    for index, other in enumerate(nodes):
        if other == node:
            continue
        key = agreed_key(bytes.fromhex(state["sk2"]), pk2s[index])
        destinations.append(other)
        ciphertexts.append(seal(key, _pack(node, other, seed_shares[index], key_shares[index])))
    state.update(stage="share", nodes=nodes, pk1s=[p.hex() for p in pk1s],
                 pk2s=[p.hex() for p in pk2s], threshold=threshold, seed=_hex(seed),
                 held={str(node): [seed_shares[me].hex(), key_shares[me].hex()]})
    _save(session, state)
    return ClientSummary(n=0, payload={"dst": node_bytes(destinations), "ct": ciphertexts})


def _masked(session, state: dict, request: Request, node: int, inner) -> ClientSummary:
    """The masked vector; or, if some key shares cannot be read, the senders that sent them.

    A share that does not decrypt under the agreed key, or that names another
    sender or receiver, is its sender's fault as far as this client can tell:
    the client answers ``{UNREADABLE: senders}`` instead of an error (which
    would get it rejected in the liar's place) and ends its part in this
    aggregation without sending its vector.
    """
    config = request.config
    sources = node_list(_require(config, "src", bytes))
    ciphertexts = _bytes_list(config, "ct") if sources else []
    nodes = state["nodes"]
    if len(ciphertexts) != len(sources) or len(set(sources)) != len(sources) or \
            not set(sources) <= set(nodes) - {node}:
        raise ProtocolError("secure aggregation: the forwarded key shares do not match the participants")
    if len(sources) + 1 < state["threshold"]:
        raise ProtocolError(f"secure aggregation: {len(sources) + 1} participants left, fewer than "
                            f"the threshold {state['threshold']}")
    held = state["held"]
    unreadable = []
    for source, ciphertext in zip(sources, ciphertexts):
        key = agreed_key(bytes.fromhex(state["sk2"]), bytes.fromhex(state["pk2s"][nodes.index(source)]))
        try:
            src, dst, seed_share, key_share = _unpack(unseal(key, ciphertext))
        except ProtocolError:
            unreadable.append(source)
            continue
        if src != source or dst != node:
            unreadable.append(source)
            continue
        held[str(source)] = [seed_share.hex(), key_share.hex()]
    if unreadable:
        # Failing here would get this honest receiver rejected in the sender's place; it names
        # the senders instead and sends no masked vector, so this aggregation reveals nothing of
        # it (the server starts a new one, with fresh keys, without the accused).
        _save(session, {"id": state["id"], "stage": "done"})
        return ClientSummary(n=0, payload={UNREADABLE: node_bytes(unreadable)})
    inner_kind = _require(config, INNER_KIND_KEY, str)
    fields = _require(config, FIELDS_KEY, str).split(",")
    bits = _require(config, BITS_KEY, int)
    if not set(fields) <= set(FIELDS) or not 0 <= bits <= 60 or inner_kind in STAGES:
        raise ProtocolError("secure aggregation: invalid fields, fraction bits or step")
    own = {key: value for key, value in config.items()
           if key not in (ID_KEY, INNER_KIND_KEY, FIELDS_KEY, BITS_KEY, "src", "ct")}
    summary = inner(Request(inner_kind, own, request.centroids))
    members = sorted({*sources, node})
    vector = encode(pack_vector(summary, fields), bits)
    vector = vector + mask(bytes.fromhex(state["seed"]), vector.size)
    sk1 = bytes.fromhex(state["sk1"])
    for other in members:
        if other == node:
            continue
        pairwise = mask(agreed_key(sk1, bytes.fromhex(state["pk1s"][nodes.index(other)])), vector.size)
        # The lower id adds, the higher subtracts: the pair cancels in the sum.
        vector = vector + pairwise if node < other else vector - pairwise
    state.update(stage="masked", members=members, held=held)
    _save(session, state)
    return ClientSummary(n=0, payload={"masked": vector.astype("<u8").tobytes()})


def _unmask(session, state: dict, config, node: int) -> ClientSummary:
    survivors = node_list(_require(config, "survivors", bytes))
    dropped = node_list(_require(config, "dropped", bytes))
    members = set(state["members"])
    if set(survivors) & set(dropped) or set(survivors) | set(dropped) != members \
            or node not in survivors or len(set(survivors)) != len(survivors):
        # Shares of both kinds for one node would unmask its vector.
        raise ProtocolError("secure aggregation: survivors and dropped must split this round's "
                            "participants, with this node among the survivors")
    if len(survivors) < state["threshold"]:
        raise ProtocolError(f"secure aggregation: {len(survivors)} survivors, fewer than the "
                            f"threshold {state['threshold']}")
    held = state["held"]
    shares = [bytes.fromhex(held[str(s)][0]) for s in survivors] + \
             [bytes.fromhex(held[str(d)][1]) for d in dropped]
    _save(session, {"id": state["id"], "stage": "done"})  # nothing of this round is kept
    return ClientSummary(n=0, payload={"nodes": node_bytes([*survivors, *dropped]), "shares": shares})


# -- the server's side: removing the masks --------------------------------------------------
#: Most ``t``-subsets of one secret's shares tried in search of a polynomial that a majority of
#: them lie on: C(n, t) grows fast, and a search this long means many liars (the total's check
#: still decides, :mod:`.checks`).
MAX_SUBSETS = 1000


def rebuild_secret(shares: Sequence[tuple[int, bytes]], threshold: int) -> tuple[bytes, list[int]]:
    """A secret from its ``(sender, share)`` pairs, and the senders of shares not on its polynomial.

    Every share is checked, not only ``threshold`` of them: the secret is
    rebuilt from a ``t``-subset, and an extra share ``j`` lies on the same
    polynomial iff the subset with its first member replaced by ``j``
    rebuilds the same secret (two distinct polynomials of degree ``t - 1``
    that agree on ``t - 1`` points differ at 0), so only ``Shamir.combine``
    is used. If some shares disagree, ``t``-subsets are searched (at most
    :data:`MAX_SUBSETS`, in :func:`itertools.combinations` order) for a
    polynomial that more than ``(n + t - 1) / 2`` of the ``n`` shares lie
    on: at most one can (unique decoding, ``e < (n - t + 1) / 2`` wrong
    shares), and its secret is the one. With ``n = t`` nothing can be
    checked (the secret is returned as rebuilt).

    Raises
    ------
    ProtocolError
        Fewer than ``threshold`` shares, or no polynomial with a majority.
    """
    if len(shares) < threshold:
        raise ProtocolError(f"{len(shares)} shares, {threshold} needed")
    for subset in itertools.islice(itertools.combinations(range(len(shares)), threshold), MAX_SUBSETS):
        pieces = [shares[i][1] for i in subset]
        secret = combine_secret(pieces)
        wrong = [sender for i, (sender, share) in enumerate(shares)
                 if i not in subset and combine_secret([*pieces[1:], share]) != secret]
        if len(shares) - len(wrong) > (len(shares) + threshold - 1) / 2:
            return secret, wrong
    raise ProtocolError(f"the {len(shares)} shares disagree and no polynomial holds more than "
                        f"{(len(shares) + threshold - 1) / 2:g} of them")


def unmasked_total(masked: Mapping[int, np.ndarray], pk1: Mapping[int, bytes],
                   seed_shares: Mapping[int, Sequence[tuple[int, bytes]]],
                   key_shares: Mapping[int, Sequence[tuple[int, bytes]]],
                   threshold: int, partners: Mapping[int, Collection[int]]
                   ) -> tuple[np.ndarray, set[int]]:
    """The uint64 total of the survivors' vectors, every mask removed, and the senders of wrong shares.

    ``masked`` holds each survivor's masked vector; ``pk1`` every
    participant's first public key; ``seed_shares`` (by survivor) and
    ``key_shares`` (by dropped participant) the ``(sender, share)`` pairs the
    survivors sent; ``partners`` each survivor's pairwise-mask partners (its
    neighbours that shared keys with it, itself allowed): a dropped client's
    masks are rebuilt only with those. Each secret is rebuilt from all its
    shares (:func:`rebuild_secret`); the senders of shares off the majority's
    polynomial are returned (their own masked vectors stay in the total:
    nothing can take them out).

    Raises
    ------
    ProtocolError
        Fewer than ``threshold`` shares of some secret, or shares without a majority.
    """
    survivors = sorted(masked)
    total = np.zeros_like(next(iter(masked.values())))
    for vector in masked.values():
        total = total + vector
    wrong: set[int] = set()

    def rebuild(shares, what: str) -> bytes:
        try:
            secret, liars = rebuild_secret(shares, threshold)
        except ProtocolError as exc:
            raise ProtocolError(f"{what}: {exc}") from None
        wrong.update(liars)
        return secret

    for node in survivors:
        seed = rebuild(seed_shares.get(node, []), f"node {node}'s mask seed")
        total = total - mask(seed, total.size)
    for gone, shares in key_shares.items():
        private = rebuild(shares, f"dropped node {gone}'s key")
        for node in (n for n in survivors if gone in partners[n]):
            pairwise = mask(agreed_key(private, pk1[node]), total.size)
            # The survivor added the pair's mask if its id is the lower one.
            total = total - pairwise if node < gone else total + pairwise
    return total, wrong
