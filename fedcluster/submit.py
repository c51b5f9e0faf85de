"""``fedcluster submit``: run the app in a deployment and exit with the run's outcome.

``flwr run . <connection> --stream`` exits 0 whatever becomes of the run: a
ServerApp that raises (an invalid run config, every client failing) leaves
only a traceback in the streamed log. This module wraps Flower's own command
line (its JSON output is the interface; nothing here talks to the SuperLink
directly) and waits for the run's final status:

1. check the run config locally (the app's ``[tool.flwr.app.config]`` fused
   with the ``-c`` overrides, as the ServerApp will see it), so that a typo
   fails in a second instead of as a run;
2. ``flwr run APP CONNECTION --format json -c ...`` submits the run and gives
   its id;
3. ``flwr log ID CONNECTION --stream`` streams the run's log until the
   SuperLink has finished the run (or, with ``--no-stream``,
   ``flwr ls --run-id ID CONNECTION --format json`` every few seconds prints
   each change of status);
4. ``flwr ls --run-id ID CONNECTION --format json`` gives the final status:
   ``finished:completed``, ``finished:failed`` or ``finished:stopped``, with
   the ServerApp's exception in ``status-details`` when it failed.

``--resume DIR`` continues an interrupted run from the ``checkpoint.json``
its ServerApp left in ``DIR`` (its ``out-dir``): it adds
``resume-from="DIR"`` (and ``out-dir="DIR"`` unless given) to the run config.

Exit status: 0 the run completed (and, when the SuperLink is on loopback and
``out-dir`` is an absolute directory here, wrote a new ``model.pb`` there); 1 the run failed,
was stopped, did not finish within ``--timeout`` (then it is stopped with
``flwr stop``), or the SuperLink was lost; 2 nothing was submitted (invalid
run config, no SuperLink, unknown connection); 130 interrupted (Ctrl-C stops
the run first), 143 the same for SIGTERM. The last line always says which, and
why.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .logs import use_colour

EXIT_COMPLETED = 0
EXIT_FAILED = 1
EXIT_NOT_SUBMITTED = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

#: The ServerApp component of this project; the local check of the run config
#: runs only for an app that names it.
SERVER_APP = "fedcluster.server.app:app"
_SERVERAPP_PREFIX = "ServerApp failed with exception:"
#: Lines ``flwr ... --format json`` folds into its error message before the error.
_NOISE = re.compile(r"^(Flower App configuration warnings in |- |Using SuperLink: )")
_LOOPBACK = ("127.", "localhost", "[::1]", "::1", "0.0.0.0")
#: An ANSI SGR sequence (colour, bold, reset), as Flower's console handler writes them.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Terminated(KeyboardInterrupt):
    """SIGTERM while a run is followed: handled like Ctrl-C (the run is stopped)."""


def _raise_terminated(signum, frame) -> None:  # noqa: ARG001 - a signal handler
    raise Terminated()


class SubmitError(Exception):
    """Submitting or following a run went wrong; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) made one space."""
    return " ".join(str(text).split())


# -- Flower's command line ----------------------------------------------------------------
@dataclass
class RunStatus:
    """One run as ``flwr ls --run-id ID --format json`` describes it."""

    run_id: int
    status: str  # pending, starting, running, finished:completed|failed|stopped
    details: str = ""
    elapsed: float = 0.0
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def finished(self) -> bool:
        return self.status.startswith("finished")

    @property
    def outcome(self) -> str:
        """``completed``, ``failed``, ``stopped`` once finished, else ''."""
        return self.status.split(":", 1)[1] if self.finished and ":" in self.status else ""

    def reason(self) -> str:
        """The status details on one line, without Flower's ServerApp prefix."""
        details = "" if self.details in ("", "N/A") else one_line(self.details)
        if details.startswith(_SERVERAPP_PREFIX):
            details = "the ServerApp raised: " + details[len(_SERVERAPP_PREFIX):].strip()
        return details


