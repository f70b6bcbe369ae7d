"""Optionally keep a rank's resident memory at its live memory: freed arrays go back at once.

glibc serves an allocation of at least M_MMAP_THRESHOLD bytes (128 KiB at start) with its
own mmap and unmaps it on free. But each such free raises the threshold to the freed
size (up to 32 MiB), so from then on minibatch-sized arrays come from the heap of the
thread that allocates them and stay there when freed: every thread's heap keeps its own
high-water mark, and a rank that prefetches has two busy threads (sampling and fetching
in one, compute in the other). Setting the threshold explicitly turns the raising off
(mallopt(3)): arrays at least that large are unmapped when freed and the peak follows
what is alive at once. The price is a page fault per 4 KiB each time such an array is
written again, and an unmap per free. Measured with 4 ranks on R-MAT 2^17 (BENCHMARKS.md,
"Scale-out"), that saved a rank 100-190 MiB of peak RSS but made an epoch 1.6-2.3x as
long, so it is opt-in: `GNNFORGE_MMAP_THRESHOLD=131072 gnnforge train --partitioned
...` sets it in every rank.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

__all__ = ["ENV_THRESHOLD", "fix_mmap_threshold", "mmap_threshold_from_env"]

ENV_THRESHOLD = "GNNFORGE_MMAP_THRESHOLD"

_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)
DEFAULT_THRESHOLD = 128 * 1024  # glibc's own starting value, kept fixed


@functools.cache
def _mallopt():
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    # glibc only: musl has no mallopt, and macOS's allocator has no such threshold.
    if not hasattr(libc, "mallopt") or not hasattr(libc, "gnu_get_libc_version"):
        return None
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    libc.mallopt.restype = ctypes.c_int
    return libc.mallopt


def fix_mmap_threshold(nbytes: int = DEFAULT_THRESHOLD) -> bool:
    """Serve allocations of `nbytes` or more by mmap and unmap them on free, always.

    Affects the whole process (every thread's later allocations). Returns False where the
    C library is not glibc (nothing changes there).

    Raises:
        ValueError: when `nbytes` is not a positive int below 2^31.
    """
    if not isinstance(nbytes, int) or not 0 < nbytes < 2**31:
        raise ValueError(f"fix_mmap_threshold: nbytes must be an int in [1, 2^31), got "
                         f"{nbytes!r}")
    mallopt = _mallopt()
    return mallopt is not None and mallopt(_M_MMAP_THRESHOLD, nbytes) == 1


def mmap_threshold_from_env() -> int | None:
    """The threshold `$GNNFORGE_MMAP_THRESHOLD` asks for in bytes (None: unset or empty).

    Raises:
        ValueError: when it is not a whole number of bytes in [1, 2^31).
    """
    setting = os.environ.get(ENV_THRESHOLD, "").strip()
    if not setting:
        return None
    try:
        value = int(setting)
    except ValueError:
        value = 0
    if not 0 < value < 2**31:
        raise ValueError(f"{ENV_THRESHOLD} must be a whole number of bytes in [1, 2^31), "
                         f"e.g. 131072, got {setting!r}")
    return value
