"""Keep a rank's resident memory at its live memory: freed large arrays go back at once.

glibc serves an allocation of at least M_MMAP_THRESHOLD bytes (128 KiB at start) with its
own mmap and unmaps it on free. But each such free raises the threshold to the freed
size (up to 32 MiB), so from then on minibatch-sized arrays come from the heap of the
thread that allocates them and stay there when freed: every thread's heap keeps its own
high-water mark. A rank that prefetches has two busy threads (sampling and fetching in
one, compute in the other) and so two high-water marks; measured on R-MAT 2^17 with 4
ranks, that was 60-115 MiB of a rank's peak RSS, with or without prefetching. Setting
the threshold explicitly turns the raising off (mallopt(3)), so arrays of 128 KiB or
more are unmapped when freed and the peak follows what is alive at once. The price is a
page fault per 4 KiB the next time such an array is written (BENCHMARKS.md,
"Scale-out", measures it against the sampling and compute that fill the array).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

__all__ = ["fix_mmap_threshold"]

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
