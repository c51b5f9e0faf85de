"""A real Flower deployment on loopback: one SuperLink, SuperNodes, ``flwr run``.

Every process is started in its own session and stopped by its process id
(SuperNodes first, then the SuperLink), together with the SuperExec children
it started. The SuperLink keeps its state in a database file
(``--database``), so that it can be killed and started again with its nodes
and runs (:meth:`LocalDeployment.kill_superlink`, :meth:`LocalDeployment.start_superlink`);
the SuperNodes retry for ever meanwhile (Flower's default: no ``--max-retries``
or ``--max-wait-time``) and go on under the node ids they had.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from fedcluster.simulation import FLOWER_OFFLINE_ENV

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


#: What a SuperNode logs once it reaches a SuperLink again after losing it (Flower 1.39).
RECONNECTED = "Connection successful after"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_config_text(values: dict) -> str:
    """``values`` as the text of ``flwr run -c``: strings quoted, booleans lower-case (TOML)."""
    def toml(value) -> str:
        if isinstance(value, str):
            return f'"{value}"'
        return str(value).lower() if isinstance(value, bool) else str(value)

    return " ".join(f"{key}={toml(value)}" for key, value in values.items())


def wait_for_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group of ``proc`` (it and its SuperExec children), SIGKILL after 20 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def group_members(pgid: int) -> list[int]:
    """The ids of the live processes of process group ``pgid`` (zombies left out), from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            members.append(int(stat.parent.name))
    return sorted(members)


def log_tails(workdir: Path) -> str:
    """The last 4000 characters of every ``*.log`` in `workdir`, one section each."""
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
                     for p in sorted(workdir.glob("*.log")))


class LocalDeployment:
    """SuperLink and SuperNodes as separate processes on 127.0.0.1.

    Parameters
    ----------
    workdir : Path
        Holds the Flower home, the logs and the SuperLink's working directory.
    node_configs : list of str
        One ``--node-config`` string per SuperNode.
    """

    def __init__(self, workdir: Path, node_configs: list[str]) -> None:
        self.workdir = workdir
        self.node_configs = node_configs
        self.home = workdir / "flwr-home"
        self.fleet_port = free_port()
        self.control_port = free_port()
        self.database = workdir / "superlink.db"
        self.superlink_starts = 0
        #: Process groups of killed SuperLinks: whatever is left of them is killed on exit.
        self.killed_groups: list[int] = []
        # The SuperLink and SuperNodes start `flower-superexec` children by name.
        path = os.pathsep.join([str(BIN), os.environ.get("PATH", "")])
        self.env = {**os.environ, **FLOWER_OFFLINE_ENV, "FLWR_HOME": str(self.home), "PATH": path}
        self.superlink: subprocess.Popen | None = None
        self.supernodes: list[subprocess.Popen] = []

    def _start(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        return subprocess.Popen(args, cwd=self.workdir, env=self.env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)

    def __enter__(self) -> LocalDeployment:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "config.toml").write_text(
            '[superlink]\ndefault = "local-deployment"\n\n'
            '[superlink.local-deployment]\n'
            f'address = "127.0.0.1:{self.control_port}"\ninsecure = true\n'
        )
        try:
            self.start_superlink()
            for i, node_config in enumerate(self.node_configs):
                self.supernodes.append(self._start(f"supernode-{i}", [
                    str(BIN / "flower-supernode"), "--insecure",
                    "--superlink", f"127.0.0.1:{self.fleet_port}", "--port", str(free_port()),
                    "--node-config", node_config,
                ]))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def start_superlink(self) -> subprocess.Popen:
        """Start the SuperLink on this deployment's ports and database; wait until it listens.

        Each start logs to its own file (``superlink.log``, ``superlink-2.log``, ...).
        """
        self.superlink_starts += 1
        name = "superlink" if self.superlink_starts == 1 else f"superlink-{self.superlink_starts}"
        self.superlink = self._start(name, [
            str(BIN / "flower-superlink"), "--insecure", "--database", str(self.database),
            "--fleet-api-address", f"127.0.0.1:{self.fleet_port}", "--port", str(self.control_port),
        ])
        wait_for_port(self.fleet_port, 60)
        wait_for_port(self.control_port, 60)
        return self.superlink

    def kill_superlink(self) -> int:
        """SIGKILL the SuperLink process alone, as a crash would; return its process group id.

        Its SuperExec and the ServerApp it runs are left to notice by
        themselves (:func:`group_members` lists who is left of the group).
        """
        assert self.superlink is not None and self.superlink.poll() is None
        os.kill(self.superlink.pid, signal.SIGKILL)
        self.superlink.wait()
        self.killed_groups.append(self.superlink.pid)
        return self.superlink.pid

    def flwr_run(self, run_config: str, timeout: float, app: Path = REPO
                 ) -> subprocess.CompletedProcess:
        """Submit the fedcluster app (or another Flower `app`) and stream its log until the run ends."""
        return subprocess.run(
            [str(BIN / "flwr"), "run", str(app), "local-deployment", "--stream", "-c", run_config],
            cwd=self.workdir, env=self.env, capture_output=True, text=True, timeout=timeout,
        )

    def submit_args(self, *args: str) -> list[str]:
        """The command line of ``fedcluster submit REPO local-deployment ARGS``."""
        return [sys.executable, "-m", "fedcluster.submit", str(REPO), "local-deployment", *args]

    def submit(self, *args: str, timeout: float) -> subprocess.CompletedProcess:
        """``fedcluster submit`` the app with ``args``; wait for its exit status."""
        return subprocess.run(self.submit_args(*args), cwd=self.workdir, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def start_submit(self, *args: str) -> subprocess.Popen:
        """``fedcluster submit`` in the background, SIGINT at its default (Ctrl-C works)."""
        return subprocess.Popen(
            self.submit_args(*args), cwd=self.workdir, env=self.env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def flwr(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """Any ``flwr`` command against this deployment's Flower home."""
        return subprocess.run([str(BIN / "flwr"), *args], cwd=self.workdir, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def stop(self, proc: subprocess.Popen) -> None:
        stop_group(proc)

    def logs(self) -> str:
        return log_tails(self.workdir)

    def node_ids(self) -> list[int]:
        """The ids Flower gave the SuperNodes, in their order (each logs its own, once per
        connection: a SuperNode that reconnects keeps it)."""
        ids = []
        for i in range(len(self.node_configs)):
            text = (self.workdir / f"supernode-{i}.log").read_text(errors="replace")
            found = set(re.findall(r"SuperNode ID: (\d+)", text))
            assert len(found) == 1, f"supernode-{i} logged the ids {found}\n{self.logs()}"
            ids.append(int(found.pop()))
        return ids

    def __exit__(self, *exc) -> None:
        for proc in self.supernodes:
            self.stop(proc)
        if self.superlink is not None:
            self.stop(self.superlink)
        for pgid in self.killed_groups:
            if group_members(pgid):
                with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                    os.killpg(pgid, signal.SIGKILL)
