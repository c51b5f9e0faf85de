"""The server's side of a private round: totals through SecAgg, noise, budget.

:class:`PrivateRounds` is what a round-based strategy (``dwf``, ``ewf``,
``fedkmeans``, ``ffcm-avg1``) uses when ``dp`` or ``secure-aggregation`` is
on. Each round it asks the sampled clients for one step in sum form (the
strategy's ``sums_type``: :data:`~fedcluster.privacy.kinds.SUMS`, a Lloyd step, or
``ffcm-avg1``'s fuzzy sums, whose counts are the supports ``sum_i u_ij^m``),
obtains the totals of their sums, counts (and, without
DP, squared distances and rows) through :class:`SecureSum` (it sees only the
total: DP of either kind needs secure aggregation, as the sum form has no
floor per cluster), adds
the central noise (``dp = central``) or relies on the clients' shares of it
(``dp = distributed``), counts the round against the budget
(:class:`~fedcluster.privacy.accountant.Budget`), and hands the totals to the method
(``aggregate_totals``). The start is data-independent: ``init = random``
draws uniformly in the declared ``data-bounds``, ``init = spread`` packs the
centres apart in them (:func:`~fedcluster.numerics.spread_in_box`), without
asking the clients anything but their number of features; it spends no
budget. Two setup steps may come first, each one Gaussian mechanism with its
share of the budget (:meth:`PrivateRounds.setup_step`, counted by the
accountant before the rounds): without declared ``data-bounds`` the bounds
step (:mod:`fedcluster.privacy.bounds`), and with ``init = private`` the private start
(:mod:`fedcluster.privacy.start`: noisy sums and counts per cell, the rounds' mechanism); their
totals go through the same secure aggregation and noise, and are never refused (their read-offs bound what a liar's counts
can do). A calibrated budget is spread over ``dp-rounds`` rounds (0: chosen
from epsilon and the start, :func:`~fedcluster.privacy.accountant.rounds_for`).

The noise is OpenDP's discrete Gaussian on the fixed-point grid ``2^-f``
of secure aggregation (``f``: ``secagg-fraction-bits``;
:func:`~fedcluster.privacy.mechanism.add_noise`), drawn from OpenDP's cryptographically secure
generator: the seed fixes the partitions, the start and the sampling, never
the noise, so a DP run is not reproducible and nobody who knows the settings
can draw the noise again and subtract it. Central DP: the server adds it to
the decoded secure totals, which lie on the grid already.

Distributed DP: a round of ``m`` participants with threshold ``t`` asks each
client for noise of scale ``sigma / sqrt(t)``
(:func:`~fedcluster.privacy.mechanism.client_noise_scale`, which the client computes again and
holds the request to: :mod:`fedcluster.local.private`): the total noise has variance
``s sigma^2 / t >= sigma^2`` whenever the ``s >= t`` survivors that secure
aggregation needs answer, so the accountant's ``sigma`` is a lower bound
(under SecAgg+ ``t`` is a neighbourhood's: each client adds more noise, and
each part of the survivors whose total the server could learn holds ``t`` or
more clients, so the bound holds for each part too). By default ``t = m`` on
SecAgg's complete graph (:func:`~fedcluster.privacy.options.threshold_setting`), so the
total of all ``m`` has exactly central's variance; a participant lost after
the key exchange then stops the aggregation before anything is unmasked, and
it starts again without it (:meth:`SecureSum.enough`): the aborted try
releases nothing (no secret's ``t`` shares can reach the server) and spends no
budget, and the new try's shares are sized for its own ``t``. A server that
claims dropouts gains nothing from the claim: with ``t = m`` no client
unmasks for fewer than all, so it learns the total of all of a try's
participants or nothing; what a dishonest server can do besides (run an
aggregation again, or more rounds than it said) it could do without the
restart, and no client can check it (below). As under any threshold, the
bound counts every participant's share as secret: a client that colludes
with the server and reveals its own share takes its part out of the total's
noise (a lower ``t`` left ``m - t`` such shares to spare when all ``m``
answered), and with ``t = m`` no unmasking share is spare either: one
participant's wrong shares fail the round (the total's check) where a lower
``t`` outvotes them (``secagg-threshold`` set, e.g. 0.6, keeps that). Each client's share is
a discrete Gaussian on the grid, so the masked total of the shares is exact
on the grid too; but a sum of discrete Gaussians is close to, not exactly,
a discrete Gaussian (Kairouz, Liu & Steinke 2021, "The distributed discrete
Gaussian mechanism for federated learning with secure aggregation", analyse
the difference): the accountant counts the total as a Gaussian of variance
``sigma^2`` and does not add that difference. The run is not reproducible:
each client draws its own noise.

The private round's request tells the clients the run's privacy settings
(``dp``, ``dp-epsilon``, ``dp-delta``, the noise multiplier in use and
``dp-rounds``: the rounds the budget allows, :attr:`PrivateRounds.rounds`),
so that a client can refuse a run below its own floor.

Resuming (:meth:`PrivateRounds.state`): the checkpoint after round ``t``
holds the ``t`` rounds counted, and a round's noisy totals leave the server
(in the next round's request, or the result) only after that checkpoint is
written; a round cut short is run again with fresh noise (there is no
generator to restore), and its budget is counted once. Under distributed DP
the server learns a round's noisy total when the masks come off, a moment
before the round's checkpoint is written: a coordinator killed in that
moment leaves a release the resumed run does not count (it asks the round
again, with fresh noise).
"""

from __future__ import annotations

import math
import os
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from logging import INFO, WARNING
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from ..federation.base import Exchange, Federation, RunFailed
from ..logs import counted, log
from ..messages import EVALUATE, ClientSummary, ProtocolError, Request
from ..privacy import bounds as private_bounds
from ..privacy import secagg
from ..privacy import start as private_start
from ..privacy.accountant import Budget, combined, epsilon_spent, fits, rounds_for, split
from ..privacy.checks import TotalCheck, Verify
from ..privacy.kinds import (CELL_SUMS, CLIENT_NOISE_KEY, DIMENSION, HISTOGRAM, ROUNDS_KEY,
                             SETUP_NOISE_KEY, STEP_NOISE_KEY, SUMS)
from ..privacy.mechanism import (Clipping, add_noise, centroids_from_totals, client_noise_scale,
                                 discrete_gaussian, parse_bounds)
from ..privacy.options import threshold_setting
from ..results import RunResult
from .progress import StateError, state_array, state_entry

if TYPE_CHECKING:
    from .base import ClusteringStrategy


