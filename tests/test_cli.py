"""The command line: partition, inspect, and simulate (Ray) end to end."""

from __future__ import annotations

import json
import os
import math
import re
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import messages

from fedcluster.cli import main
from fedcluster.config import RunConfig
from fedcluster.data import load_dataset, partition_indices, write_partitions
from fedcluster.metrics import centre_distance
from fedcluster.results import RoundRecord, RunResult
from fedcluster.server.artifacts import read_model, write_run
from fedcluster.simulation import simulate


def test_partition_writes_one_file_per_client(tmp_path, capsys):
    assert main(["partition", "--dataset", "s1", "--clients", "4", "--split", "dirichlet:0.3",
                 "--out", str(tmp_path / "p")]) == 0
    manifest = json.loads((tmp_path / "p" / "manifest.json").read_text())
    assert [c["file"] for c in manifest["clients"]] == [f"client_{i:03d}.npy" for i in range(4)]
    total = sum(np.load(tmp_path / "p" / c["file"]).shape[0] for c in manifest["clients"])
    assert total == 5000
    assert "data-path=" in capsys.readouterr().out
    assert main(["partition", "--dataset", "s1", "--clients", "4", "--out", str(tmp_path / "p")]) == 2


def test_partition_of_blobs_uses_its_options(tmp_path):
    assert main(["partition", "--dataset", "blobs", "--blobs-samples", "300", "--blobs-noise", "0",
                 "--blobs-features", "3", "--clients", "3", "--out", str(tmp_path / "b")]) == 0
    parts = [np.load(tmp_path / "b" / f"client_{i:03d}.npy") for i in range(3)]
    assert sum(len(p) for p in parts) == 300 and parts[0].shape[1] == 3


