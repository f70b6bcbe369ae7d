"""Reused output buffers for the native kernels: large outputs without fresh page faults.

Every kernel call returns new tensors. glibc maps a large buffer (32 MiB or more once
warmed up, smaller ones when its heap was trimmed) afresh on each allocation and
returns it to the OS on free, so each call pays a page fault and a zeroed page per
4 KiB of output (about 1.2 us a page on this VM: a 1 GiB output costs more in faults
than the aggregation itself). Like PyTorch's CUDA caching allocator, this pool keeps
freed output buffers of 1 MiB or more and hands them out again to outputs of the same
size class. A buffer is reused only after every tensor viewing it has been freed: the
tensor is a `torch.from_numpy` view of the pooled array, and a weak reference on that
view returns the buffer to the pool when the last tensor sharing its storage dies.

Returns are safe from any context. The last view often dies inside the cyclic garbage
collector, which CPython runs on whatever allocation crosses its threshold, including one
made while this thread holds the pool's (non-reentrant) lock; a return that took the lock
there would wait for itself forever. So the weakref callback takes no lock: it moves the
buffer to a queue (deque appends are atomic), and the next call that holds the lock
drains the queue into the free list.

New buffers get madvise(MADV_HUGEPAGE) before their first touch (`gnnforge._huge_pages`,
through libc: the pool needs nothing from the native library, so it stays a leaf below it).
Free buffers held by the pool are capped (`GNNFORGE_BUFFER_POOL_MIB`, default 1/8 of
physical memory, at most 2 GiB; 0 disables the pool); `empty_cache()` drops them all.
"""

from __future__ import annotations

import collections
import math
import os
import threading
import weakref

import numpy as np
import torch
from torch import Tensor

from gnnforge._huge_pages import HUGE_PAGE_BYTES, advise_huge

__all__ = ["BufferPool", "advise_huge", "buffer_pool_statistics", "empty_cache",
           "pooled_empty", "worth_pooling"]

# Outputs below this size come from torch.empty: glibc's heap reuses them without faults
# and the pool's bookkeeping (a few microseconds) would show on small calls.
MIN_POOLED_BYTES = 2**20
# Unpooled outputs at least this large (the pool disabled) get huge pages asked for.
UNPOOLED_HUGE_BYTES = 32 * 2**20
_ALIGN = 64           # 64-byte (AVX-512) streaming stores need 64-byte aligned rows
_ROUND = HUGE_PAGE_BYTES  # capacities in whole huge pages
_NUMPY_DTYPES = {torch.float32: np.float32, torch.float64: np.float64,
                 torch.int32: np.int32, torch.int64: np.int64}


