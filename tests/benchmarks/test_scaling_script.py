"""benchmarks/scaling.py: small sizes end to end (both measurements, table, plot)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_scaling_prints_a_row_per_size_and_writes_the_plot(tmp_path):
    png = tmp_path / "scaling.png"
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scaling.py"), "--sizes",
                          "11", "--steps", "2", "--repeats", "1", "--png", str(png)],
                         capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith("| 2^")]
    assert len(rows) == 1 and "failed" not in rows[0]
    cells = rows[0].split(" | ")
    assert cells[0] == "| 2^11 (2,048)" and float(cells[2]) > 0 and cells[3] == "1.00x"
    input_nodes, sampled_edges = (int(cell.replace(",", "")) for cell in cells[4:6])
    assert 0 < input_nodes <= 2048 and sampled_edges > 0
    assert float(cells[6]) > 0 and cells[7] == "1.00x"         # time per 1k sampled edges
    assert cells[9] == "not run (no --dgl)" and cells[10] == "n/a"
    assert float(cells[12]) >= 0 and cells[13] == "1.00x"      # full graph, per edge
    assert "sampled time per step: max/min = 1.00" in out.stdout
    assert "sampled time per sampled edge: max/min = 1.00" in out.stdout
    assert png.stat().st_size > 1000


def test_sizes_outside_full_sizes_are_sampled_only_and_say_so(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scaling.py"), "--sizes",
                          "10,11", "--full-sizes", "10", "--steps", "1", "--repeats", "1"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith("| 2^")]
    assert len(rows) == 2 and "failed" not in out.stdout
    assert "not in --full-sizes" not in rows[0]
    assert float(rows[1].split(" | ")[2]) > 0                  # 2^11 sampled ran
    assert "not run (not in --full-sizes 10)" in rows[1]
    assert "full graph: median of 1 at 2^10;" in out.stdout


def test_dgl_column_says_why_when_dgl_does_not_import(tmp_path):
    """--dgl in an environment without DGL (the project's own): a reason, not a failure."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scaling.py"), "--sizes",
                          "10", "--steps", "1", "--repeats", "1", "--dgl"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    row = next(line for line in out.stdout.splitlines() if line.startswith("| 2^10"))
    dgl_cell = row.split(" | ")[9]
    if importlib.util.find_spec("dgl") is None:
        assert dgl_cell == "DGL skipped: not installed"
    else:  # the peers venv: DGL measured
        assert float(dgl_cell) > 0 and row.split(" | ")[10] == "1.00x"
        assert "DGL's sampled time per step: max/min = 1.00" in out.stdout
