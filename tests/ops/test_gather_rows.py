"""gather_rows equals index_select on every candidate and the auto path (values; the
native kernels' scalar tail may return a -0.0 as +0.0)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.ops import _cpu_kernels, gather_rows
from gnnforge.ops._kernel_class import KernelClass


def _inputs(rows, width, count, dtype, index_dtype, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, width, generator=generator, dtype=dtype)
    if rows:
        x[0, 0] = -0.0
        x[-1, -1] = float("inf")
    index = torch.randint(0, max(rows, 1), (count,), generator=generator).to(index_dtype)
    return x, index if rows else index[:0]


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(0, 300), width=st.integers(1, 70), count=st.integers(0, 2000),
       dtype=st.sampled_from([torch.float32, torch.float64]),
       index_dtype=st.sampled_from([torch.int32, torch.int64]), seed=st.integers(0, 2**16))
def test_every_candidate_copies_the_rows_exactly(rows, width, count, dtype, index_dtype, seed):
    x, index = _inputs(rows, width, count, dtype, index_dtype, seed)
    expected = x.index_select(0, index)
    kernel_class = KernelClass(_cpu_kernels.GATHER, "-", "float32", "int32", 2)
    for name in _cpu_kernels.candidates(kernel_class):
        out = _cpu_kernels.fixed_gather(name)(x, index)
        assert out.shape == expected.shape and out.dtype == dtype
        assert torch.equal(out, expected), name


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_auto_path_on_a_large_gather(index_dtype):
    x, index = _inputs(5000, 100, 3000, torch.float32, index_dtype, seed=1)
    out = gather_rows(x, index)
    assert torch.equal(out, x.index_select(0, index))
    assert "torch" in _cpu_kernels.candidates(KernelClass(_cpu_kernels.GATHER, "-", "float32",
                                                          "int32", 2))


def test_fallbacks_keep_index_selects_behaviour():
    x = torch.randn(50, 4, requires_grad=True)
    index = torch.tensor([3, 3, 49])
    out = gather_rows(x, index)                       # autograd: index_select's
    out.sum().backward()
    assert x.grad[3].tolist() == [2.0] * 4 and x.grad[49].tolist() == [1.0] * 4
    strided = torch.randn(4, 50).t()                  # not contiguous
    assert torch.equal(gather_rows(strided, index), strided[index])
    assert gather_rows(torch.randn(0, 3), torch.zeros(0, dtype=torch.int64)).shape == (0, 3)


def test_out_of_range_indices_are_named():
    x = torch.randn(2000, 64)
    index = torch.zeros(2000, dtype=torch.int64)
    index[1234] = 2000
    with pytest.raises(IndexError, match=r"index\[1234\] = 2000 is outside \[0, 2000\)"):
        gather_rows(x, index)
    index[1234] = -1
    with pytest.raises(IndexError, match=r"index\[1234\] = -1"):
        gather_rows(x, index)