def _default_cap_bytes() -> int:
    setting = os.environ.get("GNNFORGE_BUFFER_POOL_MIB")
    if setting is not None:
        try:
            return max(0, int(setting)) * 2**20
        except ValueError:
            raise ValueError(f"GNNFORGE_BUFFER_POOL_MIB must be a whole number of MiB, "
                             f"got {setting!r}") from None
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        physical = 8 * 2**30
    return min(2 * 2**30, physical // 8)


class BufferPool:
    """Free output buffers keyed by capacity, reused by outputs of the same size class.

    Args:
        cap_bytes: most bytes of free buffers kept; the least recently freed go first.
        advise: called once on each new buffer's (address, bytes) before its first
            touch (`advise_huge` asks for transparent huge pages there).
    """

    def __init__(self, cap_bytes: int, advise=None):
        self.cap_bytes = cap_bytes
        self._advise = advise
        self._free: list[tuple[np.ndarray, int, int]] = []   # least recently freed first
        self._free_bytes = 0
        self._lent: dict[int, tuple[weakref.ref, tuple[np.ndarray, int, int]]] = {}
        # Buffers whose last view died, not yet in _free (see the module docstring).
        self._returns: collections.deque[tuple[np.ndarray, int, int]] = collections.deque()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def empty(self, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
        """An uninitialised tensor of `shape`/`dtype`, from a reused buffer when one fits."""
        # Called right after a kernel has streamed its data through the caches, when every
        # line of code not run since is cold (numpy's reductions and `.ctypes` cost
        # 100-200 us then): so, few and cheap calls here.
        nbytes = math.prod(shape) * dtype.itemsize
        element = _NUMPY_DTYPES.get(dtype)
        if self.cap_bytes <= 0 or nbytes < MIN_POOLED_BYTES or element is None:
            return self._unpooled(shape, dtype, nbytes)
        buffer = self._take(nbytes) or self._new(nbytes)
        view = np.ndarray(shape, element, buffer[0], buffer[1])
        reference = weakref.ref(view, self._returned)
        self._lent[id(reference)] = (reference, buffer)
        return torch.from_numpy(view)

    def _unpooled(self, shape, dtype, nbytes: int) -> Tensor:
        out = torch.empty(shape, dtype=dtype)
        if self._advise is not None and nbytes >= UNPOOLED_HUGE_BYTES:
            self._advise(out.data_ptr(), nbytes)
        return out

    def statistics(self) -> dict[str, int]:
        """Hits, misses, free and lent buffers, bytes held free, and the cap."""
        with self._lock:
            self._drain_returns()
            return {"hits": self.hits, "misses": self.misses, "free_bytes": self._free_bytes,
                    "free_buffers": len(self._free), "lent_buffers": len(self._lent),
                    "cap_bytes": self.cap_bytes}

    def clear(self) -> None:
        """Drop every free buffer (lent ones return to the pool when freed)."""
        with self._lock:
            self._drain_returns()
            self._free, self._free_bytes = [], 0

    def _take(self, nbytes: int) -> tuple[np.ndarray, int, int] | None:
        # The smallest free buffer that holds nbytes without wasting more than half of it.
        with self._lock:
            self._drain_returns()
            best = None
            for index, (_, _, capacity) in enumerate(self._free):
                if nbytes <= capacity <= 2 * nbytes + _ROUND and (
                        best is None or capacity < self._free[best][2]):
                    best = index
            if best is None:
                self.misses += 1
                return None
            self.hits += 1
            buffer = self._free.pop(best)
            self._free_bytes -= buffer[2]
            return buffer

    def _new(self, nbytes: int) -> tuple[np.ndarray, int, int]:
        """(array, offset of its first 64-byte aligned byte, usable bytes from there)."""
        capacity = -(-(nbytes + _ALIGN) // _ROUND) * _ROUND
        array = np.empty(capacity, dtype=np.uint8)
        address = array.ctypes.data
        if self._advise is not None:
            self._advise(address, capacity)
        offset = -address % _ALIGN
        return array, offset, capacity - offset

    def _returned(self, reference: weakref.ref) -> None:
        # May run inside the GC while this very thread holds self._lock: no lock here.
        # dict.pop and deque.append are atomic, so a concurrent drain sees all or nothing.
        entry = self._lent.pop(id(reference), None)
        if entry is not None:
            self._returns.append(entry[1])

    def _drain_returns(self) -> None:
        """Move queued returns to the free list, oldest first; the caller holds the lock."""
        while True:
            try:
                buffer = self._returns.popleft()
            except IndexError:
                break
            if buffer[2] > self.cap_bytes:
                continue
            self._free.append(buffer)
            self._free_bytes += buffer[2]
        while self._free_bytes > self.cap_bytes:
            self._free_bytes -= self._free.pop(0)[2]


_POOL: BufferPool | None = None


def _pool() -> BufferPool:
    global _POOL
    if _POOL is None:
        _POOL = BufferPool(_default_cap_bytes(), advise_huge)
    return _POOL


def _reset_after_fork() -> None:
    global _POOL
    _POOL = None  # a child starts with its own pool (and a lock no thread holds)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def pooled_empty(shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    """`torch.empty(shape, dtype=dtype)` on CPU, large ones from the reused-buffer pool."""
    return _pool().empty(shape, dtype)


def worth_pooling(device: torch.device, nbytes: int) -> bool:
    """Whether an output of `nbytes` on `device` should come from the reused-buffer pool.

    Only eager CPU outputs of at least MIN_POOLED_BYTES: smaller ones reuse glibc's heap
    for free, and a compiled graph allocates its own buffers.
    """
    return (device.type == "cpu" and nbytes >= MIN_POOLED_BYTES
            and not torch.compiler.is_compiling())


def empty_cache() -> None:
    """Release every free buffer the kernel-output pool holds (like torch.cuda.empty_cache)."""
    if _POOL is not None:
        _POOL.clear()


def buffer_pool_statistics() -> dict[str, int]:
    """Hits, misses and bytes of the free buffers the kernel-output pool holds."""
    return _pool().statistics()
