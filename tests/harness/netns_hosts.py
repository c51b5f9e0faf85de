"""Test hosts in Linux network namespaces: each its own network stack and address.

A switch namespace holds a bridge; every host namespace gets a veth pair whose
other end is a port of that bridge. Nothing is created in the machine's own
namespace and no route leads out, so the hosts reach each other (on a private
/24 of our own) and nothing else. Namespace names carry the creating process's
id: namespaces left by a process that is gone are removed on the next start.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .localdeploy import log_tails, stop_group

PREFIX = "fcnt"
SUBNET = "10.213.7"  # 10.213.7.0/24: exists only inside these namespaces


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def netns_problem() -> str | None:
    """Why network namespaces cannot be made here, or None when they can."""
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    if os.geteuid() != 0:
        return "creating network namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    probe = f"{PREFIX}{os.getpid()}-probe"
    done = _ip("netns", "add", probe, check=False)
    if done.returncode != 0:
        return f"`ip netns add` is not allowed here: {done.stderr.strip()}"
    try:
        veth = _ip("-n", probe, "link", "add", "a0", "type", "veth", "peer", "name", "b0", check=False)
        if veth.returncode != 0:
            return f"veth pairs are not allowed here: {veth.stderr.strip()}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


def remove_stale() -> None:
    """Delete our namespaces whose creating process no longer runs."""
    listed = _ip("netns", "list", check=False).stdout
    for name in re.findall(rf"^({PREFIX}(\d+)-\S+)", listed, flags=re.M):
        ns, pid = name
        if not Path(f"/proc/{pid}").exists():
            _ip("netns", "del", ns, check=False)


class Hosts:
    """Hosts ``names`` on one bridge; ``address(name)`` is each one's IPv4 address.

    Use as a context manager: processes started with :meth:`start` are stopped
    (SIGTERM to their process group, SIGKILL after a grace period) and the
    namespaces deleted on exit, whatever happened inside.
    """

    def __init__(self, names: list[str], workdir: Path) -> None:
        self.names = names
        self.workdir = workdir
        self.tag = f"{PREFIX}{os.getpid()}"
        self.switch = f"{self.tag}-sw"
        self.namespaces: list[str] = []
        self.procs: list[subprocess.Popen] = []

    def ns(self, name: str) -> str:
        return f"{self.tag}-{name}"

    def address(self, name: str) -> str:
        return f"{SUBNET}.{10 + self.names.index(name)}"

    def __enter__(self) -> Hosts:
        remove_stale()
        try:
            self._add(self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            for i, name in enumerate(self.names):
                ns = self.ns(name)
                self._add(ns)
                port = f"p{i}"
                _ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port,
                    "netns", self.switch)
                _ip("-n", self.switch, "link", "set", port, "master", "br0")
                _ip("-n", self.switch, "link", "set", port, "up")
                _ip("-n", ns, "addr", "add", f"{self.address(name)}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _add(self, ns: str) -> None:
        _ip("netns", "add", ns)
        self.namespaces.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")

    def run(self, host: str, args: list[str], **kwargs) -> subprocess.CompletedProcess:
        """Run a command on ``host`` and wait for it."""
        return subprocess.run(["ip", "netns", "exec", self.ns(host), *args], **kwargs)

    def start(self, host: str, log_name: str, args: list[str], env: dict[str, str]
              ) -> subprocess.Popen:
        """Start a long-running command on ``host`` in its own session, logging to a file."""
        log = open(self.workdir / f"{log_name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns(host), *args], cwd=self.workdir,
                                env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.procs.append(proc)
        return proc

    def wait_for_port(self, host: str, address: str, port: int, timeout: float) -> None:
        """Wait until ``address:port`` accepts connections, seen from ``host``."""
        probe = ("import socket,sys\ns=socket.socket()\ns.settimeout(1)\n"
                 "sys.exit(s.connect_ex((sys.argv[1], int(sys.argv[2]))))")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.run(host, [sys.executable, "-c", probe, address, str(port)],
                        capture_output=True).returncode == 0:
                return
            time.sleep(0.5)
        raise TimeoutError(f"{address}:{port} not reachable from {host} after {timeout} s")

    def logs(self) -> str:
        return log_tails(self.workdir)

    def __exit__(self, *exc) -> None:
        try:
            for proc in reversed(self.procs):  # SuperNodes before the SuperLink
                stop_group(proc)
        finally:
            for ns in reversed(self.namespaces):
                _ip("netns", "del", ns, check=False)
            self.namespaces.clear()
