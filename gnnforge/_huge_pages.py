"""Transparent huge pages for large anonymous buffers: fewer page faults and TLB misses.

Linux maps memory in 4 KiB pages unless a range is advised MADV_HUGEPAGE (under the
common `madvise` setting of /sys/kernel/mm/transparent_hugepage/enabled) before its
first touch; then it backs each whole, aligned 2 MiB of it with one huge page. Two users:
the kernel-output pool (`gnnforge.ops._buffers`: one fault per 2 MiB of a fresh output
instead of 512) and arrays read into memory (`gnnforge.data._in_memory`: a feature row
gathered from a 3.4 GB table misses the TLB less). Where the kernel refuses (THP off, not
Linux) the advice is a no-op and the memory is ordinary.
"""

from __future__ import annotations

import ctypes
import functools
import mmap

import numpy as np

__all__ = ["HUGE_PAGE_BYTES", "advise_huge", "huge_page_empty"]

HUGE_PAGE_BYTES = 2 * 2**20


@functools.lru_cache(maxsize=1)
def _madvise():
    """libc's madvise(2), or None where Python knows no MADV_HUGEPAGE (not Linux)."""
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        return None
    function = ctypes.CDLL(None, use_errno=True).madvise
    function.argtypes, function.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], \
        ctypes.c_int
    return function


def advise_huge(address: int, nbytes: int) -> None:
    """Ask for transparent huge pages on the whole 2 MiB pages of a fresh buffer before its
    first touch; a no-op where the kernel refuses.

    The same as the native library's `gf_advise_huge`, done through libc so that neither
    user imports the native library's loader.
    """
    madvise = _madvise()
    start = -(-address // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES
    stop = (address + nbytes) // HUGE_PAGE_BYTES * HUGE_PAGE_BYTES
    if madvise is not None and stop > start:
        madvise(start, stop - start, mmap.MADV_HUGEPAGE)


def huge_page_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialised C-order array that starts on a 2 MiB boundary, advised huge pages
    before its first touch (so every whole 2 MiB of it can be one page)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + HUGE_PAGE_BYTES, dtype=np.uint8)
    offset = -raw.ctypes.data % HUGE_PAGE_BYTES
    buffer = raw[offset:offset + nbytes]
    advise_huge(buffer.ctypes.data, nbytes)
    return buffer.view(dtype).reshape(shape)