@dataclass
class Totals:
    """A round's totals over its participants.

    ``sums`` (k, d) are of the clipped rows shifted to the box's centre under
    DP, of the rows themselves otherwise; ``counts`` (k,) are the rows per
    cluster (``ffcm-avg1``: the fuzzy supports), noisy under DP;
    ``sse`` and ``n`` are NaN under DP (not released). ``target`` are the
    Lloyd step's centroids (:func:`~fedcluster.privacy.mechanism.centroids_from_totals`).
    """

    sums: np.ndarray
    counts: np.ndarray
    sse: float
    n: float
    target: np.ndarray


@dataclass
class SecAggCost:
    """What secure aggregation cost so far: request rounds, bytes of stage payloads, seconds."""

    aggregations: int = 0
    request_rounds: int = 0
    bytes_to_clients: int = 0
    bytes_from_clients: int = 0
    seconds: float = 0.0
    #: CPU seconds of this process (in memory: the server's and every client's work).
    cpu_seconds: float = 0.0
    dropped: int = 0
    per_stage_seconds: dict[str, float] = field(default_factory=dict)
    #: The last aggregation's participants, degree and threshold (:func:`~fedcluster.privacy.secagg.graph_rule`).
    graph: tuple[int, int, int] = (0, 0, 0)

    def note_graph(self, parties: int, degree: int, threshold: int, setting: int, fraction: float,
                   what: str) -> None:
        """Record the graph of an aggregation; log it when it changes (a user-set degree below
        the default's with a warning: it buys cost with the default's security margin)."""
        if self.graph == (parties, degree, threshold):
            return
        self.graph = (parties, degree, threshold)
        shape = "every other participant (SecAgg)" if degree == parties - 1 else \
            f"{degree} neighbours each (SecAgg+)"
        log(INFO, "%s: secure aggregation among %d participants: %s, threshold %d", what, parties,
            shape, threshold)
        if setting != secagg.AUTO and degree < (auto := secagg.auto_graph(parties, fraction))[0]:
            log(WARNING, "%s: secagg-neighbours %d is below the %d neighbours that %d "
                "participants need for %g %% corrupt and %g %% dropped clients at 2^-%d "
                "(Bell et al.; the default chooses them)", what, setting, auto[0], parties,
                100 * secagg.CORRUPT_FRACTION, 100 * secagg.DROPOUT_FRACTION, secagg.SECURITY_BITS)


def _payload_bytes(values: Any) -> int:
    if isinstance(values, (bytes, str)):
        return len(values)
    if isinstance(values, (list, tuple)):
        return sum(_payload_bytes(v) for v in values)
    if isinstance(values, dict):
        return sum(_payload_bytes(v) for v in values.values())
    return 8


#: Times one aggregation starts again without the participants it lost: the senders whose key
#: shares their receivers could not read (a liar costs each aggregation one restart, several
#: liars a few), or, under a threshold of a whole neighbourhood, those that dropped out; more
#: means the accusations or the dropouts do not stop, and the round fails naming them.
MAX_RESTARTS = 2


class _Restart(Exception):
    """A try lost participants it cannot do without: begin again without them."""

    def __init__(self, dropped: dict[int, str], why: str) -> None:
        super().__init__(why)
        #: Node to leave out of the next try -> why.
        self.dropped = dropped
        #: What stopped the try (the failure's message if the restarts run out).
        self.why = why


