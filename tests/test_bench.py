"""The benchmark harness: grid files, resumable runs, federated metrics, reports."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from fedcluster.bench import load_grid, render, run_grid
from fedcluster.bench.datasets import load_spec, parse_spec
from fedcluster.bench.runner import RUNS_CSV, RUNS_LOG, grid_rows
from fedcluster.cli import main

GRID = """
name = "tiny"
seeds = 2
clients = 3
k = 15
datasets = ["s1"]
splits = ["iid"]

[[tables]]
metric = "centre_distance"
scale = 1e4

[[methods]]
label = "DWF"
algorithm = "dwf"
settings = { num-server-rounds = 5 }
sweep = { local-steps = [1, 2] }

[[methods]]
label = "central"
algorithm = "dwf"
clients = 1

[[published]]
method = "central"
dataset = "s1"
split = "iid"
metric = "centre_distance"
value = "1.0 ± 0.1"
"""


@pytest.fixture
def grid_file(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(GRID)
    return path


def test_grid_expands_sweeps_seeds_and_the_central_baseline(grid_file):
    grid = load_grid(grid_file)
    assert len(grid.runs) == 2 * 2 + 2
    dwf = [r for r in grid.runs if r.method == "DWF"]
    assert {r.setting for r in dwf} == {"local-steps=1", "local-steps=2"}
    assert {r.settings["local-steps"] for r in dwf} == {1, 2}
    assert {r.clients for r in grid.runs if r.method == "central"} == {1}
    assert len({r.run_id for r in grid.runs}) == len(grid.runs)
    assert [r.run_id for r in load_grid(grid_file).runs] == [r.run_id for r in grid.runs]


@pytest.mark.parametrize(("text", "message"), [
    (GRID.replace('name = "tiny"', 'nme = "tiny"'), "unknown keys"),
    (GRID.replace("num-server-rounds = 5", "num-server-rounds = 0"), "num-server-rounds"),
    (GRID.replace('splits = ["iid"]', 'splits = ["sideways"]'), "sideways"),
    (GRID.replace("num-server-rounds = 5 }", "num-server-rounds = 5, seed = 3 }"),
     r"sets \['seed'\], which a run of a grid cannot take"),
    # A setting the runner would not apply is refused, whether set or swept.
    (GRID.replace("num-server-rounds = 5 }", 'num-server-rounds = 5, resume-from = "old" }'),
     r"method 'DWF' sets \['resume-from'\]"),
    (GRID.replace("sweep = { local-steps", "sweep = { seed = [1, 2], local-steps"),
     r"method 'DWF' sets \['seed'\]"),
    (GRID.replace("seeds = 2", "seeds = 2\nbest-of = 3"), "best-of must be an integer from 0"),
    (GRID.replace("seeds = 2", "seeds = 2\nbest-of = 1.5"), "best-of must be an integer"),
    (GRID.replace("scale = 1e4", 'scale = 1e4\nkind = "pie"'), "table kind must be one of grid, quantiles"),
])
def test_bad_grid_files_are_refused_before_running(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_grid(path)


def test_dataset_parameters_in_the_name():
    assert parse_spec("garst-grid?points=200&noise=1.2") == ("garst-grid", {"points": 200, "noise": 1.2})
    assert parse_spec("s1") == ("s1", {})


def test_data_seed_fixes_a_generated_dataset_across_run_seeds():
    by_run_seed = [load_spec("blobs?n-samples=200", seed=s).X for s in (0, 1)]
    assert not np.array_equal(*by_run_seed)
    fixed = [load_spec("blobs?n-samples=200&data-seed=7", seed=s).X for s in (0, 1)]
    np.testing.assert_array_equal(*fixed)
    np.testing.assert_array_equal(fixed[0], load_spec("blobs?n-samples=200", seed=7).X)
    with pytest.raises(ValueError, match="data-seed must be a non-negative integer"):
        load_spec("blobs?data-seed=-1", seed=0)


def test_runs_resume_and_report_with_published_values(grid_file, tmp_path):
    grid = load_grid(grid_file)
    lines: list[str] = []
    rows = run_grid(grid, tmp_path / "out", workers=1, progress=lines.append)
    assert len(rows) == 6 and not any(r["error"] for r in rows)
    assert lines[0] == "tiny: 6 runs, 0 already done, 6 to run with 1 worker(s)"
    for row in rows:
        assert np.isfinite(row["centre_distance"]) and 0.0 <= row["ari"] <= 1.0
        assert row["n"] == 5000 and len(row["centroids"]) == 15
    with open(tmp_path / "out" / RUNS_CSV) as handle:
        table = list(csv.DictReader(handle))
    assert len(table) == 6 and {"score", "accuracy", "v_measure", "davies_bouldin"} <= set(table[0])

    again: list[str] = []
    assert len(run_grid(grid, tmp_path / "out", workers=1, progress=again.append)) == 6
    assert again[0] == "tiny: 6 runs, 6 already done, 0 to run with 1 worker(s)"

    report = render(grid, grid_rows(grid, tmp_path / "out"))
    assert "**centre_distance / 10000**" in report and "(paper 1.0 ± 0.1)" in report
    assert "| central |" in report and "| DWF local-steps=2 |" in report


def test_best_of_adds_a_table_over_the_lowest_score_runs(tmp_path):
    path = tmp_path / "best.toml"
    path.write_text(GRID.replace("seeds = 2", "seeds = 2\nbest-of = 1"))
    grid = load_grid(path)
    # Two seeds of one cell: the best-of table keeps the lower-score run only.
    rows = [{"method": "central", "setting": "", "dataset": "s1", "split": "iid", "seed": seed,
             "score": score, "centre_distance": dist, "rounds": 1, "wall_s": 0.1}
            for seed, score, dist in ((0, 2.0, 3e4), (1, 1.0, 1e4))]
    report = render(grid, rows)
    assert "mean ± std over all runs per cell" in report
    assert "| central | 2 ± 1 (paper 1.0 ± 0.1) |" in report
    assert "mean ± std over the best 1 runs (lowest score) per cell" in report
    assert "| central | 1 ± 0 (paper 1.0 ± 0.1) |" in report


def test_the_central_baseline_runs_under_a_split_that_needs_many_clients():
    from fedcluster.bench.runner import cached_partition

    (everything,) = cached_partition("triebe", "by-label", 1, 0)
    np.testing.assert_array_equal(everything, np.arange(500))
    assert len(cached_partition("triebe", "by-label", 50, 0)) == 50


def test_a_failing_run_is_recorded_and_retried_next_time(tmp_path):
    path = tmp_path / "g.toml"
    path.write_text(GRID.replace('datasets = ["s1"]', 'datasets = ["s1", "nowhere.npy"]')
                    .replace("seeds = 2", "seeds = 1"))
    grid = load_grid(path)
    rows = run_grid(grid, tmp_path / "out", workers=1, progress=lambda line: None)
    assert len(rows) == 6  # the s1 runs finished; the missing file's runs are there, failed
    assert [r["dataset"] for r in rows if r["error"]] == ["nowhere.npy"] * 3
    assert len(grid_rows(grid, tmp_path / "out")) == 3  # finished only
    logged = [json.loads(line) for line in (tmp_path / "out" / RUNS_LOG).read_text().splitlines()]
    assert sum(1 for r in logged if r["error"]) == 3
    assert any("nowhere.npy" in r["error"] for r in logged)
    again: list[str] = []
    rows = run_grid(grid, tmp_path / "out", workers=1, progress=again.append)
    assert again[0] == "tiny: 6 runs, 3 already done, 3 to run with 1 worker(s)"  # retried
    assert len(rows) == 6 and sum(1 for r in rows if r["error"]) == 3


def test_federated_metrics_match_pooled_scikit_learn(tmp_path, grid_file):
    from sklearn.metrics import adjusted_rand_score, v_measure_score

    from fedcluster.data import load_dataset

    grid = load_grid(grid_file)
    [row] = [r for r in run_grid(grid, tmp_path / "out", workers=1, progress=lambda line: None)
             if r["method"] == "central" and r["seed"] == 0]
    data = load_dataset("s1")
    centroids = np.asarray(row["centroids"])
    assigned = ((data.X[:, None] - centroids[None]) ** 2).sum(axis=2).argmin(axis=1)
    assert row["ari"] == pytest.approx(adjusted_rand_score(data.labels, assigned), abs=1e-12)
    assert row["v_measure"] == pytest.approx(v_measure_score(data.labels, assigned), abs=1e-12)


@pytest.mark.slow
def test_bench_command_with_two_workers(grid_file, tmp_path, capsys):
    assert main(["bench", str(grid_file), "--out", str(tmp_path / "out"), "--workers", "2"]) == 0
    assert "6 of 6 runs done" in capsys.readouterr().out
    assert (tmp_path / "out" / "report.md").read_text().startswith("### tiny")
    assert main(["bench", str(grid_file), "--out", str(tmp_path / "out"), "--report-only"]) == 0


def test_plots_of_recovered_centres_and_rounds(grid_file, tmp_path):
    from fedcluster.bench import plot
    from fedcluster.bench.runner import cached_dataset

    grid = load_grid(grid_file)
    rows = run_grid(grid, tmp_path / "out", workers=1, progress=lambda line: None)
    written = plot(grid, rows, tmp_path / "plots", lambda spec: cached_dataset(spec, 0))
    assert sorted(p.name for p in written) == ["centres-s1-iid.png", "rounds-s1-iid.png"]
    assert all(p.stat().st_size > 1000 for p in written)


# -- k from the dataset, data files -------------------------------------------------

FILE_GRID = """
name = "files"
seeds = 2
clients = 2
datasets = {datasets}
splits = {splits}

