"""The container deployment: the image, docker-compose.yml and deploy/, with real containers.

The image is built without a registry (tests/harness/docker_build.py: a debootstrap
base and wheels from the host, cached by content hash); every compose project
runs in a temporary copy of the compose files, under its own project name, and
is taken down afterwards. Without a Docker engine these tests skip and say why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import tomllib

import numpy as np
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from harness.docker_build import REPO
from harness.docker_federation import ComposeProject, container_uid, copy_project, require_image
from harness.inprocess import run_on_files
from harness.localdeploy import RECONNECTED, free_port
from fedcluster.cli import main as fedcluster_main
from fedcluster.server.artifacts import read_model

NODE_ID = re.compile(r"SuperNode ID: (\d+)")


# -- static checks (fast) ------------------------------------------------------------

def test_image_pins_every_dependency():
    """deploy/requirements.txt pins, exactly, every dependency pyproject.toml names (and the dp
    extra's: a ServerApp in the image accounts DP runs)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = {}
    for line in (REPO / "deploy" / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            assert [s.operator for s in req.specifier] == ["=="], f"not an exact pin: {line}"
            pins[canonicalize_name(req.name)] = next(iter(req.specifier)).version
    for text in project["dependencies"] + project["optional-dependencies"]["dp"]:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pins, f"deploy/requirements.txt lacks {req.name} (pyproject.toml: {text})"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"deploy/requirements.txt pins {req.name}=={pins[name]}, pyproject.toml wants {text}"


def test_compose_files_are_consistent():
    """Every SuperNode has its own read-only data folder and node config; the network is private."""
    base = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = base["services"]
    nodes = [name for name in services if name.startswith("supernode-")]
    assert len(nodes) == 3
    mounts = [services[n]["volumes"][0] for n in nodes]
    assert len(set(mounts)) == 3 and all(m.endswith(":/data:ro") for m in mounts)
    assert len({" ".join(services[n]["command"]) for n in nodes}) == 3
    assert base["networks"]["federation"]["internal"] is True
    for overlay in ("compose.tls.yml", "compose.auth.yml"):
        extra = yaml.safe_load((REPO / "deploy" / overlay).read_text())["services"]
        for name, service in extra.items():
            if "command" in service and name != "register":
                assert "--insecure" not in service["command"], (overlay, name)
    edge = yaml.safe_load((REPO / "deploy" / "supernode.yml").read_text())["services"]["supernode"]
    assert any(arg.startswith("--root-certificates") for arg in edge["command"])
    for script in ("make-certs.sh", "make-node-key.sh"):
        assert (REPO / "deploy" / script).stat().st_mode & 0o111, f"deploy/{script} is not executable"


# -- real containers (slow) ----------------------------------------------------------

@pytest.fixture(scope="module")
def image():
    return require_image()


@pytest.mark.slow
def test_offline_build_script_tags_the_image(image):
    """The README's route without a registry: deploy/build-offline-image.sh tags this tree's image
    (found by its content hash, so nothing is rebuilt) as fedcluster:latest, which compose uses."""
    def image_id(ref: str) -> str | None:
        done = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", ref],
                              capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else None

    before = image_id("fedcluster:latest")
    done = subprocess.run(["bash", str(REPO / "deploy" / "build-offline-image.sh")],
                          env={**os.environ, "PYTHON": sys.executable}, capture_output=True,
                          text=True, timeout=1800)
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.strip().splitlines()[-1] == f"fedcluster:latest is {image}"
        assert image_id("fedcluster:latest") == image_id(image) is not None
    finally:
        if before is None:  # leave the machine's tags as they were
            subprocess.run(["docker", "image", "rm", "fedcluster:latest"], capture_output=True)
        elif before != image_id("fedcluster:latest"):
            subprocess.run(["docker", "tag", before, "fedcluster:latest"], capture_output=True)


def demo_files(project_dir):
    """The demo's node-N/data.npy, which SuperNode N reads."""
    return [project_dir / "deploy" / "demo-data" / f"node-{i}" / "data.npy" for i in (1, 2, 3)]


@pytest.mark.slow
def test_compose_demo_equals_simulation(image, tmp_path, capsys):
    """`compose up` runs the demo to the end; ./results holds the model a simulation gives
    (the in-process run of the nodes' files, harness.inprocess.run_on_files, which is a
    simulation's model)."""
    directory = copy_project(tmp_path / "project")
    settings = {"algorithm": "dwf", "k": 15, "num-server-rounds": 6, "local-steps": 2, "lr": 0.9,
                "momentum": 0.1, "seed": 4, "tol": 1e-4}
    env = {"FEDCLUSTER_ALGORITHM": "dwf", "FEDCLUSTER_K": "15", "FEDCLUSTER_ROUNDS": "6",
           "FEDCLUSTER_RUN_CONFIG": "local-steps=2 lr=0.9 momentum=0.1 seed=4 tol=0.0001"}
    with ComposeProject(directory, image, env=env) as project:
        project.up()
        assert project.wait("job", timeout=400) == 0, project.logs()
        log = project.logs("job")
        model_path = directory / "results" / "model.pb"
        assert model_path.is_file(), log
        assert model_path.stat().st_uid == container_uid()  # the host user's file, not root's
        assert "fedcluster model" in log and "round 1/6" in log  # streamed log and summary
        deployed = read_model(model_path)
        project.down()

        # A second `up` (with the compose defaults) reuses the data and runs again.
        project.env.update({"FEDCLUSTER_RUN_CONFIG": "", "FEDCLUSTER_ROUNDS": "20"})
        project.up()
        assert project.wait("job", timeout=400) == 0, project.logs()
        assert "keeping the partitions" in project.logs("demo-data")
        again = read_model(model_path)
        assert again.created > deployed.created and again.settings["num-server-rounds"] == 20

    reference = run_on_files({**settings, "min-nodes": 3}, demo_files(directory))
    assert deployed.algorithm == reference.algorithm == "dwf"
    assert deployed.rounds == reference.rounds
    np.testing.assert_allclose(deployed.centroids, reference.centroids, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(deployed.counts, reference.counts)
    assert deployed.n_points == 5000
    assert all(r.clients_answered == 3 for r in deployed.history)

    capsys.readouterr()
    assert fedcluster_main(["inspect", str(model_path)]) == 0
    assert "algorithm      dwf" in capsys.readouterr().out


def make_secrets(directory, names):
    """CA, SuperLink certificate and node keys with deploy/'s scripts, owned by the container user."""
    for tool in ("openssl", "ssh-keygen"):
        if shutil.which(tool) is None:
            pytest.skip(f"deploy/make-certs.sh and make-node-key.sh need {tool}, which is missing")
    subprocess.run([str(directory / "deploy" / "make-certs.sh")], check=True, capture_output=True)
    for name in names:
        subprocess.run([str(directory / "deploy" / "make-node-key.sh"), name], check=True,
                       capture_output=True)
    if os.getuid() == 0:  # the files of the user the containers run as, as on a real host
        for sub in ("certs", "keys"):
            subprocess.run(["chown", "-R", f"{container_uid()}:{container_uid()}",
                            str(directory / "deploy" / sub)], check=True)


def edge_supernode(directory, image, name, data_dir, fleet_port) -> ComposeProject:
    """deploy/supernode.yml as on an edge machine: reaches the SuperLink's published Fleet port.

    The test's override puts it on the host's network (the coordinator's address
    is then 127.0.0.1) and turns off its restart policy.
    """
    override = directory / "deploy" / f"test-edge-{name}.yml"
    override.write_text("services:\n  supernode:\n    network_mode: host\n    restart: \"no\"\n")
    return ComposeProject(directory / "deploy", image, files=("supernode.yml", override.name), env={
        "FEDCLUSTER_SUPERLINK_FLEET": f"127.0.0.1:{fleet_port}",
        "FEDCLUSTER_NODE_NAME": name,
        "FEDCLUSTER_NODE_DATA": str(data_dir),
        "FEDCLUSTER_NODE_FILE": "points.npy",
        "FEDCLUSTER_NODE_KEY": f"./keys/{name}",
        "FEDCLUSTER_CA_CERT": "./certs/ca.crt",
        # On the host's network the SuperNodes share its ports: each its own.
        "FEDCLUSTER_NODE_RUNTIME_PORT": str(free_port()),
    })


@pytest.mark.slow
def test_tls_and_supernode_auth(image, tmp_path):
    """With TLS and SuperNode authentication a registered edge SuperNode takes part, an unregistered one is refused.

    The run aggregates securely: the server's totals count the registered node's rows."""
    directory = copy_project(tmp_path / "project")
    make_secrets(directory, ["node-1", "node-2", "node-3", "edge-ok", "edge-unknown"])
    rows = {"edge-ok": 250, "edge-unknown": 120}
    for name, n in rows.items():
        (tmp_path / name).mkdir()
        points = np.random.default_rng(n).uniform(2e5, 8e5, size=(n, 2))
        np.save(tmp_path / name / "points.npy", points)
    fleet_port = free_port()
    env = {"FEDCLUSTER_FLEET_BIND": "127.0.0.1", "FEDCLUSTER_FLEET_PORT": str(fleet_port),
           "FEDCLUSTER_CONTROL_PORT": str(free_port()), "FEDCLUSTER_MIN_NODES": "4",
           "FEDCLUSTER_ROUNDS": "1",
           # Secure aggregation across the TLS deployment (the sum form: one local step, a
           # start in declared bounds); its totals keep the counts exact.
           "FEDCLUSTER_RUN_CONFIG": 'tol=0.0 node-wait-timeout=120 secure-aggregation=true '
                                    'local-steps=1 init="random" data-bounds="0:1e6"'}
    files = ("docker-compose.yml", "deploy/compose.tls.yml", "deploy/compose.auth.yml")
    with ComposeProject(directory, image, files=files, env=env) as project:
        project.up("superlink", "register", "supernode-1", "supernode-2", "supernode-3")
        assert project.wait("register", timeout=120) == 0, project.logs("register")
        done = project.compose("run", "--rm", "-T", "--no-deps", "register",
                               "fedcluster-register", "/keys/edge-ok.pub")
        assert "registered" in done.stdout, done.stdout + done.stderr

        with edge_supernode(directory, image, "edge-ok", tmp_path / "edge-ok", fleet_port) as ok, \
             edge_supernode(directory, image, "edge-unknown", tmp_path / "edge-unknown",
                            fleet_port) as unknown:
            ok.up()
            unknown.up()
            refused = unknown.wait("supernode", timeout=120)
            unknown_log = unknown.container_logs("supernode")
            assert refused != 0, unknown_log
            assert "SuperNode ID" not in unknown_log
            ok_id = int(NODE_ID.search(ok.wait_for_log("supernode", "SuperNode ID", 120)).group(1))

            project.up("job")
            assert project.wait("job", timeout=400) == 0, project.logs() + ok.logs()
            model = read_model(directory / "results" / "model.pb")

    assert model.n_points == 5000 + rows["edge-ok"]  # the unknown node's rows never counted
    train = [r for r in model.history if r.phase == "train"]
    assert len(train) == 1
    for record in model.history:
        assert record.clients_answered == 4 and ok_id in record.participants, record


def test_image_accounts_dp(image):
    """The image's ServerApp can run DP: its accountant (the dp extra) calibrates as here."""
    from fedcluster.privacy.accountant import calibrate

    code = "from fedcluster.privacy.accountant import calibrate; print(repr(calibrate(1.0, 1e-5, 5)))"
    done = subprocess.run(["docker", "run", "--rm", "--network", "none", image, "python3", "-c", code],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert float(done.stdout) == calibrate(1.0, 1e-5, 5)


#: Rounds of a run that loses a node after round 2: the rounds that still ask it (a killed
#: node's until its heartbeat expires, about a minute) and at least one after.
LOSS_ROUNDS = 5


def lose_node_mid_run(image, tmp_path, how: str, round_timeout: int):
    """Run LOSS_ROUNDS DWF rounds and take supernode-3 away (``how``: compose stop or kill)
    after round 2.

    Returns the model, node 3's id and the job's log; prints the history.
    """
    directory = copy_project(tmp_path / "project")
    env = {"FEDCLUSTER_ROUNDS": str(LOSS_ROUNDS),
           "FEDCLUSTER_RUN_CONFIG": f"tol=0.0 round-timeout={round_timeout}"}
    with ComposeProject(directory, image, env=env) as project:
        project.up()
        node3 = int(NODE_ID.search(project.wait_for_log("supernode-3", "SuperNode ID", 120)).group(1))
        project.wait_for_log("job", f"round 2/{LOSS_ROUNDS}", 300)
        project.compose(*(["stop", "--timeout", "20"] if how == "stop" else ["kill"]), "supernode-3")
        assert project.wait("job", timeout=600) == 0, project.logs()
        model = read_model(directory / "results" / "model.pb")
        log = project.logs("job")
    print(f"node 3 = {node3}", *model.history, sep="\n")

    train = [r for r in model.history if r.phase == "train"]
    assert model.rounds == len(train) == LOSS_ROUNDS
    lacking = [r.round for r in train if node3 not in r.participants]
    assert lacking, model.history
    first = lacking[0]
    # Rounds before the loss had all three; every round from the first gap on lacks node 3,
    # and the other two answered in each of them.
    assert first >= 3 and lacking == list(range(first, LOSS_ROUNDS + 1)), lacking
    assert all(len(r.participants) == 3 for r in train if r.round < first)
    assert all(r.clients_answered == 2 for r in train if r.round >= first), train
    # The last rounds no longer asked it; the final score came from the two that were left.
    assert train[-1].clients_sampled == 2
    assert model.n_points < 5000
    return model, node3, log, train[first - 1:]


@pytest.mark.slow
def test_stopped_supernode_leaves_the_run_going(image, tmp_path):
    """A SuperNode container stopped mid-run (SIGTERM) leaves at once; the run ends with the others."""
    _, node3, log, after = lose_node_mid_run(image, tmp_path, "stop", round_timeout=30)
    # If the round in flight had asked it, its message came back as an error reply
    # (Flower's NODE_UNAVAILABLE) rather than by waiting out the round timeout.
    for r in after:
        assert r.clients_sampled - r.clients_answered == r.clients_rejected, r
    if after[0].clients_rejected:
        assert f"rejected node {node3}: error reply (code 5)" in log


@pytest.mark.slow
def test_killed_supernode_leaves_the_run_going(image, tmp_path):
    """A SuperNode container killed mid-run (SIGKILL): rounds wait out the round timeout for it
    until its heartbeat expires (about a minute), then go on without asking it."""
    _, node3, log, after = lose_node_mid_run(image, tmp_path, "kill", round_timeout=40)
    silent = [r for r in after if r.clients_sampled == 3]
    assert silent, after  # asked, after its death, at least once
    assert f"no reply within 40 s from node(s) [{node3}]" in log \
        or f"rejected node {node3}: error reply (code 5)" in log, log


def container_state(container: str) -> tuple[bool, int]:
    """(running, restart count) of a container."""
    done = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}} {{.RestartCount}}",
                           container], capture_output=True, text=True, check=True)
    running, restarts = done.stdout.split()
    return running == "true", int(restarts)


