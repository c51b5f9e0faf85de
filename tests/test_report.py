"""report.html: one self-contained page per run, regenerated identically by `fedcluster report`."""

from __future__ import annotations

import dataclasses
import html
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from fedcluster.cli import _write_report, main
from fedcluster.client.memory import InMemoryFederation
from fedcluster.methods import METHODS
from fedcluster.report import REPORT_FILE, Reference, RoundReports, verdict, write_report
from fedcluster.server.artifacts import write_run

pytest.importorskip("matplotlib", reason="the report's charts need matplotlib (the test extra)")

SECTIONS = ("Score per round", "Centroid movement per round", "Clients per round",
            "Cluster sizes", "Centroids", "Privacy", "Settings other than the defaults")
CENTRES = np.array([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0]])


class Page(HTMLParser):
    """The parts of a page the tests look at: headings, charts, links and their text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.headings: list[str] = []
        self.svgs = 0
        self.links: list[str] = []
        self.paragraphs: list[str] = []
        self._open: str | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag == "svg":
            self.svgs += 1
        self.links += [value for name, value in attrs if name in ("src", "href") and value]
        if tag in ("h2", "p"):
            self._open = tag

    def handle_endtag(self, tag):
        if tag == self._open:
            self._open = None

    def handle_data(self, data):
        if self._open == "h2":
            self.headings.append(data)
        elif self._open == "p":
            self.paragraphs.append(data)


def _run(tmp_path: Path, name: str, d: int = 2, **settings):
    rng = np.random.default_rng(0)
    centres = np.zeros((3, d))
    centres[:, :2] = CENTRES
    X = np.concatenate([c + rng.normal(size=(100, d)) for c in centres])
    strategy = METHODS["dwf"].strategy(algorithm="dwf", k=3, **settings)
    result = strategy.fit(InMemoryFederation([X[0::2], X[1::2]]))
    out = tmp_path / name
    write_run(result, out)
    return result, out


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    result, out = _run(tmp_path_factory.mktemp("report"), "plain", num_server_rounds=6)
    reference = Reference("three blobs", CENTRES, 2.0)
    return result, write_report(result, out, reference=reference)


def test_the_report_has_every_section_as_a_chart_with_the_verdict_and_settings(plain):
    result, path = plain
    text = path.read_text(encoding="utf-8")
    page = Page(text)
    assert list(page.headings) == list(SECTIONS)
    assert page.svgs == 5  # score, movement, clients, sizes, centroids (no DP: no epsilon)
    assert f'<p class="verdict">{html.escape(verdict(result))}</p>' in text
    assert "true centres of three blobs" in text  # the reference line's legend
    assert "restart 0" in text and "answered" in text and "rejected" in text
    # The changed settings' table lists k = 3 and the rounds, not the defaults.
    assert "<td>k</td><td>3</td>" in text and "<td>num-server-rounds</td><td>6</td>" in text
    assert "<td>tol</td>" not in text.split("<details>")[0]
    assert "No differential privacy" in text


def test_the_verdict_says_in_one_sentence_how_the_run_ended(plain):
    result, _ = plain
    ended = {
        "converged": dataclasses.replace(result, converged=True, rounds=4),
        "limit": dataclasses.replace(result, converged=False, rounds=6),
        "budget": dataclasses.replace(result, converged=False, rounds=2,
                                      stop_reason="the epsilon budget is spent"),
        "one-shot": dataclasses.replace(result, algorithm="kfed", history=[], score=1.5,
                                        settings={**result.settings, "algorithm": "kfed"}),
        "restarts": dataclasses.replace(result, converged=True, rounds=3, best_restart=1,
                                        settings={**result.settings, "n-init": 2}),
    }
    assert {name: verdict(r) for name, r in ended.items()} == {
        "converged": "Converged after 4 rounds: the centroids moved less than tol = 0.0001.",
        "limit": "Did not converge: stopped at the round limit, 6 rounds, with the centroids "
                 "still moving more than tol = 0.0001.",
        "budget": "Stopped by its privacy budget after 2 rounds (the epsilon budget is spent); "
                  "the centroids of the last round are kept.",
        "one-shot": "Finished in one exchange (kfed has no rounds), score 1.5.",
        "restarts": "Restart 1, the best of 2: converged after 3 rounds: the centroids moved "
                    "less than tol = 0.0001.",
    }


def test_the_report_is_one_file_without_an_external_reference(plain):
    _, path = plain
    page = Page(path.read_text(encoding="utf-8"))
    assert [link for link in page.links if not link.startswith("#")] == []
    assert sorted(p.name for p in path.parent.iterdir()) == ["history.csv", "model.pb",
                                                             REPORT_FILE]


def test_a_dp_run_reports_its_epsilon_per_round_and_its_bounds(tmp_path):
    result, out = _run(tmp_path, "dp", num_server_rounds=3, dp="central",
                       secure_aggregation=True, data_bounds="-10:20", init="random")
    text = write_report(result, out).read_text(encoding="utf-8")
    assert "Central differential privacy" in text and "data bounds used: -10:20" in text
    epsilon = text.split("<h2>Privacy</h2>")[1].split("<h2>")[0]
    assert "restart 0" in epsilon and "budget" in epsilon  # the spent curve and the budget line
    assert Page(text).svgs == 6


def test_centroids_above_two_dimensions_are_shown_on_their_principal_axes(tmp_path):
    result, out = _run(tmp_path, "5d", d=5, num_server_rounds=3)
    text = write_report(result, out).read_text(encoding="utf-8")
    assert "principal axis 1" in text and "first two principal axes of the centroids" in text


def test_fedcluster_report_regenerates_the_page_byte_for_byte(tmp_path, capsys):
    result, out = _run(tmp_path, "again", num_server_rounds=3)
    first = write_report(result, out).read_bytes()
    (out / REPORT_FILE).unlink()
    assert main(["report", str(out)]) == 0
    assert (out / REPORT_FILE).read_bytes() == first
    assert capsys.readouterr().out == f"report: {out / REPORT_FILE}\n"


def test_fedcluster_report_names_a_damaged_or_missing_model_in_one_line(tmp_path, capsys):
    _, out = _run(tmp_path, "damaged", num_server_rounds=2)
    model = out / "model.pb"
    model.write_bytes(model.read_bytes()[:-7])
    capsys.readouterr()  # the run's log, not the command's
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"fedcluster: error: {model}: ")
    assert not (out / REPORT_FILE).exists()
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err == (f"fedcluster: error: model file not found: "
                                       f"{tmp_path / 'nowhere' / 'model.pb'}\n")


def test_without_matplotlib_the_run_says_the_report_was_skipped(tmp_path, monkeypatch, capsys):
    result, out = _run(tmp_path, "bare", num_server_rounds=2)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import fails as if absent
    assert _write_report(result, out, None) == ("report skipped: matplotlib is not installed "
                                                "(pip install 'fedcluster[bench]')")
    assert not (out / REPORT_FILE).exists()
    capsys.readouterr()  # the run's log, not the command's
    assert main(["report", str(out)]) == 2
    assert capsys.readouterr().err.startswith("fedcluster: error: report not written: matplotlib")


def _browser() -> str | None:
    return next((found for name in ("chromium", "chromium-browser", "google-chrome")
                 if (found := shutil.which(name))), None)


@pytest.mark.slow
def test_the_report_renders_in_headless_chromium_with_visible_charts(plain, tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip("no Chromium found (Debian: apt-get install chromium; .ci/run installs it)")
    Image = pytest.importorskip("PIL.Image", reason="Pillow reads the screenshot")
    _, path = plain
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--window-size=1000,4200"]
    dom = subprocess.run([*flags, "--dump-dom", path.as_uri()], capture_output=True, text=True,
                         timeout=120)
    assert Page(dom.stdout).svgs == 5, dom.stderr[-2000:]
    shot = tmp_path / "report.png"
    subprocess.run([*flags, f"--screenshot={shot}", path.as_uri()], capture_output=True,
                   timeout=120, check=True)
    pixels = np.asarray(Image.open(shot).convert("L"))
    assert pixels.std() > 10  # not a blank page
    # Each chart's frame has a top and a bottom edge: a row with an unbroken dark line of
    # 250 pixels or more, which no line of text has.
    assert _framed_lines(pixels < 80, 250) == 2 * 5


def _framed_lines(dark: np.ndarray, length: int) -> int:
    """The number of runs of adjacent rows that hold an unbroken dark line of ``length``."""
    window = np.ones(length, dtype=int)
    lined = np.array([np.convolve(row, window, "valid").max() >= length
                      for row in dark.astype(int)])
    return int(np.count_nonzero(lined[1:] & ~lined[:-1]) + lined[0])


# -- pages while the run goes on (RoundReports, the strategy's checkpoint hook) --------------------
def _fit_with_pages(tmp_path: Path, reports_of, **settings) -> tuple[list[str | None], Path]:
    """Fit DWF on three blobs with a RoundReports hook; the page after each progress (None: none)."""
    rng = np.random.default_rng(0)
    X = np.concatenate([c + rng.normal(size=(100, 2)) for c in CENTRES])
    strategy = METHODS["dwf"].strategy(algorithm="dwf", k=3, tol=0.0, **settings)
    out = tmp_path / "running"
    reports = reports_of(out, strategy.settings)
    pages: list[str | None] = []

    def hook(progress):
        reports(progress)
        page = out / REPORT_FILE
        pages.append(page.read_text(encoding="utf-8") if page.exists() else None)
        page.unlink(missing_ok=True)

    strategy.fit(InMemoryFederation([X[0::2], X[1::2]]), checkpoint=hook)
    return pages, out


def test_a_run_in_progress_has_a_page_after_each_round_while_pages_are_cheap(tmp_path):
    pages, _ = _fit_with_pages(tmp_path, lambda out, s: RoundReports(out, s, share=1e9),
                               num_server_rounds=3)
    # The initialisation, three rounds, the scored restart.
    assert len(pages) == 5 and None not in pages
    after_round_2 = pages[2]
    assert "In progress when written" in after_round_2
    assert "round 2 of at most 3 done" in after_round_2
    assert "This page is replaced as the run goes on" in after_round_2
    page = Page(after_round_2)
    assert list(page.headings) == list(SECTIONS)
    # Score, movement, clients and centroids; the sizes are counted when the restart is scored.
    assert page.svgs == 4 and "Measured when the restart is scored" in after_round_2
    assert "restart 0" in after_round_2
    # Between restarts the page shows the best scored restart, its sizes measured.
    assert "1 of 1 restart scored" in pages[-1] and Page(pages[-1]).svgs == 5


def test_pages_take_at_most_their_share_of_the_run_time(tmp_path):
    """A clock that each reading moves on by 1 s: a page costs 1 s, a round 1 s."""
    ticks = iter(range(1000))
    pages, _ = _fit_with_pages(tmp_path, lambda out, s: RoundReports(
        out, s, share=0.1, clock=lambda: float(next(ticks))), num_server_rounds=20)
    written = [i for i, page in enumerate(pages) if page is not None]
    # The first page (the initialisation) always, the clock started at 0 and read at 1; the
    # next once 1 s of pages is within 10 % of the time since (it reads 10), then 2 s of 20 s.
    assert len(pages) == 22 and written == [0, 8, 17], written


def test_fedcluster_report_has_no_options_it_would_ignore(capsys):
    for option in ("--clients", "--split"):
        with pytest.raises(SystemExit) as info:
            main(["report", "results", option, "3"])
        assert info.value.code == 2
        assert f"unrecognized arguments: {option} 3" in capsys.readouterr().err


def test_simulate_refuses_to_replace_a_finished_run_unless_told(tmp_path, capsys, monkeypatch):
    _, out = _run(tmp_path, "finished", num_server_rounds=2)
    before = (out / "model.pb").read_bytes()
    capsys.readouterr()
    assert main(["simulate", "--out", str(out), "--clients", "2"]) == 2
    assert capsys.readouterr().err == (
        f"fedcluster: error: --out {out} holds a finished run ({out / 'model.pb'}); give another "
        "--out, or --overwrite to replace it\n")
    assert (out / "model.pb").read_bytes() == before
    # --overwrite goes on to the simulation (stopped here: what follows is the simulation's).
    from fedcluster import simulation

    def stop(*args, **kwargs):
        raise simulation.SimulationError("the simulation would start here")

    monkeypatch.setattr(simulation, "simulate", stop)
    assert main(["simulate", "--out", str(out), "--clients", "2", "--overwrite"]) == 1
    assert capsys.readouterr().err.endswith("error: the simulation would start here\n")


def test_a_second_run_without_out_keeps_the_first_and_writes_beside_it(tmp_path, capsys,
                                                                       monkeypatch):
    """The README's commands typed one after another (no --out) lose no run and are not refused."""
    from fedcluster import simulation

    monkeypatch.chdir(tmp_path)
    for taken in ("results", "results-2"):
        (tmp_path / taken).mkdir()
    (tmp_path / "results" / "model.pb").write_bytes(b"an earlier run")
    seen = []

    def stop(config, *args, **kwargs):
        seen.append(config.out_dir)
        raise simulation.SimulationError("the simulation would start here")

    monkeypatch.setattr(simulation, "simulate", stop)
    assert main(["simulate", "--clients", "2"]) == 1
    assert seen == ["results-3"]
    assert "results holds an earlier run; this one writes to results-3" in capsys.readouterr().out
    assert main(["simulate", "--clients", "2", "--overwrite"]) == 1
    assert seen[-1] == "results"
    assert (tmp_path / "results" / "model.pb").read_bytes() == b"an earlier run"


