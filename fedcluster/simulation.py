"""Flower simulation of a fedcluster run in this process (Ray backend)."""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .config import RunConfig
from .logs import colour_only_on_a_terminal, log
from .results import RunResult

_PACKAGE_DIR = str(Path(__file__).resolve().parent)

#: Flower must not reach the internet: no telemetry, update check or per-run
#: dependency installation (see Flower's documentation of these variables).
FLOWER_OFFLINE_ENV = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
    "UV_OFFLINE": "1",
}


#: Replies per second that one Ray actor is assumed to manage at least: a third of what 2
#: actors managed on a loaded 2-core machine (about 12 a second in all), so that a default
#: round timeout outlasts a slow round but still ends one whose clients are gone.
_REPLIES_PER_ACTOR_SECOND = 2.0
#: The round timeout of a deployment (RunConfig's default), also a small simulation's.
_BASE_ROUND_TIMEOUT = 300.0


def simulated_round_timeout(cohort: int, cpus_per_client: float = 1.0) -> float:
    """Seconds a simulated round waits for ``cohort`` replies.

    A simulation answers through one Ray actor per ``cpus_per_client`` of the
    machine's cores, one message at a time each, so a round's time grows with
    its cohort: 10,000 clients through 2 actors need about 14 minutes, and a
    fixed 300 s timeout dropped two thirds of them. The deployment default
    (300 s) is kept and one second per ``_REPLIES_PER_ACTOR_SECOND`` replies
    per actor added on top.
    """
    actors = max(1.0, (os.cpu_count() or 1) / cpus_per_client)
    return _BASE_ROUND_TIMEOUT + cohort / (_REPLIES_PER_ACTOR_SECOND * actors)


class SimulationError(RuntimeError):
    """The simulated run ended without writing its model."""


def set_offline_env() -> None:
    """Switch off Flower's network use in this process and its children."""
    for key, value in FLOWER_OFFLINE_ENV.items():
        os.environ.setdefault(key, value)


def simulate(
    config: RunConfig,
    partitions_dir: str | Path,
    num_clients: int,
    *,
    cpus_per_client: float = 1.0,
    verbose: bool = False,
    run=None,
    report: bool = True,
) -> RunResult:
    """Run ``config`` over ``num_clients`` simulated clients and return the model.

    Client ``i`` reads partition ``i`` of ``partitions_dir`` (written by
    :func:`fedcluster.data.write_partitions` or ``fedcluster partition``).
    Unless ``verbose``, only fedcluster's own log lines (rounds, warnings,
    rejected clients) and Flower's errors are shown: Flower's and Ray's
    notices, the strategy's list of settings and the clients' own log lines
    (whose rejections the server logs anyway) are hidden. ``run`` replaces
    what the ServerApp does with the federation and the config (see
    :func:`fedcluster.server.app.build_server_app`); its return value is
    returned. Without ``report`` the ServerApp writes no final ``report.html``
    (the caller writes its own). Flower starts one Ray actor per
    ``cpus_per_client`` of the machine's cores, but never more than
    ``num_clients``: each actor is a process that imports Ray, Flower and the
    ClientApp (about 3 CPU-s on a loaded 2-core machine) before its first message. The run waits for all ``num_clients``
    before its first request, whatever ``config.min_nodes`` says: Flower
    starts the ServerApp while it is still registering the simulated nodes,
    and a first request sent then would miss some of them. It returns as soon
    as the ServerApp has its result; Flower's runtime and Ray stop behind it
    (about 2 s of waiting) while the caller goes on: see
    :func:`wait_for_the_last_teardown`. The run always starts a Ray cluster
    of its own, never one that ``ray start`` or ``RAY_ADDRESS`` points to.

    Raises
    ------
    SimulationError
        The ServerApp failed (the message says why, in one line) and wrote no
        new model.
    """
    set_offline_env()
    from .federation.base import RunFailed

    wait_for_the_last_teardown()
    data = {"partitions-dir": str(Path(partitions_dir).resolve())}
    backend = {"client_resources": {"num_cpus": cpus_per_client, "num_gpus": 0.0}}
    results: list[RunResult] = []
    failures: list[BaseException] = []
    ended = threading.Event()

    def keep(result: RunResult) -> None:
        results.append(result)
        ended.set()

    with _quiet(not verbose):
        try:
            run_simulation, build_client_app, build_server_app = _import_flower_and_the_apps()
            _start_ray(_ray_init_args(num_clients, cpus_per_client, verbose))
        except Exception as exc:  # noqa: BLE001 - Ray's start fails with its own types
            raise SimulationError(f"the simulation could not start: {type(exc).__name__}: "
                                  f"{exc}") from exc
        colour_only_on_a_terminal()  # before Flower's first lines

    def run_in_flower() -> None:
        try:
            with _quiet(not verbose), _one_pass_delivery():
                run_simulation(
                    server_app=build_server_app(
                        {**config.to_flower(), **data, "min-nodes": num_clients},
                        keep, run, final_report=report),
                    client_app=build_client_app(data),
                    num_supernodes=num_clients,
                    backend_config=backend,
                )
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            failures.append(exc)
            if results:  # the model is written; what failed is stopping Flower or Ray
                log(logging.WARNING, "stopping the simulation after its result: %s: %s",
                    type(exc).__name__, exc)
        finally:
            ended.set()

    global _teardown
    _teardown = threading.Thread(target=run_in_flower, name="fedcluster-simulation")
    _teardown.start()
    ended.wait()
    if failures and not results:
        exc = failures[0]
        if not isinstance(exc, Exception):
            raise exc
        raise SimulationError(str(exc) if isinstance(exc, RunFailed) else
                              f"the simulated run failed: {type(exc).__name__}: {exc}") from exc
    if not results:
        raise SimulationError(f"the simulated run wrote no model to {config.out_dir}; its log "
                              "above says why")
    return results[0]


