"""benchmarks/source_blocks.py at a small size: both tables, bits checked, both GCN sides."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gnnforge.ops import _native

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not _native.available(), reason="no native kernels here")
def test_source_blocks_prints_the_kernel_and_the_gcn_tables():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "source_blocks.py"),
                          "--sizes", "11", "--ranges", "1", "--repeats", "1", "--width", "16"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line.split(" | ") for line in out.stdout.splitlines() if line.startswith("| 2^11")]
    kernel, gcn = rows[:2], rows[2:]
    assert [row[1] for row in kernel] == ["one pass", "1 MiB"]
    # Times are printed, not asserted on: at this size a fast host rounds them to 0.0 ms.
    assert all(float(row[2].replace(",", "")) >= 0 for row in kernel)
    assert kernel[0][4] == "1.00x |"
    (gcn_row,) = gcn
    assert float(gcn_row[1]) >= 0 and float(gcn_row[3]) >= 0, gcn_row
    assert len(gcn_row) == 8 and gcn_row[5].endswith("x"), gcn_row  # speed-up, then chosen