def _json_payload(stdout: str) -> dict[str, Any] | None:
    """The JSON object a ``flwr ... --format json`` printed, or None."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"^\{", stdout, flags=re.MULTILINE):
        try:
            payload, _ = decoder.raw_decode(stdout[match.start():])
        except ValueError:
            continue
        if isinstance(payload, dict):
            return payload
    return None


def _flwr_error(payload: dict[str, Any] | None, proc: subprocess.CompletedProcess) -> str:
    """The error a failed ``flwr`` command reports, on one line, without its captured noise."""
    if payload is not None and payload.get("error-message"):
        lines = [line for line in str(payload["error-message"]).splitlines()
                 if line.strip() and not _NOISE.match(line)]
        if lines:
            return one_line(" ".join(lines))
    text = "\n".join(part for part in (proc.stderr, proc.stdout) if part)
    # Without --format json click draws a box around the error: drop its frame.
    text = re.sub(r"[╭╮╰╯│─]+|\bError\b(?=\s*$)", " ", text, flags=re.MULTILINE)
    lines = [line for line in text.splitlines() if line.strip() and not _NOISE.match(line)]
    return one_line(" ".join(lines[-6:])) or f"flwr exited with status {proc.returncode}"


def find_flwr() -> str:
    """The ``flwr`` command of this Python environment, else the one on ``PATH``."""
    beside = Path(sys.executable).parent / "flwr"
    if beside.is_file():
        return str(beside)
    found = shutil.which("flwr")
    if found is None:
        raise SubmitError("the flwr command is not installed (pip install 'flwr>=1.39,<1.40')",
                          EXIT_NOT_SUBMITTED)
    return found


class FlwrCli:
    """Flower's command line (``flwr run/ls/log/stop``) for one SuperLink connection.

    Parameters
    ----------
    connection : str or None
        Name of the SuperLink connection in ``$FLWR_HOME/config.toml``; None
        uses the file's default.
    env : mapping, optional
        Environment of the ``flwr`` processes (default: this one, with
        Flower's network use switched off).
    """

    def __init__(self, connection: str | None = None, *, env: Mapping[str, str] | None = None,
                 flwr: str | None = None, call_timeout: float = 120.0) -> None:
        from .simulation import FLOWER_OFFLINE_ENV

        self.connection = connection
        self.flwr = flwr or find_flwr()
        self.env = {**FLOWER_OFFLINE_ENV, **(os.environ if env is None else env)}
        self.call_timeout = call_timeout

    def _args(self, *args: str) -> list[str]:
        return [self.flwr, *args]

    def _conn(self) -> list[str]:
        return [self.connection] if self.connection else []

    def _call(self, args: list[str]) -> tuple[dict[str, Any] | None, subprocess.CompletedProcess]:
        try:
            proc = subprocess.run(args, env=self.env, capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL, timeout=self.call_timeout)
        except subprocess.TimeoutExpired as exc:
            raise SubmitError(f"{' '.join(args[:2])} did not answer within "
                              f"{self.call_timeout:g} s") from exc
        return _json_payload(proc.stdout), proc

    def start_run(self, app: str | Path, run_config: Sequence[str] = (),
                  federation_config: Sequence[str] = ()) -> int:
        """Submit the app; return the run id (SubmitError with exit status 2 if refused)."""
        args = self._args("run", str(app), *self._conn(), "--format", "json")
        for value in run_config:
            args += ["--run-config", value]
        for value in federation_config:
            args += ["--federation-config", value]
        payload, proc = self._call(args)
        if payload is None or not payload.get("success") or not payload.get("run-id"):
            raise SubmitError(f"run not submitted: {_flwr_error(payload, proc)}",
                              EXIT_NOT_SUBMITTED)
        return int(payload["run-id"])

    def status(self, run_id: int) -> RunStatus:
        """The run's status now."""
        payload, proc = self._call(self._args("ls", *self._conn(), "--run-id", str(run_id),
                                              "--format", "json"))
        runs = (payload or {}).get("runs") or []
        if not (payload or {}).get("success") or not runs:
            raise SubmitError(f"could not read the status of run {run_id}: "
                              f"{_flwr_error(payload, proc)}")
        run = runs[0]
        return RunStatus(run_id=int(run.get("run-id", run_id)), status=str(run.get("status", "")),
                         details=str(run.get("status-details", "") or ""),
                         elapsed=float(run.get("elapsed", 0.0) or 0.0), raw=run)

    def stop(self, run_id: int) -> str:
        """``flwr stop``; return '' on success, else Flower's reason."""
        try:
            payload, proc = self._call(self._args("stop", str(run_id), *self._conn(),
                                                  "--format", "json"))
        except SubmitError as exc:
            return str(exc)
        return "" if (payload or {}).get("success") else _flwr_error(payload, proc)

    def stream_log(self, run_id: int) -> subprocess.Popen:
        """``flwr log ID --stream``: it ends when the SuperLink has finished the run."""
        return subprocess.Popen(self._args("log", str(run_id), *self._conn(), "--stream"),
                                env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1)

    def address(self) -> str | None:
        """The connection's SuperLink address from ``$FLWR_HOME/config.toml``.

        '' for a local simulation connection (no address), None when unknown.
        """
        import tomllib

        home = self.env.get("FLWR_HOME") or str(Path.home() / ".flwr")
        try:
            config = tomllib.loads((Path(home) / "config.toml").read_text(encoding="utf-8"))
            links = config["superlink"]
            name = self.connection or links["default"]
            return str(links[name].get("address") or "")
        except (OSError, KeyError, TypeError, AttributeError, tomllib.TOMLDecodeError):
            return None


# -- the run config, checked here -------------------------------------------------------------
def check_run_config(app: str | Path, run_config: Sequence[str], *, validate: bool = True
                     ) -> dict[str, Any] | None:
    """The run config the ServerApp will get, validated; None when ``app`` is not fedcluster.

    With ``validate=False`` nothing is checked (None when the overrides do not fuse).

    Raises
    ------
    SubmitError
        With exit status 2: the overrides do not parse, name a key the app does
        not have, or give a value fedcluster refuses.
    """
    import tomllib

    from flwr.common.config import flatten_dict, get_fused_config_from_dir, parse_config_args

    from .config import INIT_METHODS, ConfigError, RunConfig

    pyproject = Path(app) / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None  # flwr run says what is wrong with the app
    components = project.get("tool", {}).get("flwr", {}).get("app", {}).get("components", {})
    if components.get("serverapp") != SERVER_APP:
        return None
    try:
        overrides = parse_config_args(list(run_config) or None)
        defaults = flatten_dict(project["tool"]["flwr"]["app"].get("config", {}))
        unknown = sorted(set(overrides) - set(defaults))
        if unknown:
            raise ValueError(f"unknown setting{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(repr(k) for k in unknown)} (the app's settings: "
                             f"{', '.join(defaults)})")
        fused = get_fused_config_from_dir(Path(app), overrides)
    except Exception as exc:  # noqa: BLE001 - ValueError, click's format error
        if not validate:
            return None
        message = getattr(exc, "message", None) or str(exc)
        raise SubmitError(f"invalid run configuration: {one_line(message)}",
                          EXIT_NOT_SUBMITTED) from None
    if not validate:
        return dict(fused)
    checked = dict(fused)
    if str(checked.get("init", "")) not in INIT_METHODS:
        # An initial-centroid file lives where the ServerApp runs: not checked here.
        checked["init"] = INIT_METHODS[0]
    try:
        RunConfig.from_mapping(checked)
    except ConfigError as exc:
        raise SubmitError(one_line(str(exc)), EXIT_NOT_SUBMITTED) from None
    return dict(fused)


def resume_run_config(run_config: Sequence[str], resume: str) -> list[str]:
    """``run_config`` with ``resume-from`` set to ``resume``, and ``out-dir`` too unless given.

    ``resume`` is the directory of the interrupted run's ``checkpoint.json``
    (its ``out-dir``) as the ServerApp sees it; the resumed run writes its
    files there unless the overrides name another ``out-dir``.

    Raises
    ------
    SubmitError
        With exit status 2: ``resume`` is empty or holds a double quote or a
        backslash (it travels as a TOML string).
    """
    from flwr.common.config import parse_config_args

    if not resume or '"' in resume or "\\" in resume:
        raise SubmitError(f"--resume {resume!r}: give the run's out-dir, a path without "
                          "quotes or backslashes", EXIT_NOT_SUBMITTED)
    try:
        given = parse_config_args(list(run_config) or None)
    except Exception:  # noqa: BLE001 - the full check below names the problem
        given = {}
    extra = f'resume-from="{resume}"'
    if "out-dir" not in given:
        extra += f' out-dir="{resume}"'
    return [*run_config, extra]


# -- following a run -----------------------------------------------------------------------
class _LogPump:
    """Forward a ``flwr log`` process's output, line by line, to ``out``.

    Colour codes (the run's Flower lines carry them) go only to a terminal.
    """

    def __init__(self, proc: subprocess.Popen, out: TextIO) -> None:
        self.proc = proc
        self.thread = threading.Thread(target=self._pump, args=(out,), daemon=True)
        self.thread.start()

    def _pump(self, out: TextIO) -> None:
        assert self.proc.stdout is not None
        colour = use_colour(out)
        for line in self.proc.stdout:
            out.write(line if colour else _ANSI.sub("", line))
            out.flush()

    def wait(self, deadline: float | None) -> bool:
        """Wait for the process to end; False if ``deadline`` came first."""
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            try:
                self.proc.wait(timeout=1.0 if left is None else min(1.0, left))
            except subprocess.TimeoutExpired:
                continue
            self.thread.join(timeout=5)
            return True

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.thread.join(timeout=5)


def _wait_finished(cli: FlwrCli, run_id: int, deadline: float | None, poll: float,
                   out: TextIO, *, report: bool, tries: int = 5) -> RunStatus | None:
    """Poll the run's status until it is finished (None if ``deadline`` came first).

    ``tries`` consecutive failed polls mean the SuperLink is lost.
    """
    last, failures = "", 0
    started = time.monotonic()
    while True:
        try:
            status = cli.status(run_id)
            failures = 0
        except SubmitError as exc:
            failures += 1
            if failures >= tries:
                raise SubmitError(f"lost the SuperLink while waiting for run {run_id} "
                                  f"({exc}); it may still be running: flwr ls --run-id "
                                  f"{run_id} {cli.connection or ''}".rstrip()) from None
            status = None
        if status is not None:
            if report and status.status != last:
                out.write(f"fedcluster: run {run_id}: {status.status} "
                          f"({time.monotonic() - started:.0f} s)\n")
                out.flush()
                last = status.status
            if status.finished:
                return status
        if deadline is not None and time.monotonic() >= deadline:
            return None
        pause = poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic()))
        time.sleep(pause)


