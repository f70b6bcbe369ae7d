"""Read a dataset's files into memory where they fit: anonymous memory in huge pages.

Memory-mapped data read in scattered pieces (a minibatch's neighbour lists and feature
rows) from a cold page cache costs one storage read per 4 KiB page: with the maps advised
random access, a sampled step on synthetic-products at 2**23 nodes took 1.32 s cold and
0.54 s warm (the cold run took 1.24M major page faults). Reading the same 4.9 GiB front to
back takes about 6 s at 780 MB/s. So where the files fit comfortably in the memory this
process may use, they are read once, sequentially, before training; where they do not
(the larger-than-memory setting), nothing is read and the maps page in on demand.

The arrays are read into anonymous memory advised transparent huge pages
(`gnnforge._huge_pages`), not left in the page cache behind the maps: a map's pages are
4 KiB unless the kernel happened to cache the file in large folios, and a step reads ~1M
scattered feature rows (TLB misses, as we read the speed-up: these VMs expose no
counters). Layer 1 of the sampled GraphSAGE step at
2**23 nodes (a joined mean over 990k edges of a 3.4 GB table, one thread) took 108-110 ms
over the map and 68 ms in huge pages; the whole step 346 -> 308 ms (2026-12-05, Intel
host, the same step code timed with each; docs/data.md).

"Memory this process may use" is the smaller of the machine's MemAvailable and the
headroom (limit - usage) of every memory cgroup it is in, v1 or v2, ancestors included.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from gnnforge._huge_pages import huge_page_empty
from gnnforge.data._npy_header import NPY_HEADER_ERRORS, read_npy_header
from gnnforge.data._progress import progress_bar

__all__ = ["Warmup", "available_memory_bytes", "read_into_memory", "read_npy"]

FIT_FRACTION = 0.5             # read in when the files take at most this share of it
_CHUNK = 16 * 2**20
_CGROUP_ROOT = Path("/sys/fs/cgroup")
_UNLIMITED = 2**62             # cgroup v1 writes "no limit" as a huge page-rounded number


@dataclass(frozen=True)
class Warmup:
    """What `read_into_memory` did.

    Attributes:
        bytes_read: bytes of files read into memory (0 when skipped).
        seconds: time the reads took.
        skipped: why nothing was read (the files stay memory-mapped), or None.
    """

    bytes_read: int
    seconds: float
    skipped: str | None

    def describe(self) -> str:
        """One clause for a log line."""
        if self.skipped is not None:
            return f"memory-mapped, not read into memory ({self.skipped})"
        return (f"{self.bytes_read / 2**20:,.0f} MiB read into memory (huge pages) in "
                f"{self.seconds:.1f} s")


def read_into_memory(paths: list[Path], *, prefetch: bool | None = None,
                     available: int | None = None, progress: bool | None = None
                     ) -> tuple[list[np.ndarray] | None, Warmup]:
    """The .npy files `paths` as in-memory arrays where they fit, else None.

    Args:
        paths: the files, read in order.
        prefetch: True reads them, False does not, None (default) reads them when they
            take at most FIT_FRACTION of `available`.
        available: bytes this process may use (default: `available_memory_bytes()`).
        progress: the read's progress bar (None: on a terminal only).

    Raises:
        TypeError: `prefetch` is not True, False or None.
        ValueError: a file is not a plain .npy array (named).
    """
    if prefetch is not None and not isinstance(prefetch, bool):
        raise TypeError(f"prefetch must be True, False or None, got {prefetch!r}")
    total = sum(path.stat().st_size for path in paths)
    if prefetch is False:
        return None, Warmup(0, 0.0, "prefetch=False")
    if prefetch is None:
        available = available_memory_bytes() if available is None else available
        if total > FIT_FRACTION * available:
            return None, Warmup(0, 0.0, f"{total / 2**20:,.0f} MiB of files, more than "
                                f"{FIT_FRACTION:.0%} of {available / 2**20:,.0f} MiB "
                                f"available")
    start = time.perf_counter()
    with progress_bar(total=total, desc="reading into memory", progress=progress) as bar:
        arrays = [read_npy(path, bar.update) for path in paths]
    return arrays, Warmup(total, time.perf_counter() - start, None)


def read_npy(path: Path, advance: Callable[[int], object] | None = None) -> np.ndarray:
    """The array of .npy file `path` in anonymous memory advised huge pages (`np.load`'s
    result, read in _CHUNK pieces; `advance(bytes)` after each, with the header's).

    Raises:
        ValueError: the file is not a plain (non-object, C- or Fortran-order) .npy array,
            or ends early (named).
    """
    with open(path, "rb", buffering=0) as file:
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        try:
            shape, fortran, dtype = read_npy_header(file)
        except NPY_HEADER_ERRORS as error:
            raise ValueError(f"{path}: not a .npy array ({error})") from None
        if dtype.hasobject:
            raise ValueError(f"{path}: holds Python objects ({dtype}); only plain arrays "
                             f"are read into memory")
        array = huge_page_empty(shape[::-1] if fortran else shape, dtype)
        _read_exactly(file, memoryview(array.reshape(-1).view(np.uint8)), path, advance)
        if advance is not None:
            advance(file.tell() - array.nbytes)  # the header
    return array.T if fortran else array


def _read_exactly(file: BinaryIO, target: memoryview, path: Path,
                  advance: Callable[[int], object] | None) -> None:
    """Fill `target` from `file` in _CHUNK reads."""
    done = 0
    while done < len(target):
        read = file.readinto(target[done:done + _CHUNK])
        if not read:
            raise ValueError(f"{path}: ends after {done:,} of {len(target):,} data bytes")
        done += read
        if advance is not None:
            advance(read)


def available_memory_bytes() -> int:
    """The smaller of MemAvailable and the headroom of this process's memory cgroups."""
    headrooms = [_mem_available()] + _cgroup_headrooms()
    known = [value for value in headrooms if value is not None]
    return max(0, min(known)) if known else _UNLIMITED


def _mem_available() -> int | None:
    try:
        lines = Path("/proc/meminfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


def _cgroup_headrooms(membership: str | None = None,
                      root: Path = _CGROUP_ROOT) -> list[int]:
    """limit - usage of every limited memory cgroup holding this process (and ancestors).

    `membership` is /proc/self/cgroup's text (read when None), `root` the cgroup mount."""
    if membership is None:
        try:
            membership = Path("/proc/self/cgroup").read_text()
        except OSError:
            return []
    headrooms = []
    for line in membership.splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):                          # v1
            files = (root / "memory", "memory.limit_in_bytes", "memory.usage_in_bytes")
        elif controllers == "":                                          # v2
            files = (root, "memory.max", "memory.current")
        else:
            continue
        headrooms += _headrooms_up(files[0], path, files[1], files[2])
    return headrooms


def _headrooms_up(root: Path, path: str, limit_name: str, usage_name: str) -> list[int]:
    """Headroom of the group at `path` under `root` and of each ancestor below `root`."""
    headrooms = []
    group = root / path.lstrip("/")
    while True:
        limit, usage = _read_int(group / limit_name), _read_int(group / usage_name)
        if limit is not None and usage is not None and limit < _UNLIMITED:
            headrooms.append(limit - usage)
        if group == root or root not in group.parents:
            return headrooms
        group = group.parent


def _read_int(path: Path) -> int | None:
    """The integer in a cgroup file; None when absent, unreadable or "max"."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
