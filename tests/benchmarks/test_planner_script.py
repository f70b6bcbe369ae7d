"""benchmarks/planner.py --keep-freed-memory: after it, re-allocating a freed
multi-megabyte tensor touches no fresh pages, where glibc's initial thresholds fault them
every time (checked in a child process: the setting is the process's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ._scripts import load_script

ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
import ctypes, importlib.util, resource, sys, torch
def faults_of_reallocating(keep):
    # glibc's initial thresholds (128 KiB), which it raises as the process frees large
    # blocks: set, so the baseline does not depend on what importing torch freed
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt(-3, 128 << 10), libc.mallopt(-1, 128 << 10)
    if keep:
        spec = importlib.util.spec_from_file_location("p", sys.argv[1])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.keep_freed_memory()
    counts = []
    for _ in range(6):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        torch.ones(2708, 256).sum()  # 2.8 MB, freed at once
        torch.ones(8, 1 << 18).sum()  # 8 MB
        counts.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return sum(counts[2:])
print(faults_of_reallocating(sys.argv[2] == "keep"))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_keep_freed_memory_stops_the_page_faults_of_reallocation():
    def faults(mode):
        out = subprocess.run([sys.executable, "-c", _CHILD, str(ROOT / "benchmarks" /
                                                               "planner.py"), mode],
                             capture_output=True, text=True, check=True, cwd=ROOT)
        return int(out.stdout.split()[-1])

    # at glibc's initial thresholds freed blocks go back to the kernel: pages fault again
    assert faults("default") >= 1000
    assert faults("keep") < 100


def test_recheck_counts_plans_slower_than_the_default_right_after_the_race(capsys):
    planner = load_script("planner")
    base = dict(model="GCN", graph="cora", widths=[256, 256], training=False,
                default="D", auto_plan="P")
    slower_again = dict(base, recheck={"D": [1.0, 1.01, 0.99, 1.0, 1.02, 1.0],
                                       "P": [1.10, 1.11, 1.09, 1.12, 1.1, 1.1]})
    faster_after = dict(base, graph="pubmed",
                        recheck={"D": [1.0, 1.01, 0.99, 1.0, 1.02, 1.0],
                                 "P": [0.9, 0.91, 0.92, 0.9, 0.9, 0.91]})
    unchanged = dict(base, graph="citeseer", auto_plan="D", recheck={})
    planner._print_recheck([(slower_again, {"slower": True}),
                            (faster_after, {"slower": True}),
                            (unchanged, {"slower": False})])
    out = capsys.readouterr().out
    assert "(2 configurations whose plan is not the default)" in out
    assert "in the benchmark's rounds 2, in the runs right after the race 1" in out
    assert "GCN cora 256->256 infer 0.91" in out and "pubmed" not in out