def _model_check(cli: FlwrCli, run_config: Mapping[str, Any] | None, submitted_at: float
                 ) -> tuple[str, Path | None, str]:
    """(why the run's model is missing or '', its path if readable here, where it is).

    The model is looked for only where this machine can see the ServerApp's
    files: a SuperLink on loopback (or a local simulation connection), an
    absolute ``out-dir`` that is a directory here. A SuperLink in a container
    with its Control API published on loopback writes inside the container: its
    ``out-dir`` (``/results``) is no directory here, so it is only named.
    """
    if run_config is None:
        return "", None, ""
    out_dir = Path(str(run_config.get("out-dir", "results")))
    model = out_dir / "model.pb"
    address = cli.address()
    local = address == "" or (address is not None and address.startswith(_LOOPBACK))
    if not (local and out_dir.is_absolute() and out_dir.is_dir()):
        return "", None, f"{model} where the ServerApp runs"
    try:
        written = model.stat().st_mtime
    except OSError:
        return f"it wrote no {model}", None, ""
    if written < submitted_at - 2.0:
        return f"{model} is older than the run (the run wrote no new model)", None, ""
    return "", model, str(model)


@dataclass
class SubmitResult:
    """What :func:`submit_run` found; ``code`` is the exit status, ``message`` the last line."""

    code: int
    message: str
    run_id: int | None = None
    status: RunStatus | None = None
    model: Path | None = None


