"""benchmarks/before_after.py's pure parts: the export of a revision and the summary."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import before_after  # noqa: E402

LABELS = ["before (a)", "before again (a)", "after (b)"]


def _median(rows):
    return {(label, cell): value for cell, values in rows.items()
            for label, value in zip(LABELS, values)}


def test_the_summary_measures_change_against_the_runs_own_noise():
    median = _median({"layer x": (1.0, 1.21, 1.1), "layer y": (2.0, 2.0, 3.0)})
    line = before_after.summary(median, ["layer x", "layer y"], LABELS)
    assert "range 1.000-1.500 over 2 cells" in line
    assert "median 0.105, max 0.210" in line
    assert line.endswith("exceeds the largest noise: 1")


def test_the_table_prints_one_row_per_cell_with_both_ratios(capsys):
    before_after.print_table(_median({"c": (2.0, 8.0, 2.0)}), ["c"], LABELS)
    rows = capsys.readouterr().out.splitlines()
    assert rows[2] == "| c | 2000.000 | 8000.000 | 2000.000 | 4.000 | 0.500 |"


def test_export_writes_the_package_of_a_revision(tmp_path):
    source = before_after.export("HEAD", tmp_path)
    assert (source / "gnnforge" / "__init__.py").is_file()
    assert before_after.native_sources_equal("HEAD", "HEAD")