class SecureSum:
    """The total of ``fields`` (``size`` values) of the replies to ``inner``, through SecAgg(+), checked.

    :meth:`run` gives the total and the exchange; one try of the protocol is
    its four stages, a method each (:meth:`key_exchange`,
    :meth:`share_exchange`, :meth:`masked_inputs`, :meth:`unmasking`), which
    keep what the later stages need as attributes. The exchange's
    ``accepted`` holds, for each survivor, an empty summary (the server never
    has its values); ``rejected`` the reason each other participant left. The
    quorum (``min-answer-fraction``) applies to the survivors, the threshold
    to the survivors of every participant's neighbourhood (the participant and
    its neighbours in :func:`~fedcluster.privacy.secagg.neighbour_graph`, the
    only ones it exchanges keys, shares and masks with: all of them under
    SecAgg; the degree and the threshold are
    :func:`~fedcluster.privacy.secagg.graph_rule`'s for ``secagg-neighbours``);
    a threshold of a whole neighbourhood tolerates no loss: the try starts
    again without the lost (:meth:`enough`).
    ``inner_config(threshold)``, if given, adds to the inner request's config
    once the threshold is known (distributed noise).

    Against a dishonest participant (the server learns no one's vector, so it
    names who it can and checks the rest on the total):

    * key exchange: a public key that is not a P-384 point, or one that two
      replies carry (one client copying another's), leaves its senders out of
      this aggregation by name (all of a clashing key's senders: which one
      copied cannot be told); the clients' own check for distinct keys stays,
      against a server that lies;
    * masked stage: a receiver that cannot read a sender's encrypted key
      shares names the sender instead of sending its vector; the server then
      starts the whole aggregation again (fresh keys, a new id) without the
      accused, at most :data:`MAX_RESTARTS` times, and logs both the accused
      and the accusers: which of them lies cannot be told without revealing
      keys, so a false accusation costs an honest client this aggregation. A
      receiver that accuses more than half of its neighbours is dropped
      itself instead (one liar cannot knock out the honest majority);
    * unmasking: each share's index must be its sender's place in the
      owner's neighbourhood, and every secret is rebuilt from all its shares
      (:func:`~fedcluster.privacy.secagg.rebuild_secret`): the senders of shares that disagree
      with the majority are rejected by name, and the majority's secret is
      used (their own masked vectors stay in the total); under a threshold
      of a whole neighbourhood (distributed DP's default) no share is spare
      to outvote a wrong one, and the total's check below fails the round;
    * the total: ``verify(values, survivors, threshold)`` (:mod:`fedcluster.privacy.checks`)
      returns why the decoded values cannot be an honest total, "" if they
      can; a total that fails is never returned.
    """

    def __init__(self, strategy: ClusteringStrategy, federation: Federation, nodes: list[int],
                 inner: Request, fields: tuple[str, ...], size: int, *, what: str, verify: Verify,
                 inner_config=None, cost: SecAggCost | None = None) -> None:
        self.strategy, self.federation, self.options = strategy, federation, strategy.options
        self.inner, self.fields, self.size = inner, fields, size
        self.what, self.verify, self.inner_config = what, verify, inner_config
        self.cost = cost if cost is not None else SecAggCost()
        self.exchange: Exchange[ClientSummary] = Exchange(sent=sorted(set(nodes)))

    def run(self) -> tuple[np.ndarray, Exchange[ClientSummary]]:
        """The checked total and the exchange; tries again without the accused (:meth:`masked_inputs`).

        Raises
        ------
        RunFailed
            Fewer survivors than the quorum, or than a threshold below its
            neighbourhood's size in some neighbourhood, masks that cannot be
            removed, accusations or (under a threshold of a whole
            neighbourhood) dropouts that go on after :data:`MAX_RESTARTS`
            restarts, or a total that fails ``verify``
            (the message names the participants: whose vector or shares were
            dishonest cannot be told).
        """
        cost, exchange = self.cost, self.exchange
        started, cpu_started = time.monotonic(), time.process_time()
        participants = list(exchange.sent)
        for restart in range(MAX_RESTARTS + 1):
            try:
                total = self.attempt(participants)
                break
            except _Restart as exc:
                cost.aggregations += 1
                exchange.rejected.update(exc.dropped)
                if restart == MAX_RESTARTS:
                    self.fail(f"{exc.why}, still after {MAX_RESTARTS} restarts: " + "; ".join(
                        f"node {node}: {reason.split(': ', 1)[1]}" for node, reason in exc.dropped.items()))
                # Those that left this try for another reason stay out too.
                participants = [n for n in participants if n not in exchange.rejected]
                log(WARNING, "%s: secure aggregation starts again without node(s) %s (%s)",
                    self.what, ", ".join(map(str, sorted(exc.dropped))), exc.why)
        values = secagg.decode(total, self.options.secagg_fraction_bits)
        if reason := self.verify(values, len(self.survivors), self.threshold):
            self.fail(f"the secure total failed its check: {reason}: a participant's masked vector "
                      f"or unmasking shares were not honest (secure aggregation cannot tell whose; "
                      f"participants: node(s) {', '.join(map(str, self.survivors))})")
        for node in self.survivors:
            if node not in exchange.rejected:
                exchange.accepted[node] = ClientSummary(n=0)
        for node in self.dropped:
            exchange.rejected.setdefault(node, "dropped out after the key exchange")
        for node, reason in exchange.rejected.items():
            log(WARNING, "%s: rejected node %d: %s", self.what, node, reason)
        cost.aggregations += 1
        cost.dropped += len(self.dropped)
        cost.seconds += time.monotonic() - started
        cost.cpu_seconds += time.process_time() - cpu_started
        self.strategy.check_quorum(exchange, self.what)
        return values, exchange

    def attempt(self, nodes: list[int]) -> np.ndarray:
        """One run of the four stages over ``nodes`` under a new id: the unmasked uint64 total.

        Reasons for leaving a participant out go to the exchange's ``rejected``.

        Raises
        ------
        _Restart
            Receivers named senders whose key shares they could not read, or
            participants were lost under a threshold of a whole neighbourhood.
        """
        rng = self.strategy.rng
        self.agg_id = uuid.UUID(int=int(rng.integers(2**63)) << 64 | int(rng.integers(2**63))).hex
        self.base = {secagg.ID_KEY: self.agg_id}
        self.key_exchange(nodes)
        self.share_exchange()
        self.masked_inputs()
        return self.unmasking()

    # -- the stages -------------------------------------------------------------------
    def key_exchange(self, nodes: list[int]) -> None:
        """Stage 1: every node's two public keys; then the graph among those with distinct keys."""
        keys = self.ask(secagg.SETUP, {n: Request(secagg.SETUP, self.base) for n in nodes},
                        self._check_keys)
        # A key that two replies carry would let one read the other's shares, and every client
        # would refuse the list: all its senders are left out (which of them copied is unknown).
        for node, reason in _clashing_keys(keys).items():
            self.exchange.rejected[node] = reason
            del keys[node]
        options = self.options
        self.quorum = max(2, math.ceil(options.min_answer_fraction * len(self.exchange.sent) - 1e-9))
        self.need(len(keys), self.quorum, "the key exchange")
        self.keys, self.members = keys, sorted(keys)
        parties = len(self.members)
        fraction, all_on_complete = threshold_setting(options)
        self.degree, self.threshold = secagg.graph_rule(options.secagg_neighbours, parties,
                                                        fraction, all_on_complete=all_on_complete)
        self.cost.note_graph(parties, self.degree, self.threshold, options.secagg_neighbours,
                             fraction, self.what)
        # Fresh bits in the order's key: the graph must not be known before the run (auto_graph's
        # analysis places the corrupt clients independently of it), and the seeded id is knowable.
        self.graph = secagg.neighbour_graph(self.agg_id + os.urandom(16).hex(), self.members,
                                            self.degree)
        self.hoods = {n: sorted({n, *self.graph[n]}) for n in self.members}

    def share_exchange(self) -> None:
        """Stage 2: each node's encrypted shares for its neighbours, sorted into their inboxes."""
        shares = self.ask(secagg.SHARE, {n: self._share_request(n) for n in self.members},
                          self._check_shares)
        self.need(len(shares), self.quorum, "the share exchange")
        self.enough(self.members, shares, "the share exchange")
        self.sharers = sorted(shares)
        self.inbox: dict[int, tuple[list[int], list[bytes]]] = {n: ([], []) for n in self.sharers}
        for source in self.sharers:
            for destination, ciphertext in zip(secagg.node_list(shares[source]["dst"]),
                                               shares[source]["ct"]):
                if destination in self.inbox:
                    self.inbox[destination][0].append(source)
                    self.inbox[destination][1].append(ciphertext)
        # Whom each sharer masks with and holds shares of: itself and its neighbours that shared.
        self.near = {n: {n, *self.inbox[n][0]} for n in self.sharers}

    def masked_inputs(self) -> None:
        """Stage 3: each sharer's masked vector, or its accusations (then :class:`_Restart`)."""
        inner = self.inner
        extra = self.inner_config(self.threshold) if self.inner_config is not None else {}
        config = {**inner.config, **extra, **self.base, secagg.INNER_KIND_KEY: inner.kind,
                  secagg.FIELDS_KEY: ",".join(self.fields),
                  secagg.BITS_KEY: self.options.secagg_fraction_bits}
        requests = {n: Request(secagg.MASKED, {**config, "src": secagg.node_bytes(self.inbox[n][0]),
                                               "ct": self.inbox[n][1]}, inner.centroids)
                    for n in self.sharers}
        self.accusations: dict[int, list[int]] = {}
        self.masked = self.ask(secagg.MASKED, requests, self._check_masked)
        if self.accusations:
            raise _Restart(self._accused(), "key shares unreadable")
        self.survivors = sorted(self.masked)
        self.dropped = [n for n in self.sharers if n not in self.masked]
        self.need(len(self.survivors), self.quorum, "the masked inputs")
        self.enough(self.sharers, self.masked, "the masked inputs")
        for node in self.sharers:  # SecAgg+: per neighbourhood (implied by the line above under SecAgg)
            left = len(self.near[node] & set(self.survivors))
            if left < self.threshold:
                self.fail(f"{left} of node {node}'s neighbourhood of {len(self.near[node])} left "
                          f"at the masked inputs, {self.threshold} needed to rebuild its masks")

    def unmasking(self) -> np.ndarray:
        """Stage 4: the survivors' shares of the survivors' seeds and the dropped's keys; the total."""
        survivors, dropped = self.survivors, self.dropped
        # Each survivor learns the survivors and the dropped of its own neighbourhood only.
        split = {n: ([s for s in survivors if s in self.near[n]],
                     [d for d in dropped if d in self.near[n]]) for n in survivors}
        self.expected = {n: [*alive, *gone] for n, (alive, gone) in split.items()}
        unmasks = self.ask(secagg.UNMASK, {
            n: Request(secagg.UNMASK, {**self.base, "survivors": secagg.node_bytes(alive),
                                       "dropped": secagg.node_bytes(gone)})
            for n, (alive, gone) in split.items()}, self._check_unmask)
        self.enough(survivors, unmasks, "the unmasking")
        seed_shares: dict[int, list[tuple[int, bytes]]] = {n: [] for n in survivors}
        key_shares: dict[int, list[tuple[int, bytes]]] = {n: [] for n in dropped}
        wrong: set[int] = set()
        for node, payload in unmasks.items():
            for owner, share in zip(self.expected[node], payload["shares"]):
                # A share is the holder's place in the owner's neighbourhood (1-based) and one block
                # per 16 bytes of the secret: another index or length cannot be honest.
                length = 1 + (secagg.SEED_BYTES if owner in seed_shares else secagg.SCALAR_BYTES)
                if len(share) != length or share[0] != self.hoods[owner].index(node) + 1:
                    wrong.add(node)
                    continue
                (seed_shares if owner in seed_shares else key_shares)[owner].append((node, share))
        pk1 = {n: self.keys[n]["pk1"] for n in self.members}
        try:
            total, disagreeing = secagg.unmasked_total(
                {n: np.frombuffer(self.masked[n]["masked"], dtype="<u8").astype(np.uint64)
                 for n in survivors},
                pk1, seed_shares, key_shares, self.threshold, self.near)
        except (ProtocolError, ValueError) as exc:
            self.fail(f"could not remove the masks: {exc}")
        for node in sorted(wrong | disagreeing):
            self.exchange.rejected[node] = (f"{secagg.UNMASK}: sent unmasking shares that disagree "
                                            f"with the others' (its own masked vector stays in the total)")
        return total

    # -- asking and checking ----------------------------------------------------------
    def ask(self, kind: str, requests: dict[int, Request], check) -> dict[int, dict]:
        """The payloads of the replies to one stage's ``requests`` that pass ``check(node, payload)``."""
        cost, exchange = self.cost, self.exchange
        stage_started = time.monotonic()
        cost.request_rounds += 1
        cost.bytes_to_clients += sum(_payload_bytes(dict(r.config)) for r in requests.values())
        got = {}
        for answer in self.federation.ask(requests, sorted(requests), self.strategy.round_timeout):
            node = answer.node
            if node not in requests or node in got:
                continue
            if answer.sampling_key is not None:
                self.strategy.sampling_keys[node] = answer.sampling_key
            if answer.summary is None:
                exchange.rejected[node] = f"{kind}: {answer.error or 'no reply'}"
                continue
            payload = answer.summary.payload
            try:
                if not isinstance(payload, dict):
                    raise ProtocolError("reply carries no protocol payload")
                cost.bytes_from_clients += _payload_bytes(payload)
                check(node, payload)
            except ProtocolError as exc:
                exchange.rejected[node] = f"{kind}: malformed reply: {exc}"
                continue
            got[node] = payload
        cost.per_stage_seconds[kind] = cost.per_stage_seconds.get(kind, 0.0) + (
            time.monotonic() - stage_started)
        return got

    def fail(self, why: str) -> NoReturn:
        for node, reason in self.exchange.rejected.items():
            log(WARNING, "%s: rejected node %d: %s", self.what, node, reason)
        raise RunFailed(f"{self.what}: secure aggregation: {why}")

    def need(self, count: int, minimum: int, stage_name: str) -> None:
        if count < minimum:
            self.fail(f"{count} of {len(self.exchange.sent)} clients left at {stage_name}, "
                      f"{minimum} needed")

    def enough(self, asked: list[int], answered: Mapping[int, Any], stage_name: str) -> None:
        """Fail, or start again without the lost (:class:`_Restart`), when ``asked`` lost
        more at ``stage_name`` than the threshold tolerates.

        A threshold below a neighbourhood's size is the user's tolerance:
        fewer than ``t`` answers fail the round. A threshold of a whole
        neighbourhood (``secagg-threshold`` 1, or the automatic default under
        distributed DP on SecAgg's complete graph) tolerates no loss: every
        secret's ``t`` shares are held by the ``t`` members of its owner's
        neighbourhood, so once one of them is gone the server can rebuild no
        secret and unmask nothing of this try. Its
        survivors' vectors and noise shares stay masked and are never
        released, and the budget counts only the try that succeeds; the next
        try (fresh keys, a new id, noise shares sized for its own ``t``)
        leaves the lost out.
        """
        lost = [n for n in asked if n not in answered]
        if self.threshold <= self.degree:
            self.need(len(answered), self.threshold, stage_name)
        elif lost:
            self.cost.dropped += len(lost)
            raise _Restart({n: self.exchange.rejected.get(n, f"{stage_name}: dropped out")
                            for n in lost},
                           f"participants lost at {stage_name} under a threshold of all "
                           f"{self.threshold} of each neighbourhood")

    @staticmethod
    def _check_keys(node, payload) -> None:
        for key in ("pk1", "pk2"):
            if not isinstance(payload.get(key), bytes):
                raise ProtocolError(f"'{key}' is not bytes")
            secagg.public_point(payload[key])

    def _share_request(self, node: int) -> Request:
        """The node's neighbourhood (itself and its neighbours) with their keys, and the rule."""
        hood, keys = self.hoods[node], self.keys
        return Request(secagg.SHARE, {
            **self.base, "nodes": secagg.node_bytes(hood), "threshold": self.threshold,
            "neighbours": self.degree, "participants": len(self.members),
            "pk1": [keys[n]["pk1"] for n in hood], "pk2": [keys[n]["pk2"] for n in hood]})

    def _check_shares(self, node, payload) -> None:
        destinations = secagg.node_list(payload.get("dst", b"x"))
        ciphertexts = payload.get("ct")
        if sorted(destinations) != self.graph[node] or \
                not isinstance(ciphertexts, list) or len(ciphertexts) != len(destinations) or \
                not all(isinstance(c, bytes) for c in ciphertexts):
            raise ProtocolError("the encrypted shares do not address each neighbour once")

    def _check_masked(self, node, payload) -> None:
        if secagg.UNREADABLE in payload:
            named = secagg.node_list(payload[secagg.UNREADABLE])
            if not named or not set(named) <= set(self.inbox[node][0]):
                raise ProtocolError("it names as unreadable senders that sent it no key shares")
            self.accusations[node] = sorted(set(named))
            raise ProtocolError("names senders whose key shares it could not read")
        vector = payload.get("masked")
        if not isinstance(vector, bytes) or len(vector) != 8 * secagg.LIMBS * self.size:
            raise ProtocolError(f"the masked vector is not {secagg.LIMBS} x {self.size} uint64 words")

    def _check_unmask(self, node, payload) -> None:
        if secagg.node_list(payload.get("nodes", b"x")) != self.expected[node] or \
                not isinstance(payload.get("shares"), list) or \
                len(payload["shares"]) != len(self.expected[node]) or \
                not all(isinstance(s, bytes) for s in payload["shares"]):
            raise ProtocolError("the unmasking shares do not name the survivors and the dropped")

    def _accused(self) -> dict[int, str]:
        """Whom the masked stage's accusations leave out of the next try, and why (logged)."""
        accusers: dict[int, list[int]] = {}
        dropped_now: dict[int, str] = {}
        for accuser, named in self.accusations.items():
            # The accuser is kept: its reply named others instead of failing.
            self.exchange.rejected.pop(accuser, None)
            if len(named) > len(self.graph[accuser]) / 2:
                dropped_now[accuser] = (
                    f"{secagg.MASKED}: accused {len(named)} of its {len(self.graph[accuser])} "
                    f"neighbours (node(s) {', '.join(map(str, named))}) of unreadable key shares: "
                    "more than half, so it is taken for the suspect")
                continue
            for sender in named:
                accusers.setdefault(sender, []).append(accuser)
        for sender, by in accusers.items():
            if sender not in dropped_now:
                dropped_now[sender] = (
                    f"{secagg.MASKED}: its encrypted key shares could not be read by {len(by)} "
                    f"receiver(s) (node(s) {', '.join(map(str, by))}; the server cannot tell "
                    "which side lies)")
        for node, reason in dropped_now.items():
            log(WARNING, "%s: node %d: %s", self.what, node, reason.split(": ", 1)[1])
        return dropped_now


