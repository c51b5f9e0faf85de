"""``fedcluster submit``: a deployed run's outcome becomes the exit status.

The fast tests check the pieces (the local run-config check, reading Flower's
JSON, the argument wiring) and a SuperLink that is not there. The slow ones
submit to a real loopback deployment (one SuperLink, four SuperNodes with S1
partitions, shared by the module): a run that completes, an invalid run config
(refused here, and failed by the ServerApp with ``--no-check``), sampling half
of the clients, a timeout and Ctrl-C, both of which stop the run; and a second
federation whose every client fails.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import subprocess
import time

import pytest

from fedcluster.data import load_dataset, partition_indices, write_partitions
from fedcluster.server.artifacts import read_model
from fedcluster.simulation import FLOWER_OFFLINE_ENV
from fedcluster.submit import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NOT_SUBMITTED, RunStatus, SubmitError, _flwr_error, _json_payload, _model_check, add_submit_parser, check_run_config, submit, submit_command
from harness.localdeploy import REPO, LocalDeployment, free_port, run_config_text


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


# -- pieces ------------------------------------------------------------------------------------
def test_an_invalid_value_is_refused_here_in_one_line_naming_the_field():
    with pytest.raises(SubmitError) as info:
        check_run_config(REPO, ["k=15 lr=1.5"])
    assert info.value.code == EXIT_NOT_SUBMITTED
    message = str(info.value)
    assert "\n" not in message and "'lr'" in message and "1.5" in message


def test_an_unknown_setting_is_refused_here():
    with pytest.raises(SubmitError, match="unknown setting 'learning-rate'"):
        check_run_config(REPO, ["learning-rate=0.5"])
    with pytest.raises(SubmitError, match="invalid format"):
        check_run_config(REPO, ["k=abc def"])


def test_the_checked_config_is_the_fused_one():
    fused = check_run_config(REPO, ['k=5 out-dir="/srv/results"', "lr=0.5"])
    assert fused["k"] == 5 and fused["lr"] == 0.5 and fused["out-dir"] == "/srv/results"
    assert fused["algorithm"] == "dwf"  # from [tool.flwr.app.config]
    # An initial-centroid file is on the ServerApp's machine: not looked for here.
    fused = check_run_config(REPO, ['init="/nowhere/centroids.npy"'])
    assert fused["init"] == "/nowhere/centroids.npy"


def test_another_app_is_not_checked(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.flwr.app.components]\nserverapp = "other.server:app"\n'
        "[tool.flwr.app.config]\nlr = 0.1\n")
    assert check_run_config(tmp_path, ["lr=5.0"]) is None


def test_flower_json_and_errors_are_read_through_their_noise():
    out = 'Loading...\n{\n  "success": true,\n  "run-id": "123"\n}\n'
    assert _json_payload(out) == {"success": True, "run-id": "123"}
    assert _json_payload("no json here") is None
    payload = {"success": False, "error-message": (
        "Flower App configuration warnings in '/a/pyproject.toml':\n- Recommended property\n"
        "Using SuperLink: dead (127.0.0.1:9)\n\nConnection to the SuperLink is unavailable.")}
    done = subprocess.CompletedProcess([], 0, json.dumps(payload), "")
    assert _flwr_error(payload, done) == "Connection to the SuperLink is unavailable."


def test_a_failed_status_gives_the_serverapp_error_on_one_line():
    status = RunStatus(7, "finished:failed", "ServerApp failed with exception: invalid run "
                       "configuration:\n  invalid value for 'lr': 1.5")
    assert status.finished and status.outcome == "failed"
    assert status.reason() == ("the ServerApp raised: invalid run configuration: "
                               "invalid value for 'lr': 1.5")
    assert RunStatus(7, "running").outcome == "" and not RunStatus(7, "running").finished
    assert RunStatus(7, "finished:completed", "N/A").reason() == ""


class FakeCli:
    def __init__(self, address):
        self._address = address

    def address(self):
        return self._address


def test_the_model_is_required_only_where_this_machine_sees_it(tmp_path):
    config = {"out-dir": str(tmp_path)}
    model = tmp_path / "model.pb"
    loopback = FakeCli("127.0.0.1:8000")
    assert _model_check(loopback, config, time.time())[0] == f"it wrote no {model}"
    model.write_bytes(b"")
    assert _model_check(loopback, config, time.time() - 1) == ("", model, str(model))
    assert _model_check(FakeCli(""), config, time.time() - 1)[1] == model  # local simulation
    stale = _model_check(loopback, config, time.time() + 60)[0]
    assert "older than the run" in stale
    # Elsewhere (a remote SuperLink, a container's /results, a relative out-dir): only named.
    for cli, out_dir in ((FakeCli("10.0.0.5:8000"), tmp_path), (loopback, tmp_path / "no"),
                         (loopback, "results"), (FakeCli(None), tmp_path)):
        problem, found, where = _model_check(cli, {"out-dir": str(out_dir)}, time.time() + 60)
        assert (problem, found) == ("", None) and where.endswith("model.pb where the ServerApp runs")


def test_the_subcommand_wiring():
    parser = argparse.ArgumentParser(prog="fedcluster")
    add_submit_parser(parser.add_subparsers())
    args = parser.parse_args(["submit", ".", "prod", "-c", "k=5", "-c", "lr=0.5",
                              "--timeout", "60", "--no-stream"])
    assert args.func is submit_command
    assert (args.app, args.connection, args.run_config) == (".", "prod", ["k=5", "lr=0.5"])
    assert (args.timeout, args.stream, args.check) == (60.0, False, True)
    defaults = parser.parse_args(["submit"])
    assert (defaults.app, defaults.connection, defaults.run_config) == (".", None, [])
    assert defaults.stream and defaults.timeout == 0.0


@pytest.mark.parametrize(("flags", "shown"), [
    ({}, None),  # the streamed log named the settings that differ from the defaults
    ({"stream": False}, ["settings other than the defaults (2 of {all})", "  k = 5", "  lr = 0.5"]),
    ({"verbose": True}, ["settings", "  aggregation = 'mean'", "  algorithm = 'dwf'"]),
])
def test_the_summary_after_a_run_names_the_settings_once(tmp_path, monkeypatch, flags, shown):
    import numpy as np

    from fedcluster.config import RunConfig
    from fedcluster.results import RunResult
    from fedcluster.server.artifacts import write_run
    from fedcluster.submit import SubmitResult

    settings = RunConfig.from_mapping({"k": 5, "lr": 0.5}).settings()
    shown = shown and [line.format(all=len(settings)) for line in shown]
    write_run(RunResult(algorithm="dwf", settings=settings, centroids=np.zeros((5, 2)),
                        counts=np.ones(5), score=1.0, n_points=5, rounds=1, converged=True,
                        best_restart=0), tmp_path)
    monkeypatch.setattr("fedcluster.submit.submit_run", lambda *a, **k: SubmitResult(
        0, "run 1 completed in 2 s", 1, model=tmp_path / "model.pb"))
    out = io.StringIO()
    assert submit(REPO, out=out, **flags) == 0
    lines = out.getvalue().splitlines()
    if shown is None:
        assert not [line for line in lines if line.startswith("settings")]
    else:
        start = lines.index(shown[0])
        assert lines[start:start + len(shown)] == shown
        assert len([line for line in lines if line.startswith("settings")]) == 1
    assert lines[-1] == "fedcluster: run 1 completed in 2 s"


def test_the_streamed_log_keeps_its_colour_only_for_a_terminal(monkeypatch):
    from fedcluster.submit import _LogPump

    class Log:
        stdout = iter(["\x1b[92mINFO \x1b[0m:      round 1/2\n"])

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    for out, expected in ((io.StringIO(), "INFO :      round 1/2\n"),
                          (Terminal(), "\x1b[92mINFO \x1b[0m:      round 1/2\n")):
        Log.stdout = iter(["\x1b[92mINFO \x1b[0m:      round 1/2\n"])
        _LogPump(Log(), out).thread.join(timeout=10)
        assert out.getvalue() == expected


def test_an_invalid_run_config_submits_nothing():
    out, err = io.StringIO(), io.StringIO()
    code = submit(REPO, "nowhere", ["lr=1.5"], out=out, err=err)
    assert code == EXIT_NOT_SUBMITTED
    assert err.getvalue().count("\n") == 1
    assert err.getvalue().startswith("fedcluster: error: invalid run configuration: ")


def test_no_superlink_is_a_clear_error(tmp_path):
    home = tmp_path / "flwr-home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[superlink]\ndefault = "gone"\n\n[superlink.gone]\n'
        f'address = "127.0.0.1:{free_port()}"\ninsecure = true\n')
    env = {**os.environ, **FLOWER_OFFLINE_ENV, "FLWR_HOME": str(home)}
    out, err = io.StringIO(), io.StringIO()
    code = submit(REPO, None, ["k=5"], env=env, out=out, err=err)
    assert code == EXIT_NOT_SUBMITTED
    assert last_line(err.getvalue()).startswith("fedcluster: error: run not submitted: ")
    assert "SuperLink is unavailable" in err.getvalue()
    assert "Traceback" not in err.getvalue() + out.getvalue()


# -- a real deployment ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def s1_files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("submit-data")
    data = load_dataset("s1")
    return write_partitions(data.X, partition_indices(len(data.X), 4, "iid", seed=2), tmp / "parts")


@pytest.fixture(scope="module")
def federation(tmp_path_factory, s1_files):
    tmp = tmp_path_factory.mktemp("submit")
    with LocalDeployment(tmp / "processes", [f'data-path="{f}"' for f in s1_files]) as deployment:
        yield deployment, tmp


def run_config(out, **settings) -> str:
    values = {"min-nodes": 4, **settings, "out-dir": str(out)}
    return run_config_text(values)


def flwr_status(deployment: LocalDeployment, run_id: str) -> str:
    done = deployment.flwr("ls", "local-deployment", "--run-id", run_id, "--format", "json")
    return json.loads(done.stdout[done.stdout.index("{"):])["runs"][0]["status"]


@pytest.mark.slow
def test_a_completed_run_exits_0_with_its_model(federation):
    deployment, tmp = federation
    out = tmp / "ok"
    done = deployment.submit("-c", run_config(out, k=15, **{"num-server-rounds": 3}), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr + deployment.logs()
    line = last_line(done.stdout)
    assert line.startswith("fedcluster: run ") and " completed in " in line, line
    assert line.endswith(f"model: {out / 'model.pb'}")
    model = read_model(out / "model.pb")
    assert model.n_points == 5000 and len(model.centroids) == 15
    assert all(r.clients_answered == 4 for r in model.history)
    assert "round 1/3" in done.stdout  # the streamed log
    # The ServerApp's own report, its verdict final (no "In progress" page of a round left).
    from fedcluster.report import verdict

    page = (out / "report.html").read_text(encoding="utf-8")
    assert f'<p class="verdict">{verdict(model)}</p>' in page, page[:3000]
    # The settings that differ from the defaults, once (the ServerApp's log names them), in
    # plain text: the output is a pipe.
    assert done.stdout.count("num-server-rounds = 3") == 1 and "tol = " not in done.stdout
    assert "\x1b[" not in done.stdout


@pytest.mark.slow
def test_an_invalid_run_config_exits_non_zero_naming_the_field(federation):
    deployment, tmp = federation
    settings = run_config(tmp / "lr", k=15, lr=1.5)
    refused = deployment.submit("-c", settings, timeout=60)  # checked here, nothing submitted
    assert refused.returncode == EXIT_NOT_SUBMITTED
    assert "submitted run" not in refused.stdout
    assert last_line(refused.stderr).startswith("fedcluster: error: invalid run configuration: "
                                                "invalid value for 'lr': 1.5")

    failed = deployment.submit("--no-check", "-c", settings, timeout=300)  # the ServerApp refuses
    assert failed.returncode == EXIT_FAILED, failed.stdout + failed.stderr
    line = last_line(failed.stderr)
    assert line.startswith("fedcluster: error: run ") and " failed: the ServerApp raised: " \
        "invalid run configuration: invalid value for 'lr': 1.5" in line, line
    assert "Traceback" in failed.stdout  # the ServerApp's log, streamed
    run_id = line.split()[3]
    assert flwr_status(deployment, run_id) == "finished:failed"


@pytest.mark.slow
def test_half_participation_samples_two_of_four_and_both_answer(federation):
    deployment, tmp = federation
    out = tmp / "half"
    done = deployment.submit("--no-stream", "-c", run_config(
        out, k=15, participation=0.5, tol=0.0, seed=3, **{"num-server-rounds": 2}), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr + deployment.logs()
    assert ": finished:completed (" in done.stdout  # --no-stream prints the status changes
    train = [r for r in read_model(out / "model.pb").history if r.phase == "train"]
    assert len(train) == 2
    assert all(r.clients_sampled == r.clients_answered == 2 for r in train), train


@pytest.mark.slow
def test_a_timeout_stops_the_run(federation):
    deployment, tmp = federation
    done = deployment.submit("--timeout", "12", "-c", run_config(
        tmp / "slow", k=15, tol=0.0, **{"num-server-rounds": 1000}), timeout=300)
    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
    line = last_line(done.stderr)
    assert " did not finish within 12 s; stopped it (finished:stopped)" in line, line
    assert flwr_status(deployment, line.split()[3]) == "finished:stopped"


@pytest.mark.slow
def test_ctrl_c_stops_the_run_and_exits_130(federation):
    deployment, tmp = federation
    proc = deployment.start_submit("-c", run_config(
        tmp / "interrupted", k=15, tol=0.0, **{"num-server-rounds": 1000}))
    try:
        seen = []
        for line in proc.stdout:  # wait for the ServerApp to start
            seen.append(line)
            if "WeightedFederatedKMeans (dwf)" in line:
                break
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == EXIT_INTERRUPTED, "".join(seen) + rest + err
    line = last_line(err)
    assert line.startswith("fedcluster: error: interrupted; stopped run "), line
    assert flwr_status(deployment, line.split()[-1]) == "finished:stopped"


@pytest.mark.slow
def test_every_client_failing_fails_the_run(tmp_path):
    missing = [f'data-path="{tmp_path / f"missing_{i}.npy"}"' for i in range(2)]
    with LocalDeployment(tmp_path, missing) as deployment:
        done = deployment.submit("-c", run_config(tmp_path / "out", k=3, **{
            "min-nodes": 2, "num-server-rounds": 2}), timeout=300)
    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
    line = last_line(done.stderr)
    assert line.startswith("fedcluster: error: run ") and " failed: the ServerApp raised: " in line
    assert "0 of 2 clients answered usably" in line, line
    assert not (tmp_path / "out" / "model.pb").exists()