def test_each_rejection_is_on_the_page_with_its_reason_and_in_the_model(tmp_path):
    """A client whose counts are not whole numbers is rejected every round, by name and reason."""
    from fedcluster.client.respond import respond
    from fedcluster.server.artifacts import read_model

    def fractional(X, request, node_config):
        summary = respond(X, request, node_config)
        if summary.counts is None:
            return summary
        return dataclasses.replace(summary, counts=summary.counts + 0.5)

    rng = np.random.default_rng(0)
    X = np.concatenate([c + rng.normal(size=(100, 2)) for c in CENTRES])
    strategy = METHODS["dwf"].strategy(algorithm="dwf", k=3, num_server_rounds=2, tol=0.0)
    result = strategy.fit(InMemoryFederation([X[0::3], X[1::3], X[2::3]],
                                             responders={2: fractional}))
    out = tmp_path / "rejected"
    write_run(result, out)
    text = write_report(result, out).read_text(encoding="utf-8")
    trained = [r for r in read_model(out / "model.pb").history if r.phase == "train"]
    assert [r.rejections for r in trained] == [
        ("node 2: malformed reply: 'counts' are not whole numbers",)] * 2
    clients = text.split("<h2>Clients per round</h2>")[1].split("<h2>")[0]
    why = "<td>node 2: malformed reply: &#x27;counts&#x27; are not whole numbers</td>"
    for phase, round_ in (("init", 0), ("train", 1), ("train", 2)):
        assert f"<tr><td>0</td><td>{phase}</td><td>{round_}</td>{why}</tr>" in clients


