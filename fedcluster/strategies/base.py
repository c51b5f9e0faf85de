"""What every fedcluster strategy shares.

A deployed federation loses clients, gets late or malformed replies and starts
before every SuperNode has connected. :class:`ClusteringStrategy` handles this
once for every method: it waits a bounded time for clients, samples them with a
seed, counts replies against the nodes it sent to, rejects (and logs) error
replies and replies that fail the protocol checks, and reports who is missing.
It also owns what every method does the same way: ``n_init`` restarts, the
final federated score of each restart (an ``evaluate`` request to every
connected client) and the choice of the best restart. It talks to the clients
only through a :class:`~fedcluster.federation.Federation`, so one strategy runs
over Flower and in memory alike.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from logging import INFO, WARNING
from typing import Any, ClassVar

import numpy as np

from ..federation.base import Exchange, Federation, RunFailed
from ..logs import DETAIL, counted, log
from ..messages import BOUNDS, EVALUATE, ClientSummary, ProtocolError, Request, validate_reply
from ..numerics.outliers import ROW_CAP_MULTIPLE, declared_row_factors
from ..options import Options, changed_settings, setting_defaults
from ..privacy.kinds import DIMENSION
from ..results import RoundRecord, RunResult
from .progress import Progress, node_map, node_pairs, state_array, state_generator

#: Rejected replies whose reasons a failed run's one-line message names.
SHOWN_REASONS = 2
#: Seconds after its first request a resumed run whose clients were late waits, for their
#: heartbeats to be current again (:meth:`FederatedStrategy.await_reconnection`): Flower
#: 1.39's SuperNode retries a failed heartbeat with an exponential back-off capped at 20 s
#: (``flwr.supercore.heartbeat.HeartbeatSender``), apart from its message loop.
HEARTBEAT_CATCH_UP_S = 25.0


class ClusteringStrategy:
    """Base class of the fedcluster strategies.

    Subclasses set :attr:`Options` (their method's options model) and
    implement :meth:`run_restart`; :meth:`fit` runs the restarts over a
    :class:`~fedcluster.federation.Federation`, scores each and keeps the best.
    Flower's face of a strategy is :class:`fedcluster.server.flower.FlowerStrategy`.

    Parameters
    ----------
    k : int, optional
        Number of clusters (the ``k`` setting; positional for brevity).
    options : Options, optional
        The method's settings, already validated (as
        :meth:`fedcluster.config.RunConfig.method_options` gives them).
    **settings
        Or the settings by name (snake- or kebab-case), validated here by
        :attr:`Options` (:class:`~fedcluster.options.ConfigError` names a bad
        one); each field's description says what it does. Those of every
        method are :class:`fedcluster.options.Options`': among them
        ``n_init`` restarts compared by ``score`` (the exact sum of squared
        distances over all points, or the DWF paper's client mean), the
        ``seed`` of every random choice, client sampling (``participation``
        or ``clients_per_round``), the waits (``min_nodes``,
        ``node_wait_timeout``, ``round_timeout``), the quorum
        ``min_answer_fraction`` (:meth:`check_quorum`) and the privacy floor
        ``min_cluster_size`` sent with every request (see
        :mod:`fedcluster.local.floor`).
    """

    #: The method's options model: its settings, their defaults and allowed ranges.
    Options: ClassVar[type[Options]] = Options

    def __init__(self, k: int | None = None, /, *, options: Options | None = None,
                 **settings: Any) -> None:
        if options is None:
            given = settings if k is None else {"k": k, **settings}
            options = type(self).Options.from_mapping(given)
        elif k is not None or settings:
            raise TypeError("give validated options or settings by name, not both")
        #: The validated settings; each reads as an attribute too (``self.k``).
        self.options = options
        self.rng = np.random.default_rng(self.seed)
        #: Node id -> the number of points its first accepted reply declared; a
        #: client's data does not change during a run, so a later reply that
        #: declares another number is rejected (:meth:`exchange`).
        self.declared_rows: dict[int, int] = {}
        #: Node id -> the sampling key its replies declared (:meth:`sample_nodes`).
        self.sampling_keys: dict[int, int] = {}
        #: The centre and reference reach the start's replies taught (row 0, row 1; None
        #: before a start, or with fewer than 3 clients): each round's far-reply check
        #: (:func:`~.initialisation.reject_far_replies`).
        self.far_reference: np.ndarray | None = None
        #: Where :meth:`fit` reports its progress (a checkpoint writer), and the
        #: run-level progress it reports besides a restart's own.
        self._checkpoint: Callable[[Progress], None] | None = None
        self._best: RunResult | None = None
        self._scores: list[float] = []

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: a setting reads from the options
        # (``self.k``, ``self.lr``), so no copy of it can go stale.
        options = self.__dict__.get("options")
        if options is not None and name in type(options).model_fields:
            return getattr(options, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def settings(self) -> dict[str, int | float | str | bool]:
        """The method's settings, as the model file records them."""
        return self.options.settings()

    def override(self, **settings: Any) -> None:
        """Replace some settings, validated as the constructor validates them."""
        self.options = type(self.options).from_mapping({**self.options.model_dump(), **settings})

    def summary(self) -> None:
        """Log the method and the settings that differ from their defaults."""
        log(INFO, "%s (%s), k=%d, n_init=%d, seed %d", type(self).__name__, self.algorithm,
            self.k, self.n_init, self.seed)
        changed = changed_settings(self.settings, setting_defaults(type(self.options)))
        for key, value in sorted(changed.items()):
            log(INFO, "\t%s = %s", key, value, extra=DETAIL)

    # -- nodes -----------------------------------------------------------------
    def wait_for_nodes(self, federation: Federation) -> list[int]:
        """Wait (bounded) until ``min_nodes`` clients are connected; call once per run.

        After ``node_wait_timeout`` the run goes on with the clients that are
        there, or fails if there are none.
        """
        return self._wait(federation, self.min_nodes)

    def connected_nodes(self, federation: Federation) -> list[int]:
        """The connected node ids, sorted; waits (bounded) only if there are none.

        Later rounds do not wait for ``min_nodes`` again: a federation that has
        lost a client goes on with the others.
        """
        return self._wait(federation, 1)

    def _wait(self, federation: Federation, wanted: int) -> list[int]:
        deadline = time.monotonic() + self.node_wait_timeout
        while len(nodes := sorted(federation.node_ids())) < wanted:
            if time.monotonic() >= deadline:
                if not nodes:
                    raise RunFailed(
                        f"no client connected within {self.node_wait_timeout:g} s "
                        f"(waiting for {wanted})"
                    )
                log(WARNING, "Only %d of %d clients connected; going on", len(nodes), wanted)
                break
            log(INFO, "Waiting for clients: %d connected, %d wanted", len(nodes), wanted)
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        return nodes

    def await_reconnection(self, federation: Federation, history: Sequence[RoundRecord]) -> None:
        """On resume, wait (bounded) until the clients of the interrupted restart answer again.

        A SuperLink started again on its database lists the SuperNodes it
        knew as connected for up to a minute after their last heartbeat,
        while they are still in their retry back-off, and answers a message
        to a node that is not back when that minute ends with an error: a
        round sent at once could lose clients the uninterrupted run had. So
        every node that took part in the history's last restart is asked for
        its dimension (a reply that holds the number of features only), again
        each second for those the request did not reach, until each has
        answered or ``node_wait_timeout`` has passed (then the run goes on
        without them, naming them). An error reply of the client's own counts
        as an answer: the client is back, and the next request rejects it
        with its reason. Nothing is asked when none of those nodes is listed:
        the clients have new ids (a simulation, or a SuperLink that lost its
        database).

        An answer shows the SuperNode's message loop is back, not its
        heartbeat, which retries on its own back-off: a node whose last
        heartbeat before the outage ages out in between is listed offline
        until the next one, and a round sent then loses it (seen in about 1
        of 5 loopback resumes on a loaded machine). So where a node was late
        (not answering the first request: in its back-off), the run goes on
        no sooner than :data:`HEARTBEAT_CATCH_UP_S` after that request, by
        which time every node back has had a heartbeat through. Where all
        answer at once (an in-memory federation, a SuperLink that stayed up)
        nothing more is waited.
        """
        last = history[-1].restart if history else None
        known = sorted({node for record in history if record.restart == last
                        for node in record.participants})
        if not set(known) & set(federation.node_ids()):
            return
        deadline = time.monotonic() + self.node_wait_timeout
        heartbeats_through = time.monotonic() + HEARTBEAT_CATCH_UP_S
        waiting = known
        late = told = False
        while True:
            listed = set(federation.node_ids())
            ask = [node for node in waiting if node in listed]
            if ask:
                timeout = max(0.0, min(self.round_timeout, deadline - time.monotonic()))
                back = {a.node for a in federation.ask(Request(DIMENSION, {}), ask, timeout)
                        if not a.unreachable}
                waiting = [node for node in waiting if node not in back]
            if not waiting:
                log(INFO, "resume: all %s of the interrupted run answer", counted(len(known), "client"))
                pause = heartbeats_through - time.monotonic()
                if late and pause > 0:
                    log(INFO, "resume: waiting %.0f s more for their heartbeats", pause)
                    time.sleep(pause)
                return
            late = True
            if time.monotonic() >= deadline:
                log(WARNING, "resume: node(s) %s did not answer within %g s; going on without them",
                    waiting, self.node_wait_timeout)
                return
            if not told:
                log(INFO, "resume: waiting up to %g s for node(s) %s of the interrupted run to "
                    "reconnect", self.node_wait_timeout, waiting)
                told = True
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))

    def sample_nodes(self, federation: Federation, rng: np.random.Generator) -> list[int]:
        """Draw this round's clients without replacement, reproducibly for a seed.

        The draw is of positions in an ordered list of the connected nodes,
        never of their ids: Flower's ids are uint64 values that NumPy would
        turn into float64 (and so into ids no node has). Nodes are ordered by
        the sampling key their replies declared (a simulated client's
        partition id, or ``partition-id`` in a SuperNode's node config), then
        by id: Flower draws new node ids for every simulation, and the keys
        make two simulations with one seed sample the same partitions. Every
        initialisation except an explicit start asks all clients first, so the
        keys are known before the first sampled round.
        """
        nodes = self.connected_nodes(federation)
        if self.clients_per_round:
            size = min(self.clients_per_round, len(nodes))
        else:
            size = max(1, math.ceil(self.participation * len(nodes) - 1e-9))
        if size == len(nodes):
            return nodes
        keyed = sorted(nodes, key=lambda n: (n not in self.sampling_keys,
                                             self.sampling_keys.get(n, 0), n))
        return sorted(keyed[i] for i in rng.choice(len(nodes), size=size, replace=False))

    # -- requests and replies --------------------------------------------------
    def exchange(
        self,
        federation: Federation,
        kind: str,
        node_ids: Iterable[int],
        config: Mapping[str, int | float | str | bool],
        validate: Callable[[ClientSummary], ClientSummary],
        *,
        centroids: np.ndarray | None = None,
        what: str,
    ) -> Exchange[ClientSummary]:
        """Send one request to ``node_ids``; check, log and return the replies.

        Every request carries the privacy floor ``min-cluster-size``. Each
        answer is matched to a node asked (others are ignored), checked with
        ``validate`` (:func:`~fedcluster.messages.validate_reply` with what the
        request expects) and against the number of points the node declared
        earlier in the run; every rejection is logged with the node named,
        and the run fails below the quorum (:meth:`check_quorum`).
        """
        request = Request(kind, {**config, "min-cluster-size": self.min_cluster_size}, centroids)
        sent = sorted(set(node_ids))
        exchange: Exchange[ClientSummary] = Exchange(sent=sent)
        for answer in federation.ask(request, sent, self.round_timeout):
            node = answer.node
            if node not in sent or node in exchange.accepted or node in exchange.rejected:
                log(WARNING, "%s: ignored an unexpected reply from node %s", what, node)
                continue
            if answer.summary is None:
                exchange.rejected[node] = answer.error or "no summary"
                continue
            if answer.sampling_key is not None:
                self.sampling_keys[node] = answer.sampling_key
            try:
                summary = validate(answer.summary)
            except ProtocolError as exc:
                exchange.rejected[node] = f"malformed reply: {exc}"
                continue
            rows = self.declared_rows.setdefault(node, summary.n)
            if summary.n != rows:
                exchange.rejected[node] = (f"inconsistent reply: {summary.n} local points, "
                                           f"{rows} in its earlier replies of this run")
                continue
            exchange.accepted[node] = summary
        exchange.accepted = dict(sorted(exchange.accepted.items()))
        for node, reason in exchange.rejected.items():
            log(WARNING, "%s: rejected node %d: %s", what, node, reason)
        if missing := exchange.missing:
            log(WARNING, "%s: no reply within %g s from node(s) %s", what, self.round_timeout, missing)
        self.check_quorum(exchange, what)
        return exchange

    def check_quorum(self, exchange: Exchange, what: str) -> None:
        """Fail the run when fewer than ``min_answer_fraction`` of the asked clients answered.

        A round that goes on with a small minority of its clients silently
        turns a federated clustering into a clustering of a few owners' data;
        a round that nobody answered trains nothing. Both end the run.

        Raises
        ------
        RunFailed
            With the counts and the reasons of the rejected replies.
        """
        asked = len(exchange.sent)
        needed = max(1, math.ceil(self.min_answer_fraction * asked - 1e-9))
        if len(exchange.accepted) >= needed:
            return
        reasons = [f"node {node}: {reason}" for node, reason in exchange.rejected.items()]
        if len(reasons) > SHOWN_REASONS:
            reasons[SHOWN_REASONS:] = [f"{len(reasons) - SHOWN_REASONS} more rejected"]
        if exchange.missing:
            reasons.append(f"no reply within {self.round_timeout:g} s from {len(exchange.missing)} "
                           "node(s)")
        raise RunFailed(
            f"{what}: {len(exchange.accepted)} of {asked} clients answered usably, "
            f"min-answer-fraction {self.min_answer_fraction:g} needs {needed}"
            + (f" ({'; '.join(reasons)})" if reasons else "")
        )

    # -- the run ---------------------------------------------------------------
    def run_restart(self, federation: Federation, restart: int, history: list[RoundRecord],
                    resume: Progress | None = None) -> tuple[np.ndarray, int, bool]:
        """Run one restart; return (centroids, rounds, converged).

        ``self.rng`` is the restart's generator; append one :class:`RoundRecord`
        per request round to ``history`` and call :meth:`report_progress`
        after each. With ``resume`` (a point inside this restart, the state
        restored) go on from its round.
        """
        raise NotImplementedError

    def before_restarts(self, federation: Federation) -> None:
        """Called once per :meth:`fit` (a resumed one too), before the first restart runs;
        the round-based methods learn the data's scale here (``tol-scale``)."""

    def fit(self, federation: Federation, *, resume: Progress | None = None,
            checkpoint: Callable[[Progress], None] | None = None) -> RunResult:
        """Run ``n_init`` restarts, score each, and keep the best.

        Parameters
        ----------
        federation : Federation
        resume : Progress, optional
            Continue from this point (a checkpoint's) instead of the start:
            the strategy's state is restored (:meth:`restore`), the restart in
            progress goes on from its last round, and the finished restarts
            are not run again. With the same settings and clients the result
            is that of an uninterrupted run (bit for bit with full
            participation; the same sampled clients, the sampler's random
            state being part of the state).
        checkpoint : callable, optional
            Called with the run's :class:`Progress` after the initialisation
            and every round of a restart, and after every scored restart; an
            exception it raises ends the run.

        Raises
        ------
        RuntimeError
            No client connected, or no restart could be scored.
        """
        self.summary()
        self.wait_for_nodes(federation)
        self._checkpoint = checkpoint
        history: list[RoundRecord] = []
        best: RunResult | None = None
        self._scores = []
        first = 0
        if resume is not None:
            self.restore(resume.state)
            history, best, first = list(resume.history), resume.best, resume.restart
            self._scores = list(resume.scores)
            log(INFO, "resuming at restart %d, %s", first,
                "before its first round" if resume.round is None else f"after round {resume.round}")
            self.await_reconnection(federation, history)
            self.relearn_sampling_keys(federation)
        self.before_restarts(federation)
        self._best = best
        for restart in range(first, self.n_init):
            point = resume if resume is not None and restart == first and resume.round is not None \
                else None
            if point is None:  # else the restored generator goes on where it was
                self.rng = np.random.default_rng([self.seed, restart])
            centroids, rounds, converged = self.run_restart(federation, restart, history, point)
            run = self.score_restart(federation, centroids, restart, rounds, converged)
            self._scores.append(math.nan if run is None else run.score)
            if run is not None and (best is None or _key(run) < _key(best)):
                best = run
            self._best = best
            self.report_progress(restart + 1, None, None, False, history)
        if best is None:
            raise RunFailed("no restart could be scored: no client answered the score requests")
        best.history = history
        log(INFO, "kept restart %d: score %.6g after %s (%s)", best.best_restart, best.score,
            counted(best.rounds, "round"),
            "converged" if best.converged else best.stop_reason or "round limit reached")
        return best

    # -- checkpoints -------------------------------------------------------------
    def relearn_sampling_keys(self, federation: Federation) -> None:
        """Ask every connected client for its bounds when a resumed run must sample unknown nodes.

        :meth:`sample_nodes` orders the nodes by the sampling keys their
        replies declared, and the keys were learned under the node ids of the
        interrupted run. A simulation draws new ids, and so does a SuperLink
        that lost its database: then the resumed run would order (and so
        sample) the nodes otherwise. One bounds request (it draws nothing from
        the generator and changes no centroid) teaches the keys again before
        the first sampled round. Nothing is asked with full participation or
        when every connected node's key is known.
        """
        if not self.clients_per_round and self.participation >= 1.0:
            return
        nodes = self.connected_nodes(federation)
        if all(node in self.sampling_keys for node in nodes):
            return
        log(INFO, "resume: %d connected node(s) of unknown sampling key; asking their bounds",
            sum(node not in self.sampling_keys for node in nodes))
        self.exchange(federation, BOUNDS, nodes, {}, lambda s: validate_reply(s, expect=("bounds",)),
                      what="resume (sampling keys)")

    def report_progress(self, restart: int, round_: int | None, centroids: np.ndarray | None,
                        converged: bool, history: list[RoundRecord]) -> None:
        """Give the run's progress to the ``checkpoint`` function of :meth:`fit`, if any."""
        if self._checkpoint is None:
            return
        self._checkpoint(Progress(
            restart=restart, round=round_,
            centroids=None if centroids is None else np.array(centroids, dtype=np.float64),
            converged=converged, history=list(history), best=self._best,
            scores=list(self._scores), state=self.state()))

    def state(self) -> dict[str, Any]:
        """What a checkpoint must carry of this strategy besides its settings, by name.

        Here: the restart's random generator (``rng``: the bit generator's
        state, so that a resumed run draws the same samples and seeds), and
        what the clients' replies taught the server: each node's declared
        number of points (``declared-rows``) and sampling key
        (``sampling-keys``, by which :meth:`sample_nodes` orders the nodes),
        and the start's far-reply reference (``far-reference``, None before
        a start). A method with state of its own (momentum, streaks) adds its
        entries to ``super().state()`` and reads them in :meth:`restore`. Values are
        numpy arrays and JSON values (None, bool, int, float, str, and lists
        and str-keyed dicts of them).
        """
        return {
            "rng": self.rng.bit_generator.state,
            "declared-rows": node_pairs(self.declared_rows),
            "sampling-keys": node_pairs(self.sampling_keys),
            "far-reference": self.far_reference,
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Set the state :meth:`state` returned.

        Raises
        ------
        StateError
            An entry is missing or malformed (the message names it).
        """
        self.rng = state_generator(state, "rng")
        self.declared_rows = node_map(state, "declared-rows")
        self.sampling_keys = node_map(state, "sampling-keys")
        # optional: a checkpoint written before the far-reply check has none (its rounds then
        # measure their replies against each other)
        self.far_reference = state_array(state, "far-reference", (2, None), optional=True)

    # -- the final score -------------------------------------------------------
    def believed(self, exchange: Exchange[ClientSummary], what: str = ""
                 ) -> tuple[list[ClientSummary], np.ndarray]:
        """The accepted replies in content order and the share of each one's rows the score believes.

        :func:`~fedcluster.numerics.outliers.declared_row_factors`: a client
        declaring over 1000 times the median client's rows is counted as the
        median client (factor below 1); everybody else as declared (exactly
        1.0). With ``trust_clients`` every factor is 1. ``what`` names the
        step in the WARNING that names each such client (none: no log, as in
        a round's history score, so a liar is named once per restart).
        """
        pairs = exchange.by_content()
        summaries = [summary for _, summary in pairs]
        if self.trust_clients:
            return summaries, np.ones(len(summaries))
        factors = declared_row_factors([s.n for s in summaries])
        if what:
            for (node, summary), factor in zip(pairs, factors):
                if factor < 1.0:
                    median = round(summary.n * factor)  # what an outlier is counted as
                    log(WARNING, "%s: node %d declares %d rows, over %g x the median client's "
                        "%d: counted as %d in the score and n_points (--trust-clients counts "
                        "them as declared)", what, node, summary.n, ROW_CAP_MULTIPLE, median,
                        median)
        return summaries, factors

    def weighed(self, exchange: Exchange[ClientSummary]) -> list[ClientSummary]:
        """The accepted replies in content order, each weighing as :meth:`believed` counts its rows.

        What a server step that weights the clients' centroids by their
        counts pools (:func:`capped`): a client declaring 1000 x the median
        client's rows weighs as the median client; everybody else's reply is
        itself.
        """
        summaries, factors = self.believed(exchange)
        return [capped(s, f) for s, f in zip(summaries, factors)]

    def score_restart(self, federation: Federation, centroids: np.ndarray, restart: int,
                      rounds: int, converged: bool) -> RunResult | None:
        """Score a restart's centroids over all connected clients (None if nobody answers).

        Each client sends its counts per cluster and its sum of squared
        distances to the centroids; the score is the exact one (all clients'
        sum over their total number of points) or the paper's client mean.
        ``n_points`` and ``counts`` count each client's rows as
        :meth:`believed` says (a client declaring 1000 x the median client's
        rows as the median client), and the exact score leaves such a client
        out (:func:`exact_score`): one client's declared counts cannot make
        the model look better. The
        client mean needs no cap: each client has weight 1 / m in it.
        """
        private = getattr(self, "private", None)
        if private is not None:  # secure totals, or no score under DP
            return private.result(self, federation, centroids, restart, rounds, converged)
        k = len(centroids)
        what = f"score (round {rounds})"
        exchange = self.exchange(
            federation, EVALUATE, self.connected_nodes(federation),
            {"chunk-size": self.chunk_size, "device": self.device},
            lambda s: validate_reply(s, k=k, expect=("counts", "sse"), all_counted=True),
            centroids=np.ascontiguousarray(centroids), what=what,
        )
        summaries, factors = self.believed(exchange, what)
        exact = exact_score(summaries, factors)
        client_mean = float(np.mean([s.sse / s.n for s in summaries]))
        score = exact if self.score == "exact" else client_mean
        n_points = round(sum(f * s.n for s, f in zip(summaries, factors)))
        log(INFO, "restart %d: score %.6g over %s from %s", restart, score,
            counted(n_points, "point"), counted(len(summaries), "client"))
        return RunResult(
            algorithm=self.algorithm,
            settings=dict(self.settings),
            centroids=np.array(centroids, dtype=np.float64),
            counts=np.sum([f * s.counts for s, f in zip(summaries, factors)],
                          axis=0).astype(np.float64),
            score=float(score),
            n_points=int(n_points),
            rounds=rounds,
            converged=converged,
            best_restart=restart,
        )


def exact_score(summaries: Iterable[ClientSummary], factors: Iterable[float] | None = None
                ) -> float:
    """Sum of the clients' squared distances over their total number of points.

    ``factors``: the share of each client's rows the score believes
    (:meth:`ClusteringStrategy.believed`); all of them when None. A client
    believed in part (factor below 1, a declared row count 1000 x the median
    client's) is left out of the mean: none of its figures can be believed,
    its squared distances included (declaring 10^9 times its rows with its
    true squared distances says its rows sit on the centroids), so the score
    is the other clients' mean, which its rows are assumed to share. Every
    client believed (factors exactly 1.0): every sum as it always was.
    """
    summaries = list(summaries)
    factors = [1.0] * len(summaries) if factors is None else list(factors)
    kept = [s for s, f in zip(summaries, factors) if f == 1.0] or summaries
    return float(sum(s.sse for s in kept) / sum(s.n for s in kept))


def capped(summary: ClientSummary, factor: float) -> ClientSummary:
    """A reply with its declared rows, counts, fuzzy weights and squared distances times ``factor``.

    What an aggregation weighs a client by, counted as
    :meth:`ClusteringStrategy.believed` counts its rows: a client declaring
    10^9 times its rows weighs as the median client. Factor 1.0: the reply
    itself.
    """
    if factor == 1.0:
        return summary
    change: dict[str, Any] = {"n": max(1, round(summary.n * factor)), "sse": summary.sse * factor}
    for name in ("counts", "weights"):
        if (values := getattr(summary, name)) is not None:
            change[name] = np.asarray(values, dtype=np.float64) * factor
    return dataclasses.replace(summary, **change)


#: The longest rejection reason a round's record keeps (the log has it whole).
REASON_CHARS = 200


def round_record(restart: int, round_: int, phase: str, movement: float, score: float,
                 exchange: Exchange, epsilon: float = math.nan) -> RoundRecord:
    """The history row of one request round (``epsilon``: the DP budget spent so far)."""
    return RoundRecord(
        restart=restart,
        round=round_,
        movement=movement,
        score=score,
        clients_sampled=len(exchange.sent),
        clients_answered=len(exchange.accepted),
        clients_rejected=len(exchange.rejected),
        participants=tuple(exchange.accepted),
        phase=phase,
        epsilon=epsilon,
        # A reason quotes the client's own error text: bounded, it cannot swell the model file.
        rejections=tuple(f"node {node}: {reason}"[:REASON_CHARS]
                         for node, reason in exchange.rejected.items()),
    )


def _key(run: RunResult) -> float:
    return math.inf if math.isnan(run.score) else run.score