def submit_run(
    app: str | Path = ".",
    connection: str | None = None,
    run_config: Sequence[str] = (),
    *,
    federation_config: Sequence[str] = (),
    timeout: float | None = None,
    stream: bool = True,
    check: bool = True,
    poll: float = 3.0,
    env: Mapping[str, str] | None = None,
    out: TextIO | None = None,
) -> SubmitResult:
    """Submit the app to a SuperLink and follow the run to its end.

    Parameters
    ----------
    app : path
        The app directory (its ``pyproject.toml``), as for ``flwr run``.
    connection : str, optional
        SuperLink connection name; default: the Flower config's default.
    run_config : sequence of str
        ``-c`` overrides, each as ``flwr run`` takes them (``'k=5 lr=0.5'``).
    federation_config : sequence of str
        ``--federation-config`` overrides for a simulation connection.
    timeout : float, optional
        Seconds from submission; a run still going then is stopped (exit 1).
    stream : bool
        Stream the run's log (else print each change of its status).
    check : bool
        Check the run config here before submitting (fedcluster apps only).
    poll : float
        Seconds between two status reads.
    env : mapping, optional
        Environment of the ``flwr`` processes (``FLWR_HOME`` names the config).
    out : text stream
        Where the log and progress go (default: standard output).
    """
    out = out or sys.stdout
    app = Path(app).expanduser().resolve()
    run_id: int | None = None
    log: _LogPump | None = None
    old_term = None
    if threading.current_thread() is threading.main_thread():
        old_term = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        fused = check_run_config(app, run_config, validate=check)
        cli = FlwrCli(connection, env=env)
        submitted_at = time.time()
        started = time.monotonic()
        deadline = None if not timeout else started + timeout
        run_id = cli.start_run(app, run_config, federation_config)
        out.write(f"fedcluster: submitted run {run_id}"
                  f"{f' to {connection}' if connection else ''}\n")
        out.flush()

        status: RunStatus | None = None
        if stream:
            log = _LogPump(cli.stream_log(run_id), out)
            if log.wait(deadline):
                log = None
                # The stream ends once the run is finished, or when the SuperLink is lost.
                status = _wait_finished(cli, run_id, deadline, poll, out, report=False)
        else:
            status = _wait_finished(cli, run_id, deadline, poll, out, report=True)

        if status is None:  # the deadline came first
            if log is not None:
                log.close()
                log = None
            refused = cli.stop(run_id)
            final = _final_status(cli, run_id)
            what = (f"stopped it ({final.status})" if final is not None and final.finished
                    else f"flwr stop: {refused}" if refused else "asked the SuperLink to stop it")
            return SubmitResult(EXIT_FAILED, f"run {run_id} did not finish within "
                                f"{timeout:g} s; {what}", run_id, final)

        elapsed = time.monotonic() - started
        if status.outcome == "completed":
            problem, model, where = _model_check(cli, fused, submitted_at)
            if problem:
                return SubmitResult(EXIT_FAILED, f"run {run_id} completed but {problem}",
                                    run_id, status)
            where = f"; model: {where}" if where else ""
            return SubmitResult(EXIT_COMPLETED, f"run {run_id} completed in {elapsed:.0f} s"
                                f"{where}", run_id, status, model)
        reason = status.reason()
        if status.outcome == "stopped":
            text = f"run {run_id} was stopped" + (f": {reason}" if reason else "")
        else:
            text = f"run {run_id} {status.outcome or 'ended'}: " + (
                reason or f"status {status.status}, no details (see the log above)")
        return SubmitResult(EXIT_FAILED, text, run_id, status)
    except SubmitError as exc:
        return SubmitResult(exc.code, str(exc), run_id)
    except KeyboardInterrupt as exc:
        return _interrupted(run_id, log, connection, env, terminated=isinstance(exc, Terminated))
    finally:
        if log is not None:
            log.close()
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)


