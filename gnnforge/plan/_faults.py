"""Page faults in a timed call, and what one costs here: the measured selection compares
candidates by their compute, not by the allocator's page faults.

glibc's malloc gives large freed blocks back to the kernel (blocks above its mmap
threshold are unmapped; the heap's top is trimmed past its trim threshold), so a later
call that allocates a tensor of the same size touches fresh pages again: a minor fault
per 4 KiB page, each zeroed by the kernel. Here that is about 1.5 us a page, so one
2708 x 256 float tensor (Cora, width 256: 677 pages) costs about 1 ms, as much as a
whole GCN inference call. Which call faults depends on the heap's history (what ran
before it and what it freed), not on the plan run now: in the planner benchmark's
interleaved rounds the same plan faulted in 0 of 20 runs or 14 of 20 depending on
its neighbours in the rounds, and a race whose candidates alternate charged one
candidate the faults of the other's frees (Cora GCN 256 -> 256: (ÂX)W faulted in no
run after Â(XW) and ran 20% faster than the default, which faulted after every other
plan; the race kept it, and the benchmark's rounds then timed it 20% slower).

`minor_faults()` reads the process's count (every thread's: intra-op threads fault
too); `page_fault_seconds()` measures one fault's cost once per process by touching a
fresh anonymous mapping, so a timed call's seconds can be corrected by
`faults x page_fault_seconds()` (`gnnforge.plan._race.Race`'s `fault_s`).
"""

from __future__ import annotations

import mmap
import resource
import time
from functools import cache

__all__ = ["minor_faults", "page_fault_seconds"]

_PROBE_PAGES = 512  # 2 MiB: enough faults to time, about 1 ms here
_PROBE_REPEATS = 2


def minor_faults() -> int:
    """The process's minor page faults so far (all threads)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _touch_fresh_pages(pages: int) -> tuple[float, int]:
    """(seconds, faults) of writing one byte into each page of a fresh anonymous
    mapping: the cost of a first touch, fault and kernel zeroing included."""
    size = pages * mmap.PAGESIZE
    with mmap.mmap(-1, size) as mapping:
        faults = minor_faults()
        start = time.perf_counter()
        for offset in range(0, size, mmap.PAGESIZE):
            mapping[offset] = 1
        seconds = time.perf_counter() - start
        faults = minor_faults() - faults
    return seconds, faults


@cache
def page_fault_seconds() -> float:
    """Seconds one minor page fault (first touch of a fresh page) costs in this process,
    the least of a few probes of `_PROBE_PAGES` pages (0.0 if no probe faulted, e.g. a
    kernel that pre-faults anonymous mappings). Measured once per process (~2-3 ms)."""
    costs = []
    for _ in range(_PROBE_REPEATS):
        seconds, faults = _touch_fresh_pages(_PROBE_PAGES)
        if faults > 0:
            costs.append(seconds / faults)
    return min(costs) if costs else 0.0