# -- the charts shared with `fedcluster bench` -------------------------------------------------------
@pytest.mark.parametrize(("entries", "columns"), [(3, 1), (16, 1), (25, 2)])
def test_a_legend_stands_beside_the_curves_in_columns_for_a_large_grid(entries, columns):
    from fedcluster.charts import line_chart

    rounds = np.arange(1, 31)
    series = {f"method {i} setting {i}": (rounds, 100.0 / rounds + i) for i in range(entries)}
    fig = line_chart(series, "score", log_y=True)
    fig.draw_without_rendering()
    ax = fig.axes[0]
    texts = ax.get_legend().get_texts()
    assert len(texts) == entries
    assert len({round(t.get_window_extent().x0) for t in texts}) == columns
    # Wholly right of the axes: no curve under it.
    assert ax.get_legend().get_window_extent().x0 > ax.get_window_extent().x1


def test_fedcluster_report_of_an_interrupted_run_is_the_page_of_its_checkpoint(tmp_path, capsys):
    from fedcluster.server.checkpoint import CheckpointWriter

    class Interrupted(Exception):
        pass

    rng = np.random.default_rng(0)
    X = np.concatenate([c + rng.normal(size=(100, 2)) for c in CENTRES])
    strategy = METHODS["dwf"].strategy(algorithm="dwf", k=3, num_server_rounds=6, tol=0.0)
    out = tmp_path / "cut"
    checkpoint = CheckpointWriter(out, strategy.settings, {})

    def stop_after_round_2(progress):
        checkpoint(progress)
        if progress.round == 2:
            raise Interrupted

    with pytest.raises(Interrupted):
        strategy.fit(InMemoryFederation([X[0::2], X[1::2]]), checkpoint=stop_after_round_2)
    capsys.readouterr()  # the run's log
    assert main(["report", str(out)]) == 0
    assert capsys.readouterr().out == f"report: {out / REPORT_FILE}\n"
    page = (out / REPORT_FILE).read_text(encoding="utf-8")
    assert "In progress when written" in page and "round 2 of at most 6 done" in page
    assert Page(page).svgs == 4  # no cluster sizes before the restart is scored
