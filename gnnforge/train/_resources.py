"""What a sampled node-training run reports of its resources: the line it ends with
(issue 32's target format) and the bytes it read from storage."""

from __future__ import annotations

import resource
import sys
from pathlib import Path

__all__ = ["peak_rss_mib", "resource_line", "storage_read_bytes"]


def peak_rss_mib() -> float:
    """This process's peak resident set size so far, in MiB.

    On Linux the high-water mark of this process's own memory (`VmHWM`): `getrusage`'s
    ru_maxrss survives fork and exec, so a child started by a process holding 1.6 GiB
    reads at least 1.6 GiB whatever it used itself. Elsewhere ru_maxrss (KiB on Linux,
    bytes on macOS)."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def storage_read_bytes() -> int | None:
    """Bytes this process has caused to be read from storage so far (Linux: `read_bytes`
    of /proc/self/io: page-cache misses, memory-mapped pages included; reads served from
    the page cache do not count). None where the kernel does not say."""
    try:
        text = Path("/proc/self/io").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return None


def resource_line(steps: int, seconds: float, data_bytes: int) -> str:
    """`steps/s=S peak_rss_mib=M data_mib=D`: optimiser steps per second of training time,
    the peak RSS, and the bytes of structure + features the run holds, in MiB."""
    rate = steps / seconds if seconds > 0 else 0.0
    return (f"steps/s={rate:.2f} peak_rss_mib={peak_rss_mib():.0f} "
            f"data_mib={data_bytes / 2**20:.0f}")