#: The thread of the last simulation: it stops Flower's runtime and Ray after the result is in.
_teardown: threading.Thread | None = None


def wait_for_the_last_teardown() -> None:
    """Wait until the last simulation's Flower runtime and Ray have stopped.

    :func:`simulate` returns once the ServerApp has its result: Flower then
    stops its runtime (its queues wait up to 1 s for the last message) and
    Ray (about 1.3 s of waiting for each of Ray's processes to exit in turn)
    in the run's own thread, while the caller writes its report. A second
    simulation waits for this first (it would otherwise find Ray running and
    have it stopped under it); the interpreter waits for it at exit as for any
    thread that is not a daemon.
    """
    if _teardown is not None:
        _teardown.join()


@contextmanager
def _one_pass_delivery() -> Iterator[None]:
    """Flower's simulation hands out its stored messages in one pass per sweep, not one per node.

    Flower 1.39's simulation engine (``vce_api.add_messages_to_queue``) asks
    its link state, every 0.1 s, for each node's next message, and the
    in-memory state answers each such question by a scan of every stored
    message: a sweep costs nodes x messages checks, all under the state's
    lock. At 10,000 clients that is 10^8 checks before every client has its
    request, and the ServerApp's pulls and the replies' stores wait on the
    lock meanwhile (measured on 2 cores: the first request to 10,000 clients
    unanswered after 2 minutes; issue 29 counted 3,510 replies in 300 s).
    Here the sweep scans the stored messages once and gives each node at most
    one, as Flower's does, checking only the messages it may hand out (the
    ServerApp's pulls check the others). A link state without the in-memory
    state's store keeps Flower's own sweep.
    """
    from flwr.server.superlink.fleet.vce import vce_api

    flowers = vce_api.add_messages_to_queue

    def add_messages_to_queue(state, queue, nodes_mapping, f_stop) -> None:
        if not hasattr(state, "message_ins_store"):
            flowers(state, queue, nodes_mapping, f_stop)
            return
        while not f_stop.is_set():
            swept = time.perf_counter()
            for message in undelivered_once_per_node(state, nodes_mapping):
                queue.put(message)
            f_stop.wait(sweep_pause(time.perf_counter() - swept))

    vce_api.add_messages_to_queue = add_messages_to_queue
    try:
        yield
    finally:
        vce_api.add_messages_to_queue = flowers


#: The longest pause between two sweeps: Flower's own (0.1 s).
_LONGEST_SWEEP_PAUSE = 0.1