def _final_status(cli: FlwrCli, run_id: int, wait: float = 20.0) -> RunStatus | None:
    """The status once the run has finished, waiting at most ``wait`` s (None if unknown)."""
    try:
        return _wait_finished(cli, run_id, time.monotonic() + wait, 1.0, sys.stdout,
                              report=False, tries=2)
    except SubmitError:
        return None


def _interrupted(run_id: int | None, log: _LogPump | None, connection: str | None,
                 env: Mapping[str, str] | None, *, terminated: bool = False) -> SubmitResult:
    """Ctrl-C or SIGTERM: stop the run (if it was submitted) and say so."""
    code, what = (EXIT_TERMINATED, "terminated") if terminated else (EXIT_INTERRUPTED,
                                                                      "interrupted")
    try:
        if log is not None:
            log.close()
        if run_id is None:
            return SubmitResult(code, f"{what} before the run was submitted "
                                "(flwr ls lists the runs, if one was)")
        cli = FlwrCli(connection, env=env)
        refused = cli.stop(run_id)
        if refused:
            final = _final_status(cli, run_id, wait=3.0)
            if final is not None and final.finished:
                return SubmitResult(code, f"{what}; run {run_id} had already ended "
                                    f"({final.status})", run_id, final)
            return SubmitResult(code, f"{what}; could not stop run {run_id}: {refused}", run_id)
        return SubmitResult(code, f"{what}; stopped run {run_id}", run_id)
    except KeyboardInterrupt:
        where = f"; run {run_id} may still be running (flwr stop {run_id})" if run_id else ""
        return SubmitResult(code, f"{what} again{where}", run_id)


