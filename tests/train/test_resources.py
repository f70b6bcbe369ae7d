"""peak_rss_mib reads this process's own high-water mark, not one inherited from its parent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gnnforge.train._resources import peak_rss_mib

ROOT = Path(__file__).resolve().parents[2]


def test_the_peak_grows_with_what_the_process_touches():
    # In a fresh process: this one's peak may already be above its RSS plus 200 MiB.
    child = subprocess.run(
        [sys.executable, "-c", "from gnnforge.train._resources import peak_rss_mib; "
                               "before = peak_rss_mib(); block = bytearray(200 * 2**20); "
                               "print(peak_rss_mib() - before)"],
        cwd=ROOT, capture_output=True, text=True, check=True)
    assert float(child.stdout) >= 150, child.stdout


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux /proc only")
def test_a_child_of_a_large_parent_reads_its_own_peak():
    block = bytearray(1536 * 2**20)  # the parent holds 1.5 GiB when it starts the child
    child = subprocess.run(
        [sys.executable, "-c", "from gnnforge.train._resources import peak_rss_mib; "
                               "print(peak_rss_mib())"],
        cwd=ROOT, capture_output=True, text=True, check=True)
    del block
    assert float(child.stdout) < 1024, child.stdout  # ru_maxrss would read >= 1.5 GiB