def test_inspect_prints_text_and_json(tmp_path, capsys):
    result = RunResult(algorithm="dwf", settings={"algorithm": "dwf", "k": 2}, centroids=np.array([[0.0, 1.0], [2.0, 3.0]]),
                       counts=np.array([3.0, 4.0]), score=0.5, n_points=7, rounds=1, converged=True,
                       best_restart=0, history=[RoundRecord(0, 1, 0.1, 0.5, 2, 2, 0, (1, 2))])
    write_run(result, tmp_path)
    assert main(["inspect", str(tmp_path / "model.pb")]) == 0
    assert "dwf" in capsys.readouterr().out
    assert main(["inspect", str(tmp_path / "model.pb"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["centroids"] == [[0.0, 1.0], [2.0, 3.0]]


def test_simulate_in_memory_writes_a_runs_files_with_no_flower_or_ray_loaded(tmp_path):
    """``--backend memory``: the in-process federation, its progress lines as Flower's would be."""
    out = tmp_path / "out"
    script = ("import sys\nfrom fedcluster.cli import main\n"
              f"code = main(['simulate', '--backend', 'memory', '--clients', '3', '--out', {str(out)!r}])\n"
              "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('flwr', 'ray'))\n"
              "assert not loaded, loaded[:5]\nsys.exit(code)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "starting the Flower simulation" not in done.stdout
    assert re.search(r"^INFO :      round 1/100: movement ", done.stderr, re.M), done.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "checkpoint.json", "history.csv", "model.pb", "report.html"]
    assert read_model(out / "model.pb").rounds >= 1


def test_bad_options_fail_before_anything_runs(tmp_path, capsys):
    assert main(["simulate", "--lr", "3", "--out", str(tmp_path)]) == 2
    assert "invalid value for 'lr': 3.0" in capsys.readouterr().err
    assert main(["simulate", "--dataset", "nowhere", "--out", str(tmp_path)]) == 2
    assert "nowhere" in capsys.readouterr().err
    # DeepFeCA's image shape must fit the rows (the named image sets give theirs).
    assert main(["simulate", "--algorithm", "deepfeca", "--dataset", "s1",
                 "--out", str(tmp_path)]) == 2
    assert "--image-shape 1,28,28 needs 784 values per row, and the rows of s1 have 2" in \
        capsys.readouterr().err
    assert not (tmp_path / "model.pb").exists()


def test_image_data_sets_give_deepfeca_their_image_shape():
    from fedcluster.cli import _dataset_settings
    from fedcluster.data import load_dataset

    digits = load_dataset("digits")
    assert digits.image_shape == (1, 8, 8) and load_dataset("s1").image_shape is None
    assert _dataset_settings({"algorithm": "deepfeca", "image-shape": None}, digits) == \
        {"image-shape": "1,8,8"}
    # What the command line says wins; the mlp reads rows as vectors; other methods take nothing.
    assert _dataset_settings({"algorithm": "deepfeca", "image-shape": "64", "network": "mlp"},
                             digits) == {}
    assert _dataset_settings({"algorithm": "deepfeca", "network": "mlp"}, digits) == {}
    assert _dataset_settings({"algorithm": "dwf"}, digits) == {}


@pytest.mark.slow
def test_simulate_on_s1_reaches_the_level_of_centralized_kmeans(s1_cli_simulation, s1_centres):
    done, out = s1_cli_simulation
    assert done.returncode == 0, done.stdout + done.stderr
    result = read_model(out / "model.pb")
    distance = centre_distance(result.centroids, s1_centres)
    assert distance <= 1.3e4
    assert f"distance to the true centres of s1: {distance:.4g}" in done.stdout
    # The default run changed no setting; its summary and its log (a pipe here) say so plainly.
    assert re.search(r"\nsettings other than the defaults \(0 of \d+\)\ncluster counts\n",
                     done.stdout), done.stdout
    assert "\x1b[" not in done.stdout + done.stderr
    assert re.search(r"score \S+ beside \S+, the score of the true centres of s1", done.stdout)
    assert "adjusted Rand index against the labels of s1: " in done.stdout
    rounds = [line for line in done.stderr.splitlines() if "round " in line and "movement" in line]
    assert len(rounds) == result.rounds
    assert (out / "history.csv").read_text().count("\n") == len(result.history) + 1
    assert f"report: {out / 'report.html'}" in done.stdout
    written = (out / "report.html").read_bytes()
    assert b"true centres of s1" in written
    # Given the run's data set, `fedcluster report` writes the same page, reference included.
    assert main(["report", str(out), "--dataset", "s1"]) == 0
    assert (out / "report.html").read_bytes() == written


@pytest.mark.slow
def test_flower_simulation_survives_a_client_with_bad_data(tmp_path, flwr_log):
    data = load_dataset("s1")
    parts = partition_indices(len(data.X), 4, "iid", seed=0)
    files = write_partitions(data.X, parts, tmp_path / "parts")
    broken = np.load(files[1])
    broken[3, 0] = np.nan
    np.save(files[1], broken)
    config = RunConfig.from_mapping({"k": 15, "num-server-rounds": 3, "tol": 0.0,
                                     "out-dir": str(tmp_path / "out")})
    result = simulate(config, tmp_path / "parts", 4)
    train = [r for r in result.history if r.phase == "train"]
    assert [(r.clients_answered, r.clients_rejected) for r in train] == [(3, 1)] * 3
    assert result.n_points == 5000 - len(parts[1])
    log = messages(flwr_log)
    for phase in ("init (local k-means)", "round 1", "round 3", "score (round 3)"):
        assert f"{phase}: rejected node" in log
    assert "error reply (code 400): " in log and "client_001.npy: 1 non-finite value" in log


@pytest.mark.slow
def test_a_simulation_waits_for_every_simulated_client_before_its_first_request(tmp_path):
    # Flower starts the ServerApp while it still registers the simulated nodes (a CI run once
    # sent the first request to 3 of 4); the default min-nodes of 1 would not wait for them.
    data = load_dataset("s1")
    write_partitions(data.X, partition_indices(len(data.X), 4, "iid", seed=0), tmp_path / "parts")
    config = RunConfig.from_mapping({"k": 15, "out-dir": str(tmp_path / "out")})
    assert config.min_nodes == 1
    seen = simulate(config, tmp_path / "parts", 4, run=lambda grid, cfg: cfg.min_nodes)
    assert seen == 4


def test_simulate_help_lists_every_method_with_its_paper_and_options(capsys):
    from fedcluster.methods import METHODS

    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for method in METHODS.values():
        assert f"{method.name}: {method.title}" in text
        assert " ".join(method.paper.split()) in text
        for option in method.own_keys:
            assert f"--{option}" in text


@pytest.mark.parametrize("algorithm", ["ewf", "fkm", "kfed", "ffcm-avg1", "ffcm-avg2", "feca", "mavg",
                                       "fedkmeans"])
def test_simulate_runs_every_method(tmp_path, capsys, algorithm):
    """The command line's path for each method, in memory: every method's messages go through
    Ray in tests/test_privacy_probe.py and tests/test_adversary.py, and the Flower backend of
    ``simulate`` equals the memory one (tests/test_inprocess_equals_simulation.py)."""
    out = tmp_path / algorithm
    assert main(["simulate", "--backend", "memory", "--algorithm", algorithm, "--dataset", "s1",
                 "--clients", "4", "--k", "15", "--rounds", "5", "--out", str(out)]) == 0
    result = read_model(out / "model.pb")
    assert result.algorithm == algorithm and result.n_points == 5000
    assert "distance to the true centres of s1" in capsys.readouterr().out


def test_a_failed_in_memory_run_exits_1_with_one_line(tmp_path, capsys):
    """DP at epsilon 0.1 on digits' 1,797 rows: the bounds step finds no bin above its noise
    and the run fails before its rounds; the command says why in one line, as the Flower
    backend does, and writes no model."""
    out = tmp_path / "dp"
    assert main(["simulate", "--backend", "memory", "--dataset", "digits", "--k", "10",
                 "--dp", "central", "--secure-aggregation", "true", "--dp-epsilon", "0.1",
                 "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "fedcluster: error: bounds:" in err and "--data-bounds" in err
    assert "Traceback" not in err and not (out / "model.pb").exists()


@pytest.mark.parametrize(("argv", "says"), [
    (["--clients", "0"], "--clients must be at least 1, got 0"),
    (["--k", "6000"], "--k 6000 is more than the 5000 points of s1"),
    (["--dataset", "missing/points.csv"], "data file missing/points.csv: no such file (looked in "),
    (["--dataset", "points.npy"], "data file points.npy: no such file"),
    # S1's 5000 rows: one per client, below the floor of 2 rows a cluster.
    (["--clients", "5000"], "every one of the 5000 clients holds fewer than --min-cluster-size 2"),
    # Two rows per client: 2500 clusters can leave the clients, fewer than k.
    (["--clients", "2500", "--k", "2600"], "the 2500 clients can send at most 2500 clusters"),
    # A k selection asks for its range's ks, the largest checked.
    (["--clients", "2500", "--k-range", "2590:2600"], "the 2500 clients can send at most 2500 "
     "clusters of --min-cluster-size 2 rows or more, fewer than --k-range 2590:2600's largest "
     "k 2600"),
    (["--k-range", "4999:5001"], "--k-range 4999:5001's largest k 5001 is more than the 5000"),
])
def test_simulate_refuses_bad_input_before_flower_starts(tmp_path, capsys, monkeypatch, argv, says):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("fedcluster.simulation.simulate",
                        lambda *a, **k: pytest.fail("the simulation must not start"))
    assert main(["simulate", *argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fedcluster: error: {says}") and err.count("\n") == 1


def test_simulate_checks_a_k_selection_by_its_range_not_by_k(tmp_path, capsys, monkeypatch):
    # Two rows per client: --k 2600 alone is refused, yet a range of small ks can run.
    from fedcluster.simulation import SimulationError

    def started(*args, **kwargs):
        raise SimulationError("the simulation started")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("fedcluster.simulation.simulate", started)
    assert main(["simulate", "--clients", "2500", "--k", "2600", "--k-range", "2:3",
                 "--out", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err == "fedcluster: error: the simulation started\n"


@pytest.mark.parametrize(("out", "says"), [
    ("a-file", "--out a-file: a file is in the way (the run writes a directory there)"),
    ("a-file/results", "--out a-file/results: cannot write there (Not a directory)"),
])
def test_simulate_refuses_an_output_it_could_not_write_before_flower_starts(
        tmp_path, capsys, monkeypatch, out, says):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("not a directory")
    monkeypatch.setattr("fedcluster.simulation.simulate",
                        lambda *a, **k: pytest.fail("the simulation must not start"))
    assert main(["simulate", "--out", out]) == 2
    assert capsys.readouterr().err == f"fedcluster: error: {says}\n"


def test_partition_prints_absolute_paths_and_names_the_overwrite_flag(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["partition", "--clients", "2", "--out", "parts"]) == 0
    out = capsys.readouterr().out
    assert f"data-path=\"{tmp_path / 'parts' / 'client_000.npy'}\"" in out
    assert main(["partition", "--clients", "2", "--out", "parts"]) == 2
    assert "choose another --out or pass --overwrite" in capsys.readouterr().err
    assert main(["partition", "--clients", "3", "--out", "parts", "--overwrite"]) == 0


def test_inspect_into_a_closed_pipe_is_quiet(tmp_path):
    result = RunResult(algorithm="dwf", settings={"algorithm": "dwf", "k": 400}, centroids=np.zeros((400, 2)),
                       counts=np.ones(400), score=0.5, n_points=400, rounds=1, converged=True,
                       best_restart=0, history=[])
    write_run(result, tmp_path)
    done = subprocess.run(f"'{sys.executable}' -m fedcluster.cli inspect --json "
                          f"'{tmp_path / 'model.pb'}' | head -1", shell=True, capture_output=True,
                          text=True, timeout=120)
    assert done.stdout == "{\n" and done.stderr == ""


@pytest.mark.slow
def test_a_run_whose_clients_all_fail_exits_1_with_one_line(tmp_path):
    start = tmp_path / "start.npy"
    np.save(start, np.zeros((15, 3)))  # S1 has 2 columns: every client refuses this model
    done = subprocess.run(
        [sys.executable, "-m", "fedcluster.cli", "simulate", "--clients", "3", "--init", str(start),
         "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("fedcluster: error: round 1: 0 of 3 clients answered usably"), last
    assert "client data has dimension 2, the global model 3" in last
    assert not (tmp_path / "out" / "model.pb").exists()


DP = ["--dp", "central", "--secure-aggregation", "true", "--data-bounds", "0:1e6", "--init", "random"]


@pytest.mark.parametrize(("argv", "says"), [
    ([*DP, "--dp-epsilon", "1e6"], "invalid value for 'dp-epsilon': 1000000.0"),
    ([*DP, "--dp-delta", "0.5"], "invalid value for 'dp-delta': 0.5"),
    ([*DP, "--dp-delta", "0.001"], "dp-delta 0.001 is not below 1 / rows = 0.0002 (5000 rows in all)"),
    ([*DP, "--dp-noise-multiplier", "0.01"], "dp-noise-multiplier 0.01 is below 0.05"),
    ([*DP, "--dp-noise-multiplier", "0.5"], "dp-noise-multiplier 0.5 spends epsilon 9.997 in one "
                                             "round at dp-delta 1e-05, more than dp-epsilon 1"),
])
def test_simulate_refuses_dp_settings_beyond_the_limits_in_seconds(tmp_path, capsys, monkeypatch,
                                                                   argv, says):
    """--dp-epsilon 1e6 once had the accountant take 19.6 GB; now refused at once, naming
    the value and the limit."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("fedcluster.simulation.simulate",
                        lambda *a, **k: pytest.fail("the simulation must not start"))
    started = time.monotonic()
    assert main(["simulate", *argv, "--out", str(tmp_path / "out")]) == 2
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err
    assert err.startswith("fedcluster: error: ") and says in err
    if "1e6" in argv:
        assert "100" in err
    if "0.5" in argv and "--dp-delta" in argv:
        assert "0.01" in err


@pytest.mark.slow
def test_ctrl_c_ends_a_simulation_in_seconds_with_the_line_that_resumes_it(tmp_path):
    """SIGINT mid-run: exit 130 within 15 s (not after round-timeout), Ray's processes gone,
    one last line naming the checkpoint and the command that resumes; that command finishes
    the run."""
    import shlex
    import signal

    out = tmp_path / "out"
    log = tmp_path / "stderr.log"
    argv = [sys.executable, "-m", "fedcluster.cli", "simulate", "--clients", "4", "--rounds", "12",
            "--tol", "0", "--out", str(out)]
    with open(log, "w") as stderr:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while "round 2/12" not in log.read_text() and time.monotonic() < deadline:
                assert proc.poll() is None, log.read_text()[-3000:]
                time.sleep(0.2)
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=60)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
    text = log.read_text()
    assert code == 130 and took < 15, (code, took, text[-3000:])
    last = text.strip().splitlines()[-1]
    assert last.startswith("fedcluster: interrupted after round "), text[-3000:]
    assert f"the last checkpoint is {out / 'checkpoint.json'}" in last
    assert "Traceback" not in text
    # The interrupted run has its page, of a round in progress (written atomically: whole).
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "In progress when written" in page and page.rstrip().endswith("</html>")
    # Nothing of the run is left running (zombies are dead, only not yet reaped by init): Ray's
    # processes were in the command's session. A Ray worker whose raylet is gone may still be
    # on its way out when the command has exited: it gets a few seconds, no more.
    deadline = time.monotonic() + 10
    while True:
        left = subprocess.run(["ps", "-o", "pid=,stat=,cmd=", "-s", str(proc.pid)],
                              capture_output=True, text=True).stdout.splitlines()
        running = [line for line in left if line.split()[1][0] != "Z"]
        if not running or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not running, left
    command = shlex.split(last.split("resume with: ", 1)[1])
    assert command[0] == "fedcluster" and command[-2:] == ["--resume", str(out)]
    done = subprocess.run([sys.executable, "-m", "fedcluster.cli", *command[1:]],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert read_model(out / "model.pb").rounds == 12
    assert "Did not converge: stopped at the round limit, 12 rounds" in (
        out / "report.html").read_text(encoding="utf-8")


@pytest.mark.slow
def test_ctrl_c_after_the_run_ended_says_so_and_offers_no_resume(tmp_path):
    """The command prints its last line while Flower and Ray still stop (about 2 s): a Ctrl-C
    then stops Ray at once and says the run had ended, not where to resume it."""
    import signal

    out = tmp_path / "out"
    argv = [sys.executable, "-m", "fedcluster.cli", "simulate", "--clients", "2", "--rounds", "2",
            "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        for line in proc.stdout:
            if line.startswith("report: ") or line.startswith("report skipped"):
                break
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = proc.stderr.read()
    assert code == 130, (code, text[-2000:])
    assert text.strip().splitlines()[-1] == (
        f"fedcluster: interrupted while Ray stopped; the run had ended: {out / 'model.pb'}"), text
    assert read_model(out / "model.pb").rounds == 2 and "Traceback" not in text


# -- the console: short errors, grouped help, the summary (issue 27) -------------------------
@pytest.mark.parametrize(("argv", "names"), [
    (["--algorithm", "nosuch"], ["'dwf'", "'fkm'", "'deepfeca'"]),
    (["--device", "tpu"], ["'auto'", "'cpu'", "'cuda'"]),
    (["--select", "best"], ["'silhouette'", "'elbow'"]),
    # The registry's methods that declare feature_clustering.
    (["--algorithm", "deepfeca", "--feature-clustering", "dwf"],
     ["'feca'", "'ffcm-avg1'", "'ffcm-avg2'", "'kfed'", "'mavg'"]),
])
def test_a_wrong_choice_is_one_line_naming_the_valid_ones(capsys, argv, names):
    with pytest.raises(SystemExit) as info:
        main(["simulate", *argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fedcluster simulate: error: argument ")
    assert all(name in err for name in names) and "usage:" not in err


@pytest.mark.parametrize(("argv", "names"), [
    (["--split", "nosuch"], ["'iid'", "'dirichlet:ALPHA'", "'by-label'"]),
    (["--init", "nosuch"], ["local-kmeans", "kfed", "random"]),
])
def test_a_wrong_split_or_init_is_one_line_naming_the_valid_ones(tmp_path, capsys, monkeypatch,
                                                                argv, names):
    monkeypatch.setattr("fedcluster.simulation.simulate",
                        lambda *a, **k: pytest.fail("the simulation must not start"))
    assert main(["simulate", *argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fedcluster: error: ")
    assert all(name in err for name in names)


def test_simulate_help_is_in_sections_and_ends_with_examples_that_parse(capsys):
    from fedcluster.cli import SIMULATE_EXAMPLES, _parser, simulate_options

    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    text = capsys.readouterr().out
    sections = ["data and its split:", "the method and when it stops:", "clients and computation:",
                "privacy: differential privacy and secure aggregation:", "output:", "examples:"]
    where = [text.index(f"\n{section}\n") for section in sections]
    assert where == sorted(where)
    assert text.rstrip().endswith(f"fedcluster {SIMULATE_EXAMPLES[-1][1]}")
    privacy = text.split("\nprivacy: ")[1].split("\nchoosing k")[0]
    assert "--dp-epsilon" in privacy and "--secagg-threshold" in privacy and "--k " not in privacy
    for key in simulate_options():
        assert ("--rounds" if key == "num-server-rounds" else f"--{key}") in text
    parser = _parser()
    for _, command in SIMULATE_EXAMPLES:
        assert f"  fedcluster {command}\n" in text
        parser.parse_args(command.split())


def fake_simulate(centres, score=1e9):
    """A stand-in for the Flower simulation: the run ends on ``centres`` after one round."""

    def run(config, partitions, clients, **kwargs):
        return RunResult(algorithm=config.algorithm, settings=config.settings(), centroids=centres,
                         counts=np.ones(len(centres)), score=score, n_points=5000, rounds=1,
                         converged=True, best_restart=0,
                         history=[RoundRecord(0, 1, 0.5, 1e9, clients, clients, 0)])
    return run


def test_the_summary_shows_changed_settings_and_the_score_beside_its_references(
        tmp_path, capsys, monkeypatch, s1_centres):
    monkeypatch.setattr("fedcluster.simulation.simulate", fake_simulate(s1_centres))
    assert main(["simulate", "--clients", "1", "--lr", "0.5", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "s1 (5000 points, 2 features), split iid over 1 client\n" in out
    listed = out.split("settings other than the defaults (1 of ")[1].split("cluster counts")[0]
    # min-nodes follows --clients in a simulation: no news either.
    assert listed.splitlines()[1:] == ["  lr = 0.5"]
    assert "tol = " not in out and "min-nodes" not in out
    assert "distance to the true centres of s1: 0 " in out
    reference = re.search(r"score 1e\+09 beside (\S+), the score of the true centres of s1 "
                          r"\(([-+][\d.]+)%\)", out)
    assert reference, out
    X = load_dataset("s1").X
    truth = ((X[:, None, :] - s1_centres[None]) ** 2).sum(axis=2).min(axis=1).mean()
    assert float(reference.group(1)) == pytest.approx(truth, rel=1e-3)
    ari = re.search(r"adjusted Rand index against the labels of s1: (\S+) ", out)
    assert ari and float(ari.group(1)) > 0.95
    assert main(["simulate", "--clients", "2", "-v", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "\nsettings\n" in out and "  tol = 0.0001" in out and "  min-nodes = 2" in out
    # A DP run measures no score: nothing to set beside it.
    monkeypatch.setattr("fedcluster.simulation.simulate", fake_simulate(s1_centres, math.nan))
    assert main(["simulate", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert " beside " not in out and "adjusted Rand index against the labels of s1: " in out


def test_colour_only_on_a_terminal_and_never_under_no_color(monkeypatch):
    import io
    import logging

    from flwr.common.logger import console_handler

    from fedcluster.logs import colour_only_on_a_terminal, use_colour

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_colour(Terminal()) and not use_colour(io.StringIO()) and not use_colour(object())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_colour(Terminal())
    monkeypatch.setenv("NO_COLOR", "")  # set but empty: no-color.org says it does not count
    assert use_colour(Terminal())
    record = logging.LogRecord("flwr", logging.INFO, __file__, 1, "round 1/2", None, None)
    monkeypatch.setattr(console_handler, "stream", io.StringIO())
    monkeypatch.setattr(console_handler, "colored", True)
    colour_only_on_a_terminal()
    assert console_handler.format(record) == "INFO :      round 1/2"
    monkeypatch.setattr(console_handler, "stream", Terminal())
    colour_only_on_a_terminal()
    assert console_handler.format(record).startswith("\x1b[")


def test_counted_gets_the_plural_right():
    from fedcluster.logs import counted

    assert [counted(n, "round") for n in (0, 1, 2)] == ["0 rounds", "1 round", "2 rounds"]


def test_one_feature_and_one_client_are_singular(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("fedcluster.simulation.simulate", fake_simulate(np.zeros((3, 1))))
    assert main(["simulate", "--dataset", "blobs", "--blobs-features", "1", "--blobs-samples",
                 "300", "--blobs-noise", "0", "--clients", "1", "--k", "3",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "blobs (300 points, 1 feature), split iid over 1 client\n" in out
    assert "history (last 1 of 1 round)" in out


class _Stop(Exception):
    """Raised by a stand-in simulation once it has seen the configuration it was given."""


@pytest.mark.parametrize(("argv", "expected"), [
    (["--clients", "10"], lambda cores: 300 + 10 / (2 * cores)),
    (["--clients", "2000", "--participation", "0.1"], lambda cores: 300 + 2000 / (2 * cores)),
    (["--clients", "2000", "--round-timeout", "42"], lambda cores: 42.0),
])
def test_a_simulated_round_waits_longer_for_a_larger_federation(tmp_path, monkeypatch, argv,
                                                                 expected):
    """10,000 simulated clients need minutes per round through a core's actor each; the user may set it."""
    seen = []

    def stand_in(config, *args, **kwargs):
        seen.append(config.round_timeout)
        raise _Stop

    monkeypatch.setattr("fedcluster.simulation.simulate", stand_in)
    with pytest.raises(_Stop):
        main(["simulate", "--dataset", "blobs", "--blobs-samples", "20000", "--k", "3", *argv,
              "--out", str(tmp_path / "out")])
    assert seen == [pytest.approx(expected(os.cpu_count()))]


def test_ray_gets_no_more_cores_than_the_clients_need(monkeypatch):
    """Flower starts one actor per core (each a process importing Ray and Flower): not more than
    the clients."""
    from fedcluster.simulation import _ray_init_args

    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert _ray_init_args(3, 1.0, verbose=False)["num_cpus"] == 3
    assert _ray_init_args(3, 2.0, verbose=True) == {"num_cpus": 6}
    assert "num_cpus" not in _ray_init_args(16, 1.0, verbose=False)
    assert "num_cpus" not in _ray_init_args(1000, 1.0, verbose=False)


def test_a_simulation_hands_out_each_nodes_next_message_as_flower_does(monkeypatch):
    """Flower's sweep asks its in-memory link state for every node's next message, one scan of
    all stored messages per node; fedcluster's one scan per sweep gives the same messages."""
    from flwr.app import RecordDict
    from flwr.common import ConfigRecord, Message
    from flwr.server.superlink.fleet.vce.vce_api import _register_nodes
    from flwr.server.superlink.linkstate import LinkStateFactory
    from flwr.supercore.constant import FLWR_IN_MEMORY_DB_NAME
    from flwr.supercore.object_store import ObjectStoreFactory
    from flwr.superlink.federation import NoOpFederationManager
    from flwr.superlink.grid.inmemory_grid import InMemoryGrid
    from flwr.proto.task_pb2 import Task
    from flwr.server.superlink.linkstate.in_memory_linkstate import RunRecord
    from flwr.common.constant import SUPERLINK_NODE_ID
    from flwr.supercore.constant import NOOP_FEDERATION_ID
    from flwr.supercore.run import Run
    from flwr.supercore.task_identity import TaskIdentity

    from fedcluster.simulation import undelivered_once_per_node

    # Flower's simulation sets the identity of its run's task as these do.
    for name, value in (("_task_id", 1), ("_run_id", 7), ("_node_id", SUPERLINK_NODE_ID)):
        monkeypatch.setattr(TaskIdentity, name, value)

    def state_with_messages():
        """6 nodes: node i is sent i % 3 messages, tagged in push order."""
        factory = LinkStateFactory(FLWR_IN_MEMORY_DB_NAME, NoOpFederationManager(),
                                   ObjectStoreFactory())
        mapping = _register_nodes(6, factory)
        state = factory.state()
        run = Run.create_empty(run_id=7)
        run.primary_task_id = 8
        run.federation_id = NOOP_FEDERATION_ID
        state.run_ids[run.run_id] = RunRecord(run=run)  # as Flower's simulation registers its run
        state.task_store[8] = Task(task_id=8, run_id=run.run_id)
        grid = InMemoryGrid(state_factory=factory)
        grid.set_run(run)
        partition = {node: i for node, i in mapping.items()}
        sent = [(node, copy) for copy in range(2) for node in mapping if partition[node] % 3 > copy]
        grid.push_messages([Message(RecordDict({"c": ConfigRecord({"tag": n})}), node, "query")
                            for n, (node, _) in enumerate(sent)])
        return state, mapping

    def handed_out(messages, mapping):
        return sorted((mapping[m.metadata.dst_node_id], m.content["c"]["tag"]) for m in messages)

    ours, theirs = state_with_messages(), state_with_messages()
    for sweep in range(3):
        got = undelivered_once_per_node(*ours)
        state, mapping = theirs
        flowers = [m for node in mapping for m in state.get_message_ins(node_id=node, limit=1)]
        assert handed_out(got, ours[1]) == handed_out(flowers, mapping)
        assert all(m.metadata.delivered_at for m in got)
        assert len(got) == [4, 2, 0][sweep]  # nodes 1, 2, 4, 5; then the second of 2 and 5; none
