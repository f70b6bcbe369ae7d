"""benchmarks/_memory_limit.py: a child in its own memory cgroup is held to the limit
(file pages reclaimed, its own allocations killed), and benchmarks/larger_than_memory.py
end to end on a tiny graph."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _memory_limit import evict_from_page_cache, run_limited  # noqa: E402

LIMIT = 96 * 2**20


def _can_limit() -> str:
    """Why this machine cannot create memory cgroups ('' when it can)."""
    try:
        run = run_limited([sys.executable, "-c", "pass"], LIMIT)
    except (PermissionError, OSError) as error:
        return str(error)
    return "" if run.returncode == 0 else f"a trivial child failed: {run.stderr[-200:]}"


WHY_NOT = _can_limit() if sys.platform == "linux" else "Linux cgroups only"
pytestmark = pytest.mark.skipif(bool(WHY_NOT), reason=WHY_NOT)


def test_a_file_larger_than_the_limit_is_read_through_a_map_within_it(tmp_path):
    path = tmp_path / "big.npy"
    np.save(path, np.ones(64 * 2**20, dtype=np.float32))         # 256 MiB
    evict_from_page_cache([path])
    script = (f"import numpy as np; a = np.load({str(path)!r}, mmap_mode='r'); "
              f"print(int(a.sum(dtype=np.float64)))")
    run = run_limited([sys.executable, "-c", script], LIMIT)
    assert run.returncode == 0, run.stderr[-1000:]
    assert int(run.stdout) == 64 * 2**20 and run.oom_kills == 0
    assert run.peak_bytes is None or run.peak_bytes <= LIMIT
    assert run.limit_hits > 0                    # the kernel had to reclaim: it was binding


def test_allocating_past_the_limit_is_killed_and_counted():
    run = run_limited([sys.executable, "-c", "b = bytearray(400 * 2**20); print(len(b))"],
                      LIMIT)
    assert run.returncode == -9 and run.oom_kills >= 1 and run.stdout == ""


def test_the_limit_and_the_environment_reach_the_child():
    run = run_limited([sys.executable, "-c", "import os; print(os.environ['PROBE'])"], LIMIT,
                      env={**os.environ, "PROBE": "yes"})
    assert (run.returncode, run.stdout.strip(), run.limit_bytes) == (0, "yes", LIMIT)


def test_the_benchmark_runs_every_configuration_on_a_tiny_graph(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GNNFORGE_CACHE": str(_cache(tmp_path))}
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "larger_than_memory.py"),
                          "--log2", "12", "--steps", "3", "--limit-gib", "2",
                          "--cache-rows", "500", "--kappas", "4",
                          "--configs", "none,cache,kappa,readahead,labor"],
                         capture_output=True, text=True, cwd=ROOT, timeout=900, env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith(("| cache", "| no cache",
                                                                            "| LABOR"))]
    labels = [row.split(" | ")[0] for row in rows]
    assert labels == ["| no cache, kappa 1", "| cache 500 rows, kappa 1",
                      "| cache 500 rows, kappa 4", "| cache 500 rows, kappa 1, kernel readahead",
                      "| LABOR-0, cache 500 rows, kappa 1", "| LABOR-0, cache 500 rows, kappa 4"]
    assert "n/a (no cache)" in rows[0] and "%" in rows[1] and "failed" not in out.stdout
    assert "storage reads per epoch (MiB)" in out.stdout


def _cache(tmp_path: Path) -> Path:
    sys.path.insert(0, str(ROOT))
    from tests._cache import seeded_cache

    return seeded_cache(tmp_path / "cache")