# -- command line ------------------------------------------------------------------------------
def submit(app: str | Path = ".", connection: str | None = None,
           run_config: Sequence[str] = (), *, federation_config: Sequence[str] = (),
           timeout: float | None = None, stream: bool = True, check: bool = True,
           poll: float = 3.0, env: Mapping[str, str] | None = None,
           out: TextIO | None = None, err: TextIO | None = None, verbose: bool = False) -> int:
    """:func:`submit_run`, the model's summary, then its one-line verdict; return the exit status.

    The verdict is the last line: ``fedcluster: run N completed ...`` on
    standard output, or ``fedcluster: error: ...`` on standard error. The
    summary lists the settings that differ from the defaults unless the
    streamed log has (the ServerApp logs them); ``verbose``: every setting.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    result = submit_run(app, connection, run_config, federation_config=federation_config,
                        timeout=timeout, stream=stream, check=check, poll=poll, env=env, out=out)
    if result.code == EXIT_COMPLETED and result.model is not None:
        try:
            from .config import RunConfig
            from .options import setting_defaults
            from .server.artifacts import read_model
            from .server.presentation import format_result

            summary = format_result(read_model(result.model), settings=verbose or not stream,
                                    defaults=None if verbose else setting_defaults(RunConfig))
            out.write("\n" + summary + "\n")
        except Exception as exc:  # noqa: BLE001 - the run is done; the summary is a bonus
            out.write(f"(could not read {result.model}: {exc})\n")
    out.flush()
    if result.code == EXIT_COMPLETED:
        out.write(f"fedcluster: {result.message}\n")
        out.flush()
    else:
        err.write(f"fedcluster: error: {result.message}\n")
        err.flush()
    return result.code


def configure_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``submit``'s arguments to ``parser`` and bind :func:`submit_command` as ``func``."""
    parser.add_argument("app", nargs="?", default=".",
                        help="the app directory, as for flwr run (default: .)")
    parser.add_argument("connection", nargs="?", default=None,
                        help="SuperLink connection in $FLWR_HOME/config.toml "
                             "(default: its [superlink] default)")
    parser.add_argument("-c", "--run-config", action="append", default=[], metavar="CONFIG",
                        help="run-config overrides passed to flwr run, e.g. "
                             "-c 'k=15 min-nodes=3 out-dir=\"/abs/results\"' (repeatable)")
    parser.add_argument("--resume", default=None, metavar="DIR",
                        help="continue the interrupted run whose checkpoint.json is in DIR (its "
                             "out-dir, a path where the ServerApp runs), with the settings that "
                             "began it; the same as -c 'resume-from=\"DIR\" out-dir=\"DIR\"'")
    parser.add_argument("--federation-config", action="append", default=[], metavar="CONFIG",
                        help="passed to flwr run (simulation connections only; repeatable)")
    parser.add_argument("--timeout", type=float, default=0.0, metavar="SECONDS",
                        help="stop the run (flwr stop) and fail if it has not finished this "
                             "many seconds after submission (default: 0, wait for ever)")
    parser.add_argument("--no-stream", dest="stream", action="store_false",
                        help="print each change of the run's status instead of its log")
    parser.add_argument("--no-check", dest="check", action="store_false",
                        help="submit without checking the run config here first")
    parser.add_argument("--poll", type=float, default=3.0, metavar="SECONDS",
                        help="seconds between two reads of the run's status (default: 3)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="list every setting in the summary (by default: those that differ "
                             "from the defaults, once: in the streamed log, else in the summary)")
    parser.set_defaults(func=submit_command)
    return parser


def add_submit_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``submit`` subcommand of ``fedcluster`` (``args.func(args)`` returns the exit status)."""
    return configure_parser(subparsers.add_parser(
        "submit", help="run the app on a SuperLink and exit with the run's outcome",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Submit the app to a SuperLink (flwr run), stream its log, wait for the "
        "run's final status and exit with it:\n"
        "  0    the run completed (and wrote a new model.pb, when out-dir is on this machine)\n"
        "  1    the run failed, was stopped, timed out (it is then stopped) or was lost\n"
        "  2    nothing was submitted (invalid run config, no SuperLink, unknown connection)\n"
        "  130  interrupted (Ctrl-C stops the run first; 143 for SIGTERM)\n"
        "The last line says which, and why."))


def submit_command(args: argparse.Namespace) -> int:
    """Run ``submit`` from parsed arguments."""
    if args.timeout < 0 or args.poll <= 0:
        print("fedcluster: error: --timeout must be >= 0 and --poll > 0", file=sys.stderr)
        return EXIT_NOT_SUBMITTED
    run_config = args.run_config
    if args.resume is not None:
        try:
            run_config = resume_run_config(run_config, args.resume)
        except SubmitError as exc:
            print(f"fedcluster: error: {exc}", file=sys.stderr)
            return exc.code
    return submit(args.app, args.connection, run_config,
                  federation_config=args.federation_config, timeout=args.timeout or None,
                  stream=args.stream, check=args.check, poll=args.poll, verbose=args.verbose)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fedcluster.submit``: the same as ``fedcluster submit``."""
    parser = configure_parser(argparse.ArgumentParser(
        prog="fedcluster submit", description="Run the app on a SuperLink and exit with the "
        "run's outcome."))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
