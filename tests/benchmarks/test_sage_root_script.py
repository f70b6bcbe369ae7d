"""benchmarks/sage_root.py at a small size: a row per thread count, both forms timed, the
two outputs equal within float32 rounding."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_sage_root_prints_both_forms_per_thread_count():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sage_root.py"),
                          "--nodes", "4096", "--batches", "2", "--repeats", "1",
                          "--threads", "1,2"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line.strip("|").split(" | ") for line in out.stdout.splitlines()
            if line.startswith("| 1 |") or line.startswith("| 2 |")]
    assert [row[0].strip() for row in rows] == ["1", "2"], out.stdout
    for row in rows:
        destinations, split, joined = (float(row[i].replace(",", "")) for i in (1, 3, 4))
        assert destinations > 0 and split > 0 and joined > 0, row
        assert row[5].endswith("x"), row
        assert float(row[6]) < 1e-4, row
