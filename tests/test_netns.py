"""The multi-host deployment without Docker: SuperLink, SuperNodes and the operator on
separate network hosts (Linux network namespaces on one bridge, each with its own address).

Skips, saying why, where the machine does not allow network namespaces.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

from fedcluster.data import load_dataset, partition_indices, write_partitions
from fedcluster.server.artifacts import read_model
from fedcluster.simulation import FLOWER_OFFLINE_ENV
from harness.inprocess import run_on_files
from harness.localdeploy import BIN, REPO, run_config_text
from harness.netns_hosts import Hosts, netns_problem

pytestmark = pytest.mark.slow

FLEET, CONTROL = 9092, 8000  # each host has its own ports: Flower's defaults


@pytest.fixture
def hosts(tmp_path):
    if problem := netns_problem():
        pytest.skip(f"network namespaces are not available: {problem}")
    with Hosts(["superlink", "node-1", "node-2", "node-3", "operator"], tmp_path) as hosts:
        yield hosts


def test_dwf_across_network_hosts(hosts, tmp_path):
    data = load_dataset("s1")
    parts = partition_indices(len(data.X), 3, "dirichlet:0.5", labels=data.labels, seed=7)
    files = write_partitions(data.X, parts, tmp_path / "parts")
    out = tmp_path / "results"
    env = {**os.environ, **FLOWER_OFFLINE_ENV, "FLWR_HOME": str(tmp_path / "flwr-home"),
           "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")])}
    link = hosts.address("superlink")

    hosts.start("superlink", "superlink", [
        str(BIN / "flower-superlink"), "--insecure",
        "--fleet-api-address", f"{link}:{FLEET}", "--host", link, "--port", str(CONTROL)], env)
    hosts.wait_for_port("operator", link, CONTROL, 60)
    hosts.wait_for_port("node-1", link, FLEET, 60)
    for i, path in enumerate(files, start=1):
        hosts.start(f"node-{i}", f"supernode-{i}", [
            str(BIN / "flower-supernode"), "--insecure", "--superlink", f"{link}:{FLEET}",
            "--node-config", f'data-path="{path}"'], env)

    (tmp_path / "flwr-home").mkdir(exist_ok=True)
    (tmp_path / "flwr-home" / "config.toml").write_text(
        f'[superlink]\ndefault = "net"\n\n[superlink.net]\naddress = "{link}:{CONTROL}"\n'
        "insecure = true\n")
    settings = {"algorithm": "dwf", "k": 15, "num-server-rounds": 5, "local-steps": 2, "lr": 0.8,
                "momentum": 0.2, "seed": 7, "tol": 1e-4, "min-nodes": 3}
    run_config = run_config_text({**settings, "out-dir": str(out)})
    done = hosts.run("operator", [str(BIN / "flwr"), "run", str(REPO), "net", "--stream",
                                  "-c", run_config],
                     env=env, cwd=tmp_path, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr + hosts.logs()
    assert (out / "model.pb").is_file(), done.stdout + hosts.logs()

    # The SuperNodes reached the SuperLink from their own addresses, over the bridge.
    sockets = hosts.run("superlink", ["ss", "-Htn", "state", "established",
                                      "sport", "=", f":{FLEET}"],
                        capture_output=True, text=True).stdout
    peers = set(re.findall(r"\S+:9092\s+\[?(?:::ffff:)?([0-9.]+)\]?:\d+", sockets))
    assert peers == {hosts.address(f"node-{i}") for i in (1, 2, 3)}, sockets

    deployed = read_model(out / "model.pb")
    reference = run_on_files(settings, files)
    assert deployed.algorithm == "dwf" and deployed.rounds == reference.rounds
    assert all(r.clients_answered == 3 for r in deployed.history)
    np.testing.assert_allclose(deployed.centroids, reference.centroids, rtol=0, atol=1e-9)


def test_namespaces_are_removed(tmp_path):
    """Leaving the block removes every namespace, even when the block fails."""
    if problem := netns_problem():
        pytest.skip(f"network namespaces are not available: {problem}")
    with pytest.raises(RuntimeError), Hosts(["a", "b"], tmp_path) as hosts:
        names = list(hosts.namespaces)
        ping = hosts.run("a", [sys.executable, "-c", "print('up')"], capture_output=True, text=True)
        assert ping.stdout.strip() == "up"
        raise RuntimeError("fail inside")
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert names and not any(name in listed for name in names)
