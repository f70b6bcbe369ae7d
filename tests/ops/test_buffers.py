"""The pool of reused kernel outputs: reuse only after every view is gone, never aliasing.

The pool hands out `torch.from_numpy` views of buffers it keeps; a buffer returns to the
pool when the last tensor sharing its storage dies. These tests pin that contract down
on a private pool, then check the kernels' pooled outputs against the reference.
"""

from __future__ import annotations

import gc

import pytest
import torch

import gnnforge.ops as ops
from gnnforge.graph import Graph
from gnnforge.ops._buffers import MIN_POOLED_BYTES, BufferPool, worth_pooling
from gnnforge.ops._native import available
from tests.isolated import run_isolated

ROWS, WIDTH = 4096, 128  # 2 MiB of float32: pooled


def test_buffer_is_reused_after_the_tensor_dies():
    pool = BufferPool(cap_bytes=64 * 2**20)
    first = pool.empty((ROWS, WIDTH), torch.float32)
    address = first.data_ptr()
    del first
    second = pool.empty((ROWS, WIDTH), torch.float32)
    assert second.data_ptr() == address
    assert (pool.hits, pool.misses) == (1, 1)


def test_buffer_is_not_reused_while_a_view_lives():
    pool = BufferPool(cap_bytes=64 * 2**20)
    first = pool.empty((ROWS, WIDTH), torch.float32)
    row = first[7]          # a view keeps the storage, hence the buffer, alive
    first.fill_(1.0)
    del first
    second = pool.empty((ROWS, WIDTH), torch.float32)
    second.fill_(2.0)
    assert torch.all(row == 1.0)
    del row
    gc.collect()
    third = pool.empty((ROWS, WIDTH), torch.float32)
    assert third.data_ptr() != second.data_ptr()
    assert pool.hits == 1   # the third reused the first's buffer once the view died


def test_two_live_outputs_never_share_a_buffer():
    pool = BufferPool(cap_bytes=64 * 2**20)
    tensors = [pool.empty((ROWS, WIDTH), torch.float32) for _ in range(4)]
    starts = {t.data_ptr() for t in tensors}
    assert len(starts) == 4
    for index, tensor in enumerate(tensors):
        tensor.fill_(float(index))
    assert [float(t[0, 0]) for t in tensors] == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64])
def test_shapes_dtypes_and_alignment(dtype):
    pool = BufferPool(cap_bytes=64 * 2**20)
    tensor = pool.empty((ROWS, 3, 50), dtype)
    assert tensor.shape == (ROWS, 3, 50) and tensor.dtype == dtype
    assert tensor.is_contiguous() and tensor.data_ptr() % 64 == 0
    del tensor
    smaller = pool.empty((ROWS, 2, 50), dtype)  # within the size class: reused
    assert pool.hits == 1 and smaller.shape == (ROWS, 2, 50)