[[methods]]
label = "DWF"
algorithm = "dwf"
settings = {{ num-server-rounds = 3, n-init = 2 }}
"""


def _three_blobs(tmp_path):
    rng = np.random.default_rng(0)
    centers = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    labels = np.repeat(np.arange(3), 20)
    X = centers[labels] + rng.normal(0.0, 0.5, size=(60, 2))
    np.savez(tmp_path / "blobs.npz", X=X, y=labels, centers=centers)
    lines = [f"{a!r},{b!r},{'abc'[c]}" for (a, b), c in zip(X.tolist(), labels.tolist())]
    (tmp_path / "blobs.csv").write_text("u,v,group\n" + "\n".join(lines) + "\n")
    (tmp_path / "bare.csv").write_text("u,v\n" + "\n".join(line.rsplit(",", 1)[0]
                                                           for line in lines) + "\n")
    return centers


def _write_grid(tmp_path, datasets, splits=("iid",), extra=""):
    path = tmp_path / "files.toml"
    path.write_text(FILE_GRID.format(datasets=json.dumps(list(datasets)),
                                     splits=json.dumps(list(splits))) + extra)
    return path


def test_a_grid_without_k_takes_each_datasets_number_of_clusters(tmp_path):
    _three_blobs(tmp_path)
    files = [str(tmp_path / "blobs.npz"), f"{tmp_path / 'blobs.csv'}?label-column=group"]
    grid = load_grid(_write_grid(tmp_path, ["s1", "triebe", "garst-grid?side=2", *files]))
    k = {(r.dataset, r.seed): r.settings["k"] for r in grid.runs}
    assert k == {(d, s): want for d, want in zip(["s1", "triebe", "garst-grid?side=2", *files],
                                                  [15, 5, 4, 3, 3]) for s in (0, 1)}
    # A k of the grid, the method or a sweep wins over the dataset's.
    path = _write_grid(tmp_path, ["s1"])
    path.write_text(path.read_text().replace("n-init = 2 }", "n-init = 2, k = 4 }"))
    assert {r.settings["k"] for r in load_grid(path).runs} == {4}
    path.write_text(path.read_text().replace(", k = 4 }", " }\nsweep = { k = [2, 3] }"))
    assert {r.settings["k"] for r in load_grid(path).runs} == {2, 3}
    path.write_text(path.read_text().replace('name = "files"', 'name = "files"\nk = 7'))
    assert {r.settings["k"] for r in load_grid(path).runs} == {2, 3}


def test_a_grid_without_k_on_a_dataset_without_ground_truth_is_refused(tmp_path):
    _three_blobs(tmp_path)
    bare = str(tmp_path / "bare.csv")
    with pytest.raises(ValueError, match=(
            f"no k given, and dataset '{bare}' has neither labels nor true centres to take it "
            r"from; set k in the grid \(k = 15\) or in the method's settings")):
        load_grid(_write_grid(tmp_path, [bare]))
    with pytest.raises(ValueError, match="no k given.*dataset 'nowhere.csv' cannot be loaded"):
        load_grid(_write_grid(tmp_path, ["nowhere.csv"]))
    # With k the grid loads.
    path = _write_grid(tmp_path, [bare])
    path.write_text(path.read_text().replace('name = "files"', 'name = "files"\nk = 3'))
    assert {r.settings["k"] for r in load_grid(path).runs} == {3}


def test_bench_runs_file_datasets_with_labels_and_centres(tmp_path):
    centers = _three_blobs(tmp_path)
    csv_spec = f"{tmp_path / 'blobs.csv'}?label-column=group"
    npz_spec = str(tmp_path / "blobs.npz")
    grid = load_grid(_write_grid(tmp_path, [npz_spec, csv_spec], splits=["dirichlet:0.5"]))
    rows = run_grid(grid, tmp_path / "out", workers=1, progress=lambda line: None)
    assert len(rows) == 4 and not any(r["error"] for r in rows)
    for row in rows:
        assert row["n"] == 60 and len(row["centroids"]) == 3 and 0.0 <= row["ari"] <= 1.0
    by_dataset = {r["dataset"]: r for r in rows if r["seed"] == 0}
    # Centres given (npz): the centre distance is computed; none in the CSV: absent.
    assert by_dataset[npz_spec]["centre_distance"] < 1.0
    assert "centre_distance" not in by_dataset[csv_spec]
    assert load_spec(npz_spec, seed=0).true_centers.tolist() == centers.tolist()


def test_a_label_split_of_an_unlabelled_file_fails_its_runs_saying_how_to_add_labels(tmp_path):
    _three_blobs(tmp_path)
    path = _write_grid(tmp_path, [str(tmp_path / "bare.csv")], splits=["by-label"])
    path.write_text(path.read_text().replace('name = "files"', 'name = "files"\nk = 3'))
    rows = run_grid(load_grid(path), tmp_path / "out", workers=1, progress=lambda line: None)
    assert len(rows) == 2 and all(r["error"] for r in rows)  # failed rows, none finished
    logged = [json.loads(line) for line in (tmp_path / "out" / RUNS_LOG).read_text().splitlines()]
    assert len(logged) == 2
    assert all("needs labels; this dataset has none" in r["error"]
               and "write the dataset as 'FILE.csv?label-column=NAME'" in r["error"] for r in logged)


# -- output, failures ---------------------------------------------------------------


def test_a_grid_hides_the_per_round_lines_unless_verbose(grid_file, tmp_path, capsys):
    from flwr.common.logger import FLOWER_LOGGER, ConsoleHandler

    # What Flower prints goes through its console handler; print it where capsys sees it.
    [console] = [h for h in FLOWER_LOGGER.handlers if isinstance(h, ConsoleHandler)]
    stream = console.setStream(sys.stderr)
    try:
        grid = load_grid(grid_file)
        progress: list[str] = []
        run_grid(grid, tmp_path / "quiet", workers=1, progress=progress.append)
        quiet = capsys.readouterr()
        assert len(progress) == 7 and "round 1/" not in quiet.out + quiet.err
        run_grid(grid, tmp_path / "verbose", workers=1, progress=lambda line: None, verbose=True)
        verbose = capsys.readouterr()
        assert "round 1/5" in verbose.out + verbose.err
    finally:
        console.setStream(stream)


@pytest.mark.slow
def test_spawned_workers_hide_the_per_round_lines_too(grid_file, tmp_path, capfd):
    # Importing Flower in a worker sets its logger to DEBUG; the level must be set after that.
    rows = run_grid(load_grid(grid_file), tmp_path / "out", workers=2, progress=lambda line: None)
    assert len(rows) == 6 and not any(r["error"] for r in rows)
    captured = capfd.readouterr()
    assert "round 1/" not in captured.out + captured.err


def test_runs_whose_clients_all_fail_are_in_runs_csv_with_their_error(grid_file, tmp_path,
                                                                      monkeypatch):
    import fedcluster.client.memory as memory

    def broken_disk(*args, **kwargs):
        raise OSError("disk on fire")

    grid = load_grid(grid_file)
    out = tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(memory, "respond", broken_disk)
        rows = run_grid(grid, out, workers=1, progress=lambda line: None)
    assert len(rows) == 6 and all(row["error"] for row in rows)
    assert [r["run_id"] for r in rows] == [r.run_id for r in grid.runs]
    with open(out / RUNS_CSV) as handle:
        table = list(csv.DictReader(handle))
    assert [r["run_id"] for r in table] == [r.run_id for r in grid.runs]
    assert all(r["error"] for r in table) and not any(r["rounds"] or r.get("score") for r in table)
    assert "disk on fire" in table[0]["error"]
    assert "**6 run(s) failed**" in render(grid, rows)
    # The next call retries them; once they finish, the errors are gone from runs.csv.
    lines: list[str] = []
    rows = run_grid(grid, out, workers=1, progress=lines.append)
    assert lines[0] == "tiny: 6 runs, 0 already done, 6 to run with 1 worker(s)"
    assert len(rows) == 6 and not any(row["error"] for row in rows)
    with open(out / RUNS_CSV) as handle:
        assert not any(r["error"] for r in csv.DictReader(handle))


def test_bench_command_exits_1_naming_the_failed_runs(grid_file, tmp_path, monkeypatch, capsys):
    import fedcluster.client.memory as memory
    from fedcluster.cli import main

    def broken_disk(*args, **kwargs):
        raise OSError("disk on fire")

    monkeypatch.setattr(memory, "respond", broken_disk)
    assert main(["bench", str(grid_file), "--out", str(tmp_path / "out"), "--workers", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("fedcluster: error: 6 of 6 runs did not finish (6 failed, marked in ")
    assert "disk on fire" in err


def test_report_columns_follow_the_grids_splits_when_the_first_method_has_fewer(tmp_path):
    path = tmp_path / "order.toml"
    path.write_text(GRID.replace('splits = ["iid"]', 'splits = ["iid", "dirichlet:0.3"]')
                    .replace('label = "DWF"', 'label = "DWF"\nsplits = ["dirichlet:0.3"]', 1)
                    .replace('[[methods]]\nlabel = "central"',
                             '[[methods]]\nlabel = "all"\nalgorithm = "dwf"\n\n[[methods]]\nlabel = "central"'))
    grid = load_grid(path)
    assert grid.runs[0].split == "dirichlet:0.3"
    rows = [{"method": r.method, "setting": r.setting, "dataset": r.dataset, "split": r.split,
             "seed": r.seed, "score": 1.0, "centre_distance": 1e4, "rounds": 1, "wall_s": 0.1}
            for r in grid.runs]
    assert "| method | s1 iid | s1 dirichlet:0.3 |" in render(grid, rows)


def test_a_grid_that_standardises_clusters_and_scores_standardised_rows(tmp_path):
    # S1's two features span about 1e6: a raw run's score is about 1e9, a standardised one's
    # about 0.01. The score is of the standardised rows and the run's (standardised) centroids.
    from fedcluster.data import load_dataset
    from fedcluster.metrics import centre_distance

    path = tmp_path / "standardised.toml"
    path.write_text(GRID.split("[[tables]]")[0].replace("seeds = 2", "seeds = 1") + """