def _clashing_keys(keys: Mapping[int, dict]) -> dict[int, str]:
    """The senders of a public key that another reply (or their own other key) carries, and why."""
    senders: dict[bytes, list[int]] = {}
    for node, payload in keys.items():
        for key in {payload["pk1"], payload["pk2"]}:
            senders.setdefault(key, []).append(node)
        if payload["pk1"] == payload["pk2"]:
            senders[payload["pk1"]].append(node)
    clashing = {node: sorted(set(group) - {node}) for group in senders.values() if len(group) > 1
                for node in group}
    return {node: f"{secagg.SETUP}: sent a public key that " + (
        f"node(s) {', '.join(map(str, others))} also sent" if others else "it sent twice")
        + "; every sender of a clashing key is left out of this aggregation"
        for node, others in clashing.items()}


def _rounds_that_fit(budget: Budget, most: int) -> int:
    """The most rounds, up to ``most``, of the budget's multiplier that fit its epsilon (bisection)."""
    low, high = 0, most  # fits(low) holds; the answer lies in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if fits(budget.noise_multiplier, middle, budget.delta, budget.epsilon,
                budget.setup_multiplier):
            low = middle
        else:
            high = middle - 1
    return low


class PrivateRounds:
    """DP and secure aggregation for a round-based strategy (see the module docstring).

    Parameters
    ----------
    strategy : RoundBasedStrategy
        Its options hold the privacy settings (already checked by
        :func:`~fedcluster.privacy.options.check_privacy`).
    """

    def __init__(self, strategy: ClusteringStrategy) -> None:
        options = strategy.options
        self.dp = options.dp
        self.bounds = options.data_bounds
        self.clip = options.dp_clip
        #: The rows' RMS distance from the estimated box's centre (0: bounds declared, or not
        #: yet estimated), read off the bounds step's histogram for the private start's cells.
        self.data_radius = 0.0
        self.fraction_bits = options.secagg_fraction_bits
        self.budget: Budget | None = None
        #: The rounds the budget allows (the clients are told): for a calibrated multiplier
        #: ``dp-rounds`` (0: :func:`~fedcluster.privacy.accountant.rounds_for` epsilon and the
        #: start), at most ``num-server-rounds``; for a fixed one the most that fit, at most
        #: that many.
        self.rounds = 0
        if self.dp != "off":
            # Setup steps, each with its share of the budget: the bounds step without declared
            # bounds (privacy.bounds), the private start (privacy.start).
            shares = {name: share for name, share, wanted in (
                ("bounds", options.dp_bounds_share, not self.bounds),
                ("start", options.dp_start_share, options.init == "private")) if wanted}
            # The rounds a calibrated budget is spread over: dp-rounds, or chosen from epsilon
            # and the start.
            planned = min(options.num_server_rounds, options.dp_rounds or rounds_for(
                options.dp_epsilon, private_start=options.init == "private"))
            setup, z = split(options.dp_epsilon, options.dp_delta, planned, shares)
            self.budget = Budget(options.dp_epsilon, options.dp_delta,
                                 options.dp_noise_multiplier or z, setup)
            self.rounds = planned if not options.dp_noise_multiplier else \
                _rounds_that_fit(self.budget, options.num_server_rounds)
        self.cost = SecAggCost()
        self.clipping: Clipping | None = None
        self.last_counts: np.ndarray | None = None
        #: Why the last restart stopped early ("" if it did not).
        self.stop_reason = ""

    @property
    def releases_totals_only(self) -> bool:
        """Under DP the server releases nothing but noisy sums and counts."""
        return self.dp != "off"

    def describe(self) -> str:
        parts = []
        if self.budget is not None:
            parts.append(f"dp = {self.dp}, noise multiplier {self.budget.noise_multiplier:.4g}, "
                         f"budget epsilon {self.budget.epsilon:g} at delta {self.budget.delta:g}")
            parts += [f"{name} step first (noise multiplier {z:.4g})"
                      for name, z in self.budget.setup.items()]
        parts.append("secure aggregation")
        return "; ".join(parts)

    # -- the start ------------------------------------------------------------------
    def dimension(self, strategy: ClusteringStrategy, federation: Federation) -> int:
        """The data's dimension: from per-feature bounds, else the clients' most common answer."""
        if self.bounds and (low := parse_bounds(self.bounds)[0]).size > 1:
            return int(low.size)
        answers = federation.ask(Request(DIMENSION, {}), strategy.connected_nodes(federation),
                                 strategy.round_timeout)
        dims = Counter()
        for answer in answers:
            if answer.sampling_key is not None:
                strategy.sampling_keys[answer.node] = answer.sampling_key
            value = (answer.summary.payload or {}).get("dimension") if answer.summary else None
            if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
                dims[value] += 1
        if not dims:
            raise RunFailed("init (random in data-bounds): no client said how many features it has")
        return dims.most_common(1)[0][0]

    def initial_centroids(self, strategy: ClusteringStrategy, federation: Federation, init: str
                          ) -> np.ndarray:
        """``k`` centroids in the declared box (no data used, no budget spent): ``init`` names
        the draw (:data:`~fedcluster.strategies.initialisation.BOX_STARTS`: uniform or spread)."""
        from .initialisation import BOX_STARTS

        dim = self.dimension(strategy, federation)
        clipping = Clipping.declared(self.bounds, self.clip, dim)
        how = "uniform" if init == "random" else "spread apart"
        log(INFO, "init: %d centroids %s in the data-bounds (no data used)", strategy.k, how)
        return BOX_STARTS[init](clipping.low, clipping.high, strategy.k, rng=strategy.rng)

    @property
    def needs_bounds(self) -> bool:
        """Whether a DP run without declared bounds has yet to estimate them."""
        return self.budget is not None and not self.bounds

    def setup_step(self, strategy: ClusteringStrategy, federation: Federation, name: str,
                   kind: str, cells: np.ndarray | None, size: int, sensitivity: float,
                   clipping: Clipping | None = None
                   ) -> tuple[np.ndarray, float, Exchange[ClientSummary], float]:
        """One setup step (``name``: ``bounds`` or ``start``): the clients' ``size`` values of
        ``kind`` summed through secure aggregation and noised (scale: the step's multiplier
        times ``sensitivity``). Returns the noisy values, their noise's standard deviation,
        the exchange and the epsilon spent so far.

        Counts alone (the bounds step) get that noise each. With a ``clipping`` (the private
        start) the values are per-cell sums of rows clipped by it and then the cells' counts,
        as a round's, and get the round's mechanism (:func:`~fedcluster.privacy.mechanism.add_noise`:
        the returned deviation on each sum coordinate, that over ``w`` on each count); the
        request carries the clipping's bounds, with which the clients clip.

        The total is never refused (``verify`` accepts it): the steps' read-offs bound what a
        liar's values can do (:mod:`fedcluster.privacy.bounds`, :mod:`fedcluster.privacy.start`), and a refused total would let one
        liar fail the run with the honest clients named.
        """
        budget = self.budget
        z = budget.setup[name]
        sigma = z * sensitivity
        config = {"dp": self.dp, "dp-epsilon": budget.epsilon, "dp-delta": budget.delta,
                  "dp-noise-multiplier": budget.noise_multiplier, ROUNDS_KEY: self.rounds,
                  SETUP_NOISE_KEY: budget.setup_multiplier, STEP_NOISE_KEY: z,
                  CLIENT_NOISE_KEY: 0.0, "chunk-size": strategy.chunk_size,
                  "device": strategy.device}
        if clipping is not None:
            config.update({"data-bounds": self.bounds, "dp-clip": self.clip})

        def client_noise(threshold: int) -> dict:
            share = sigma / math.sqrt(threshold) if self.dp == "distributed" else 0.0
            return {CLIENT_NOISE_KEY: share}

        fields = ("counts",) if clipping is None else ("sums", "counts")
        vector, exchange = SecureSum(
            strategy, federation, strategy.connected_nodes(federation),
            Request(kind, config, None if cells is None else np.ascontiguousarray(cells)),
            fields, size, what=name, verify=lambda *_: "", inner_config=client_noise,
            cost=self.cost).run()
        if self.dp == "central" and clipping is None:
            vector = discrete_gaussian(vector, sigma, self.fraction_bits)
        elif self.dp == "central":
            cut = size - len(cells)
            sums, counts = add_noise(vector[:cut], vector[cut:], sigma, clipping.count_weight,
                                     self.fraction_bits)
            vector = np.concatenate([sums, counts])
        else:  # the survivors' shares: sigma sqrt(s / t) in all
            sigma *= math.sqrt(max(1, len(exchange.accepted)) / max(1, self.cost.graph[2]))
        return vector, sigma, exchange, budget.spend_setup(name)

    def estimate_bounds(self, strategy: ClusteringStrategy, federation: Federation
                        ) -> tuple[Exchange[ClientSummary], float]:
        """The bounds step (:mod:`fedcluster.privacy.bounds`): sets :attr:`bounds`, logs them and returns the
        exchange and the epsilon spent so far."""
        dim = self.dimension(strategy, federation)
        shape = (private_bounds.histograms(dim), private_bounds.BINS)
        vector, sigma, exchange, epsilon = self.setup_step(
            strategy, federation, "bounds", HISTOGRAM, None, shape[0] * shape[1],
            private_bounds.sensitivity(dim))
        histogram = vector.reshape(shape)
        low, high, borrowed, empty = private_bounds.bounds_from_histogram(histogram, sigma)
        if empty:
            raise RunFailed(f"bounds: {empty} of {dim} feature(s) had too few rows for the noise "
                            f"(epsilon {epsilon:.4g} spent on them), nor had the rows' range: no "
                            f"clustering would survive the rounds' noise in the whole grid; give "
                            f"--data-bounds, a larger --dp-bounds-share or --dp-epsilon")
        self.bounds = private_bounds.bounds_text(low, high)
        self.data_radius = private_bounds.rms_distance(histogram, sigma, low, high)
        log(INFO, "bounds: estimated under DP (epsilon %.4g spent so far): %s; rows %.4g from "
            "their centre (root mean square)", epsilon, private_bounds.describe(low, high),
            self.data_radius)
        if borrowed:
            log(WARNING, "bounds: %d of %d feature(s) had rows in bins too thin for the noise and "
                "took the range of all features' values; --data-bounds would fit them closer",
                borrowed, dim)
        return exchange, epsilon

    def private_start(self, strategy: ClusteringStrategy, federation: Federation
                      ) -> tuple[np.ndarray, Exchange[ClientSummary], float]:
        """The private start (:mod:`fedcluster.privacy.start`): the centroids, the exchange and the epsilon spent
        so far."""
        from ..numerics import spread_in_box

        dim = self.dimension(strategy, federation)
        clipping = Clipping.declared(self.bounds, self.clip, dim)
        points = private_start.cells(clipping.low, clipping.high, strategy.k, rng=strategy.rng,
                                     radius=self.data_radius)
        cells = len(points)
        vector, sigma, exchange, epsilon = self.setup_step(
            strategy, federation, "start", CELL_SUMS, points, cells * (dim + 1),
            clipping.sensitivity, clipping)
        centres = private_start.centres_from_cells(
            points, vector[:cells * dim].reshape(cells, dim), vector[cells * dim:], clipping,
            sigma, strategy.k, rng=strategy.rng)
        if len(centres) < strategy.k:
            log(WARNING, "init (private): %d of %d cells hold more rows than the noise, fewer "
                "than k = %d: each is a centre, the other %d are spread apart in the bounds",
                len(centres), cells, strategy.k, strategy.k - len(centres))
            centres = np.concatenate([centres, spread_in_box(
                clipping.low, clipping.high, strategy.k - len(centres), rng=strategy.rng)])
        else:
            log(INFO, "init (private): weighted k-means over %d cells' noisy means (epsilon "
                "%.4g spent so far)", cells, epsilon)
        return centres, exchange, epsilon

    # -- a round ----------------------------------------------------------------------
    def stop_before(self, t: int) -> str:
        """Why round ``t`` must not run ("" when it may): the budget would be exceeded."""
        if self.budget is None or self.budget.allows_another_round():
            return ""
        return (f"privacy budget spent: {self.budget.rounds} round(s) used epsilon "
                f"{self.budget.spent:.4g} of {self.budget.epsilon:g} (delta {self.budget.delta:g}); "
                f"round {t} would exceed it")

    def totals(self, strategy: ClusteringStrategy, federation: Federation, nodes: list[int],
               current: np.ndarray, t: int) -> tuple[Totals, Exchange[ClientSummary], float]:
        """One round's totals, their target centroids, the exchange and the epsilon spent so far."""
        k, dim = current.shape
        self.clipping = Clipping.declared(self.bounds, self.clip, dim) if self.dp != "off" else None
        config = {"chunk-size": strategy.chunk_size, "device": strategy.device,
                  "data-bounds": self.bounds if self.dp != "off" else "", "dp-clip": self.clip,
                  CLIENT_NOISE_KEY: 0.0, "min-cluster-size": strategy.min_cluster_size,
                  "dp": self.dp}
        if self.budget is not None:
            config.update({"dp-epsilon": self.budget.epsilon, "dp-delta": self.budget.delta,
                           "dp-noise-multiplier": self.budget.noise_multiplier,
                           ROUNDS_KEY: self.rounds,
                           SETUP_NOISE_KEY: self.budget.setup_multiplier})
        sigma = 0.0 if self.budget is None else self.budget.noise_multiplier * self.clipping.sensitivity
        what = f"round {t}"
        inner = Request(strategy.sums_type, {**config, **strategy.sums_settings()},
                        np.ascontiguousarray(current))
        # Always over secure aggregation (check_privacy): the sum form, which under DP has no
        # floor per cluster, never leaves a client unmasked.
        def client_noise(threshold: int) -> dict:
            if self.dp != "distributed":
                return {CLIENT_NOISE_KEY: 0.0}
            return {CLIENT_NOISE_KEY: client_noise_scale(self.budget.noise_multiplier,
                                                         self.clipping, threshold)}

        # Under DP the squared distances are never released, so never summed either: from a
        # box far from the data (bounds a liar pushed out, .bounds) they would not even fit
        # the fixed-point encoding, and every honest client would refuse the round.
        fields = {"off": ("sums", "counts", "sse", "n"), "central": ("sums", "counts", "n"),
                  "distributed": ("sums", "counts")}[self.dp]
        size = k * dim + k + ("sse" in fields) + ("n" in fields)
        # Exact totals (no DP, central DP before its noise) are checked exactly, distributed
        # ones within their noise; the sums only where DP clips the rows into the ball.
        verify = TotalCheck(fields, k, dim, strategy.options.secagg_fraction_bits,
                            fuzzy=strategy.sums_type != SUMS,
                            radius=self.clipping.radius if self.clipping is not None else None,
                            sigma=sigma if self.dp == "distributed" else None,
                            count_weight=self.clipping.count_weight if self.clipping is not None else 1.0)
        vector, exchange = SecureSum(strategy, federation, nodes, inner, fields, size, what=what,
                                     verify=verify, inner_config=client_noise, cost=self.cost).run()
        sums = vector[:k * dim].reshape(k, dim)
        counts = vector[k * dim:k * dim + k]
        sse, n = (vector[-2], vector[-1]) if "sse" in fields else (math.nan, math.nan)
        if self.dp == "central":
            sums, counts = add_noise(sums, counts, sigma, self.clipping.count_weight,
                                     self.fraction_bits)
        if self.dp != "off":
            sse, n = math.nan, math.nan
        epsilon = self.budget.spend() if self.budget is not None else math.nan
        self.last_counts = counts
        target = centroids_from_totals(sums, counts, current, self.clipping)
        return Totals(sums, counts, sse, n, target), exchange, epsilon

    # -- checkpoints ------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """What the next private round depends on, by name, for a checkpoint (empty without DP).

        ``dp-rounds-spent``: the rounds the accountant counted, so that a
        resumed run goes on spending from there, never again from nothing
        (with the run's one noise multiplier the epsilon after ``r`` rounds
        is a function of ``r``: :func:`~fedcluster.privacy.accountant.epsilon_spent`);
        ``dp-noise-multiplier`` and ``dp-epsilon-spent``, which
        :meth:`restore` compares with this run's (a checkpoint calibrated or
        accounted otherwise is refused rather than mixed into one budget);
        ``dp-last-counts``: the last noisy counts (the result's);
        ``dp-stop-reason``; ``dp-data-bounds``, the bounds in use (estimated
        ones: the resumed run must not estimate them again), and
        ``dp-setup-released``, the setup steps counted (comma-separated). No noise generator: the noise is drawn afresh
        (:mod:`fedcluster.privacy.mechanism`), so a round run again after a resume draws new
        noise. Secure aggregation keeps nothing between rounds (its keys are
        drawn per aggregation).
        """
        if self.budget is None:
            return {}
        return {"dp-rounds-spent": self.budget.rounds,
                "dp-noise-multiplier": self.budget.noise_multiplier,
                "dp-epsilon-spent": self.budget.spent,
                "dp-last-counts": self.last_counts,
                "dp-stop-reason": self.stop_reason,
                "dp-data-bounds": self.bounds,
                "dp-setup-released": ",".join(self.budget.released)}

    def restore(self, state: Mapping[str, Any], k: int) -> None:
        """Set :meth:`state`'s entries (``k``: the number of clusters of the last counts).

        A ``dp-noise-rng`` entry (a checkpoint written before the noise came
        from OpenDP) is ignored: nothing draws noise from it any more.

        Raises
        ------
        StateError
            An entry is missing or malformed, or the checkpoint's noise
            multiplier or epsilon is not what this run's accountant gives for
            its rounds (another calibration or ``dp-accounting`` version).
        """
        if self.budget is None:
            return
        rounds = state_entry(state, "dp-rounds-spent")
        if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 0:
            raise StateError(f"strategy state 'dp-rounds-spent' is {rounds!r}, not a number of rounds")
        budget = self.budget
        # Absent from a checkpoint written before the setup steps existed: none, bounds declared.
        released = state.get("dp-setup-released", "")
        bounds = state.get("dp-data-bounds", self.bounds)
        names = released.split(",") if isinstance(released, str) and released else []
        if not isinstance(bounds, str) or sorted(names) != sorted(budget.setup) or not bounds:
            raise StateError(f"strategy state 'dp-setup-released' {released!r} and "
                             f"'dp-data-bounds' {bounds!r} do not fit this run's setup steps "
                             f"({', '.join(budget.setup) or 'none'})")
        first = combined(budget.setup[name] for name in names)
        for name, ours in (("dp-noise-multiplier", budget.noise_multiplier),
                           ("dp-epsilon-spent", epsilon_spent(budget.noise_multiplier, rounds,
                                                              budget.delta, first))):
            if (stored := state_entry(state, name)) != ours:
                raise StateError(f"strategy state {name!r} is {stored!r}, this run's accountant "
                                 f"gives {ours!r} for {rounds} round(s): the checkpoint's budget "
                                 f"was calibrated or counted otherwise (another dp-accounting?)")
        stop_reason = state_entry(state, "dp-stop-reason")
        if not isinstance(stop_reason, str):
            raise StateError(f"strategy state 'dp-stop-reason' is {stop_reason!r}, not a string")
        state_entry(state, "dp-last-counts")  # present even when None (before the first round)
        self.last_counts = state_array(state, "dp-last-counts", (k,), optional=True)
        budget.rounds, self.stop_reason = rounds, stop_reason
        budget.released, self.bounds = names, bounds

    # -- the result -------------------------------------------------------------------
    def result(self, strategy: ClusteringStrategy, federation: Federation, centroids: np.ndarray,
               restart: int, rounds: int, converged: bool) -> RunResult | None:
        """The restart's result: scored through secure aggregation, or not scored under DP.

        Under DP the score is NaN (it would be released without noise), the
        counts are the last round's noisy counts (negative ones as 0;
        ``ffcm-avg1``: noisy supports, which add up to fewer than the rows)
        and ``n_points`` their rounded total (at least 1).
        """
        k = len(centroids)
        if self.dp != "off":
            counts = np.zeros(k) if self.last_counts is None else np.maximum(self.last_counts, 0.0)
            score, n_points = math.nan, max(1, int(round(float(counts.sum()))))
        else:
            config = {"chunk-size": strategy.chunk_size, "device": strategy.device,
                      "min-cluster-size": strategy.min_cluster_size}
            vector, exchange = SecureSum(
                strategy, federation, strategy.connected_nodes(federation),
                Request(EVALUATE, config, np.ascontiguousarray(centroids)), ("counts", "sse", "n"),
                k + 2, what=f"score (round {rounds})", cost=self.cost,
                verify=TotalCheck(("counts", "sse", "n"), k, 0,
                                  strategy.options.secagg_fraction_bits)).run()
            counts, sse, n_points = vector[:k], float(vector[k]), int(round(vector[k + 1]))
            if n_points < 1 or abs(counts.sum() - n_points) > 0.5:
                raise RunFailed(f"score (round {rounds}): the secure totals are inconsistent "
                                f"({counts.sum():g} counted of {n_points} rows)")
            score = sse / n_points
            log(INFO, "restart %d: score %.6g over %s (secure aggregation)", restart, score,
                counted(n_points, "point"))
        self.log_cost()
        settings = dict(strategy.settings)
        if self.dp != "off":  # the bounds the rounds used (estimated ones: the model keeps them)
            settings["data-bounds"] = self.bounds
        result = RunResult(algorithm=strategy.algorithm, settings=settings,
                           centroids=np.array(centroids, dtype=np.float64), counts=counts,
                           score=float(score), n_points=n_points, rounds=rounds,
                           converged=converged, best_restart=restart)
        result.stop_reason = self.stop_reason
        return result

    def log_cost(self) -> None:
        """Log what secure aggregation has cost the run so far (Flower's log, INFO).

        Bytes are those of the stage payloads (keys, ciphertexts, masked
        words), not of Flower's framing; seconds are the server's wall time
        from the first stage's request to the last stage's reply.
        """
        cost = self.cost
        stages = ", ".join(f"{kind.rsplit('_', 1)[-1]} {seconds:.2f} s"
                           for kind, seconds in cost.per_stage_seconds.items())
        log(INFO, "secure aggregation so far: %d aggregation(s) in %d request rounds, "
            "%.1f kB to and %.1f kB from the clients, %.2f s (%s), %d client(s) dropped",
            cost.aggregations, cost.request_rounds, cost.bytes_to_clients / 1e3,
            cost.bytes_from_clients / 1e3, cost.seconds, stages, cost.dropped)