def test_small_and_unsupported_requests_bypass_the_pool():
    pool = BufferPool(cap_bytes=64 * 2**20)
    small = pool.empty((MIN_POOLED_BYTES // 8,), torch.float32)
    half = pool.empty((ROWS, WIDTH), torch.bfloat16)
    assert small.numel() == MIN_POOLED_BYTES // 8 and half.dtype == torch.bfloat16
    del small, half
    assert (pool.hits, pool.misses) == (0, 0)


def test_only_large_eager_cpu_outputs_are_worth_pooling():
    cpu = torch.device("cpu")
    assert worth_pooling(cpu, MIN_POOLED_BYTES)
    assert not worth_pooling(cpu, MIN_POOLED_BYTES - 1)
    assert not worth_pooling(torch.device("meta"), 2 * MIN_POOLED_BYTES)
    compiled = torch.compile(lambda x: x + worth_pooling(cpu, 2 * MIN_POOLED_BYTES),
                             backend="eager", fullgraph=True)
    assert compiled(torch.zeros(1)).item() == 0       # traced: the graph allocates its own


def test_a_much_larger_buffer_is_not_lent_to_a_small_request():
    pool = BufferPool(cap_bytes=256 * 2**20)
    big = pool.empty((ROWS * 8, WIDTH), torch.float32)   # 16 MiB
    del big
    pool.empty((ROWS, WIDTH), torch.float32)             # 2 MiB: would waste 14 MiB
    assert pool.hits == 0


def test_free_bytes_stay_under_the_cap_and_clear_drops_them():
    pool = BufferPool(cap_bytes=5 * 2**20)
    tensors = [pool.empty((ROWS, WIDTH), torch.float32) for _ in range(4)]  # 4 x 2+ MiB
    del tensors
    assert 0 < pool.statistics()["free_bytes"] <= 5 * 2**20
    pool.clear()
    assert pool.statistics()["free_bytes"] == 0
    pool.empty((ROWS, WIDTH), torch.float32)
    assert pool.misses == 5


def test_zero_cap_disables_the_pool():
    pool = BufferPool(cap_bytes=0)
    tensor = pool.empty((ROWS, WIDTH), torch.float32)
    del tensor
    pool.empty((ROWS, WIDTH), torch.float32)
    assert (pool.hits, pool.misses) == (0, 0)


def test_pooled_outputs_share_memory_and_survive_the_pool():
    pool = BufferPool(cap_bytes=64 * 2**20)
    tensor = pool.empty((ROWS, WIDTH), torch.float32).fill_(3.0)
    tensor.share_memory_()   # DataLoader workers send outputs through shared memory
    assert tensor.is_shared() and float(tensor.sum()) == 3.0 * ROWS * WIDTH


@pytest.mark.skipif(not available(), reason="native kernels unavailable here")
def test_native_outputs_from_the_pool_equal_the_reference():
    generator = torch.Generator().manual_seed(0)
    num_nodes = 3000
    src = torch.randint(0, num_nodes, (20000,), generator=generator)
    dst = torch.randint(0, num_nodes, (20000,), generator=generator)
    graph = Graph(src, dst, num_nodes)
    x = torch.randn(num_nodes, 200, generator=generator, dtype=torch.float64)
    with ops.use_backend("reference"):
        expected = [ops.copy_u_sum(graph, x * k) for k in range(1, 4)]
    ops.empty_cache()
    before = ops.buffer_pool_statistics()
    # Several live outputs at once, then freed and re-filled: no aliasing, no stale data.
    for _ in range(3):
        outputs = [ops.copy_u_sum(graph, x * k) for k in range(1, 4)]
        for index, reference in enumerate(expected):
            torch.testing.assert_close(outputs[index], reference)
        del outputs
    statistics = ops.buffer_pool_statistics()
    assert statistics["hits"] - before["hits"] >= 6
    assert statistics["lent_buffers"] == before["lent_buffers"]
    ops.empty_cache()
    assert ops.buffer_pool_statistics()["free_bytes"] == 0


# ----------------------------------------------------------------------------- GC safety

_GC_DURING_TAKE = """
import gc, threading
import torch
from gnnforge.ops._buffers import BufferPool

class CollectingLock:
    '''The pool's lock, running the cyclic GC right after each acquire: what CPython does
    when an allocation made while the lock is held crosses the GC threshold.'''
    def __init__(self):
        self.lock = threading.Lock()
    def acquire(self, *args, **kwargs):
        taken = self.lock.acquire(*args, **kwargs)
        gc.collect()
        return taken
    def release(self):
        self.lock.release()
    def __enter__(self):
        self.acquire()
        return self
    def __exit__(self, *exc):
        self.release()

pool = BufferPool(cap_bytes=64 * 2**20)
pool._lock = CollectingLock()
class Holder:
    pass
holder = Holder()
holder.cycle = holder                     # only the cyclic GC can free it
holder.out = pool.empty((4096, 128), torch.float32)
address = holder.out.data_ptr()
del holder
gc.disable()                              # nothing collects it before _take does
again = pool.empty((4096, 128), torch.float32)
print("OK", pool.hits, again.data_ptr() == address)
"""


def test_a_buffer_freed_by_the_gc_inside_take_does_not_deadlock():
    """The GC returning a pooled buffer while `_take` holds the lock used to block forever
    on that (non-reentrant) lock; returns are now queued and drained under the lock."""
    result = run_isolated(_GC_DURING_TAKE, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["OK", "1", "True"]  # the queued buffer was reused

