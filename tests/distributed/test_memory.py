"""A fixed mmap threshold returns freed arrays to the system at once (glibc); the
opt-in setting is read from the environment and checked."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from gnnforge.distributed import fix_mmap_threshold
from gnnforge.distributed._memory import _mallopt

# In a fresh process (the setting is process-wide): free an 8 MiB array once, so glibc
# raises its threshold past 8 MiB, then allocate, touch and free another one and report
# how much of it stayed resident.
_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from gnnforge.distributed import fix_mmap_threshold

    def rss():
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024

    fixed = sys.argv[1] == "fixed"
    if fixed:
        assert fix_mmap_threshold()
    first = np.ones(1 << 20)  # 8 MiB
    del first
    before = rss()
    second = np.ones(1 << 20)
    del second
    print((rss() - before) / 2**20)
""")


def _resident_after_free(mode: str) -> float:
    out = subprocess.run([sys.executable, "-c", _CHILD, mode], capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip())


@pytest.mark.skipif(_mallopt() is None, reason="the C library is not glibc")
def test_freed_arrays_leave_the_process_with_the_threshold_fixed():
    assert _resident_after_free("fixed") < 1.0  # MiB: the 8 MiB array was unmapped
    assert _resident_after_free("default") > 6.0  # it stayed in the heap


def test_threshold_checked():
    with pytest.raises(ValueError, match="nbytes must be an int"):
        fix_mmap_threshold(0)
    with pytest.raises(ValueError, match="nbytes must be an int"):
        fix_mmap_threshold(2**31)


def test_threshold_from_the_environment(monkeypatch):
    from gnnforge.distributed._memory import ENV_THRESHOLD, mmap_threshold_from_env

    monkeypatch.delenv(ENV_THRESHOLD, raising=False)
    assert mmap_threshold_from_env() is None
    monkeypatch.setenv(ENV_THRESHOLD, " 131072 ")
    assert mmap_threshold_from_env() == 131072
    for bad in ("128k", "0", "-5", str(2**31)):
        monkeypatch.setenv(ENV_THRESHOLD, bad)
        with pytest.raises(ValueError, match=f"GNNFORGE_MMAP_THRESHOLD must be .* got '{bad}'"):
            mmap_threshold_from_env()
