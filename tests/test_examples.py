"""The examples in examples/ run as written and show what they say."""

from __future__ import annotations

import runpy
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_digits_example_matches_pooled_k_means_and_writes_its_report(tmp_path, capsys):
    example = runpy.run_path(str(REPO / "examples" / "digits_five_owners.py"))
    figures = example["main"](str(tmp_path))
    # Five skewed owners end within 1 % of k-means on the pooled rows (10 starts).
    assert figures["federated_msd"] <= 1.01 * figures["pooled_msd"], figures
    assert figures["federated_ari"] > 0.6 and figures["pooled_ari"] > 0.6, figures
    out = capsys.readouterr().out
    assert out.count("owner ") == 5 and "ratio" in out
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")
