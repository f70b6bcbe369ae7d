"""ops.leading_rows: x[:rows] with the values and gradients of slicing, on the reused-buffer
path and off it, with empty and full row counts, and a named error for bad counts."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge import ops
from gnnforge.ops import _buffers


@settings(max_examples=50, deadline=None)
@given(rows_total=st.integers(0, 30), width=st.integers(0, 5), data=st.data(),
       pooled=st.booleans(), dtype=st.sampled_from([torch.float32, torch.float64]))
def test_values_and_gradients_are_slicing_s(rows_total, width, data, pooled, dtype):
    rows = data.draw(st.integers(0, rows_total))
    x = torch.randn(rows_total, width, dtype=dtype)
    ours_x, plain_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_buffers, "MIN_POOLED_BYTES", 0 if pooled else 2**62)
        ours = ops.leading_rows(ours_x, rows)
    plain = plain_x[:rows]
    assert torch.equal(ours, plain)
    grad = torch.randn(rows, width, dtype=dtype)
    (ours * grad).sum().backward()
    (plain * grad).sum().backward()
    assert torch.equal(ours_x.grad, plain_x.grad)


def test_a_large_input_takes_the_reused_buffer_and_gives_its_tail_zeros():
    x = torch.randn(5000, 64).requires_grad_()               # 1.2 MiB
    head = ops.leading_rows(x, 700)
    assert head.grad_fn.name() == "_LeadingRowsBackward"
    assert head.data_ptr() == x.data_ptr()                   # a view: nothing copied
    for _ in range(2):                                       # the second from a reused buffer
        x.grad = None
        grad = torch.randn(700, 64)
        ops.leading_rows(x, 700).backward(grad)
        assert torch.equal(x.grad[:700], grad)
        assert not x.grad[700:].any()


def test_second_derivatives_and_no_grad():
    x = torch.randn(12, 3, dtype=torch.float64, requires_grad=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_buffers, "MIN_POOLED_BYTES", 0)
        assert torch.autograd.gradcheck(lambda t: ops.leading_rows(t, 5).pow(2), (x,))
        assert torch.autograd.gradgradcheck(lambda t: ops.leading_rows(t, 5).pow(2), (x,))
        with torch.no_grad():
            assert ops.leading_rows(x, 5).grad_fn is None


@pytest.mark.parametrize("rows", [-1, 13])
def test_a_row_count_outside_the_input_is_named(rows):
    with pytest.raises(ValueError, match=rf"leading_rows: rows must lie in \[0, 12\].*got {rows}"):
        ops.leading_rows(torch.zeros(12, 3), rows)