@pytest.mark.slow
def test_killed_superlink_container_resumes_the_run(image, tmp_path):
    """`docker kill` of the SuperLink after round 2 of 4: the job fails loudly, the SuperNode
    containers wait (neither exit nor restart), the SuperLink started again knows them (its
    database volume), and the job with FEDCLUSTER_RESUME=1, started at once, waits for them to
    reconnect and ends with the uninterrupted run's centroids, bit for bit, and the same
    participants (the uninterrupted run: the in-process one of the nodes' files under their
    ids, harness.inprocess.run_on_files)."""
    from fedcluster.server.checkpoint import read_checkpoint

    directory = copy_project(tmp_path / "project")
    results = directory / "results"
    settings = {"algorithm": "dwf", "k": 15, "num-server-rounds": 4, "min-nodes": 3,
                "tol": 0.0, "momentum": 0.3, "seed": 4}
    env = {"FEDCLUSTER_ROUNDS": "4",
           "FEDCLUSTER_RUN_CONFIG": "tol=0.0 momentum=0.3 seed=4 round-timeout=120"}
    job = ("up", "--detach", "--no-build", "--no-deps", "--force-recreate", "job")
    with ComposeProject(directory, image, env=env) as project:
        project.up()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if (results / "checkpoint.json").exists():
                _, progress = read_checkpoint(results)
                if progress.round is not None and progress.round >= 2:
                    break
            time.sleep(0.1)
        else:
            raise AssertionError(f"no checkpoint of round 2\n{project.logs()}")
        subprocess.run(["docker", "kill", project.container("superlink")], check=True,
                       capture_output=True)
        assert project.wait("job", timeout=180) == 1, project.logs("job")
        assert "lost the SuperLink" in project.logs("job")
        time.sleep(10)
        nodes = [project.container(f"supernode-{i}") for i in (1, 2, 3)]
        assert all(container_state(c) == (True, 0) for c in nodes), project.logs()
        _, before = read_checkpoint(results)
        assert 2 <= before.round < 4, before

        # Resumed at once: the resumed run waits until every SuperNode, still in its retry
        # back-off, has reconnected and answered.
        project.compose("start", "superlink")
        project.env["FEDCLUSTER_RESUME"] = "1"
        project.compose(*job)
        assert project.wait("job", timeout=600) == 0, project.logs()
        assert f"resuming at restart 0, after round {before.round}" in project.logs("job")
        assert "resume: all 3 clients of the interrupted run answer" in project.logs("job")
        assert all(RECONNECTED in project.container_logs(f"supernode-{i}") for i in (1, 2, 3))
        resumed = read_model(results / "model.pb")
        assert all(container_state(c) == (True, 0) for c in nodes), project.logs()
        ids = [int(NODE_ID.search(project.container_logs(f"supernode-{i}")).group(1))
               for i in (1, 2, 3)]

    reference = run_on_files(settings, demo_files(directory), ids)
    np.testing.assert_array_equal(resumed.centroids, reference.centroids)
    assert resumed.score == reference.score and resumed.rounds == reference.rounds == 4
    assert [(r.round, r.participants) for r in resumed.history] == \
        [(r.round, r.participants) for r in reference.history]