[[methods]]
label = "DWF"
algorithm = "dwf"
settings = { num-server-rounds = 3, standardize = true }
""")
    [row] = run_grid(load_grid(path), tmp_path / "out", workers=1, progress=lambda line: None)
    assert row["error"] == ""
    data = load_dataset("s1")
    shift, scale = data.X.mean(axis=0), data.X.std(axis=0)
    Z = (data.X - shift) / scale
    centroids = np.asarray(row["centroids"])
    nearest = ((Z[:, None] - centroids[None]) ** 2).sum(axis=2).min(axis=1)
    assert row["score"] == pytest.approx(nearest.mean(), rel=1e-9)
    assert np.all(np.abs(centroids) < 3)
    # The true centres are compared in the same units.
    assert row["centre_distance"] == pytest.approx(
        centre_distance(centroids, (data.true_centers - shift) / scale), rel=1e-9)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_grid_ends_at_once_and_keeps_its_finished_runs(tmp_path, signum):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) or SIGTERM during
    ``fedcluster bench --workers 2``: one line, exit 130, no traceback, no worker left, and
    the finished runs kept for the next start."""
    path = tmp_path / "long.toml"
    path.write_text(GRID.replace("seeds = 2", "seeds = 50"))
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from fedcluster.cli import main; sys.exit(main())",
         "bench", str(path), "--out", str(out), "--workers", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not ((out / RUNS_LOG).exists() and (out / RUNS_LOG).read_text().strip()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    sent = time.monotonic()
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert time.monotonic() - sent < 15, err
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    done = len((out / RUNS_LOG).read_text().splitlines())
    assert last == (f"fedcluster: interrupted: {done} of {len(load_grid(path).runs)} runs done, kept in "
                    f"{out / RUNS_LOG}; the same command goes on from there"), err
    time.sleep(1)
    group = subprocess.run(["ps", "-o", "pid=,stat=,args=", "-g", str(proc.pid)],
                           capture_output=True, text=True).stdout.splitlines()
    alive = [line for line in group if not line.split()[1].startswith("Z")]  # Z: ended, unreaped
    assert alive == [], group  # no worker of the group outlives it