def sweep_pause(sweep_seconds: float) -> float:
    """Seconds to wait before the next sweep of the stored messages.

    Flower pauses 0.1 s after every sweep, so that each request waits 0.05 s
    on average before a client sees it: a few rounds of a small federation
    spend more time in these pauses than in the clients' work. A sweep of a
    small store takes microseconds; pausing 10 times as long as the last sweep
    took keeps the scans under a tenth of one core however large the store, and
    never pauses longer than Flower does.
    """
    return min(_LONGEST_SWEEP_PAUSE, max(0.002, 10.0 * sweep_seconds))


def undelivered_once_per_node(state, nodes) -> list:
    """Each node's first undelivered message in an in-memory link state, marked delivered.

    What Flower's ``state.get_message_ins(node_id=node, limit=1)`` returns for
    every node of `nodes` in turn, found in one scan: the state's own check
    first drops expired messages and those between nodes outside the run's
    federation.
    """
    from flwr.supercore.date import now

    taken: dict[int, object] = {}
    with state.lock:
        # Only the messages still to hand out are checked; the ServerApp's pull checks the rest.
        waiting = [key for key, message in state.message_ins_store.items()
                   if message.metadata.delivered_at == "" and message.metadata.dst_node_id in nodes]
        state._check_stored_messages(set(waiting))  # noqa: SLF001
        for key in waiting:
            message = state.message_ins_store.get(key)
            if message is not None and message.metadata.dst_node_id not in taken:
                taken[message.metadata.dst_node_id] = message
    delivered_at = now().isoformat()
    for message in taken.values():
        message.metadata.delivered_at = delivered_at
    return list(taken.values())


def _ray_init_args(num_clients: int, cpus_per_client: float, verbose: bool) -> dict:
    """``ray.init``'s arguments (Flower adds ``include_dashboard=False`` and the PYTHONPATH).

    Where the clients need fewer cores than the machine has, Ray is told only
    that many, so that Flower (which starts as many actors as the cores hold)
    starts one actor per client, not one per core. Unless ``verbose``, the
    workers' output stays in Ray's log files.
    """
    args: dict = {} if verbose else {"log_to_driver": False, "logging_level": logging.ERROR}
    needed = math.ceil(num_clients * cpus_per_client)
    if needed < (os.cpu_count() or 1):
        args["num_cpus"] = needed
    return args


def _import_flower_and_the_apps():
    """Flower's simulation entry and the two apps' builders (Ray loads only when a simulation runs)."""
    from flwr.simulation import run_simulation

    from .client.app import build_client_app
    from .server.app import build_server_app

    return run_simulation, build_client_app, build_server_app


def _start_ray(init_args: dict) -> None:
    """Start Ray's local cluster as Flower would, but without a runtime environment.

    Flower's Ray backend starts Ray (unless it is running) with a runtime
    environment of one variable, ``PYTHONPATH`` (this process's ``sys.path``, so
    that the workers import the apps as it does). Under any runtime environment
    Ray has its runtime-environment agent set it up and starts each worker
    through a setup process of its own (``setup_worker.py``: one more Python
    interpreter that imports Ray, per worker). The variable set here in this
    process's environment reaches the workers by inheritance instead (Flower
    sets it there too); Flower then uses this cluster and shuts it down at the
    end of the run.
    """
    import ray

    if ray.is_initialized():
        return
    paths = [*sys.path, *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(path for path in paths if path))
    # "local": a cluster of this run's own, even where `ray start` left one (or its address file).
    ray.init(address="local", include_dashboard=False, **init_args)


class _OwnLinesOnly(logging.Filter):
    """Pass fedcluster's own records (but not its details) and Flower's errors."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        own = record.pathname.startswith(_PACKAGE_DIR)
        return own and not getattr(record, "fedcluster_detail", False)


@contextmanager
def _quiet(enabled: bool) -> Iterator[None]:
    """Hide Flower's and Ray's notices (deprecation, accelerator tip) while a simulation runs."""
    if not enabled:
        yield
        return
    logger = logging.getLogger("flwr")
    only_own = _OwnLinesOnly()
    logger.addFilter(only_own)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"ray\.")
            yield
    finally:
        logger.removeFilter(only_own)
