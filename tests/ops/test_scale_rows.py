"""ops.scale_rows: x * factor with the product's values and gradients, on the reused-buffer
path and off it (a factor that requires grad or would broadcast x, small outputs)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge import ops
from gnnforge.ops import _buffers


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(0, 40), heads=st.integers(1, 3), width=st.integers(0, 6),
       pooled=st.booleans(), dtype=st.sampled_from([torch.float32, torch.float64]),
       seed=st.integers(0, 2**16))
def test_values_and_gradients_are_the_products(rows, heads, width, pooled, dtype, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, heads, width, generator=generator, dtype=dtype)
    factor = torch.rand(rows, 1, 1, generator=generator, dtype=dtype)
    ours_x, plain_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_buffers, "MIN_POOLED_BYTES", 0 if pooled else 2**62)
        ours = ops.scale_rows(ours_x, factor)
        plain = plain_x * factor
        assert torch.equal(ours, plain)
        grad = torch.randn(plain.shape, generator=generator, dtype=dtype)
        ours.backward(grad)
        plain.backward(grad)
    assert torch.equal(ours_x.grad, plain_x.grad)


def test_a_large_product_takes_reused_buffers_for_itself_and_its_gradient():
    x = torch.randn(6000, 1, 64, requires_grad=True)          # 1.5 MiB
    factor = torch.rand(6000, 1, 1)
    before = _buffers.buffer_pool_statistics()
    for _ in range(3):
        x.grad = None
        out = ops.scale_rows(x, factor)
        assert out.grad_fn.name() == "_ScaleRowsBackward"
        out.backward(torch.ones_like(out))
        assert torch.equal(x.grad, factor.expand_as(x))
        del out
    after = _buffers.buffer_pool_statistics()
    served = (after["hits"] + after["misses"]) - (before["hits"] + before["misses"])
    assert served == 6                                         # 3 products, 3 gradients
    assert after["hits"] > before["hits"]                     # later calls reuse buffers


def test_factors_that_need_torchs_product_get_it():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_buffers, "MIN_POOLED_BYTES", 0)
        x = torch.randn(5, 1, 3, requires_grad=True)
        learnt = torch.rand(5, 1, 1, requires_grad=True)
        out = ops.scale_rows(x, learnt)                        # its factor gets a gradient
        out.sum().backward()
        assert torch.allclose(learnt.grad, x.detach().sum(-1, keepdim=True))
        wide = ops.scale_rows(torch.randn(5, 1, 1), torch.rand(5, 1, 3))  # broadcasts x
        assert wide.shape == (5, 1, 3)
        assert "ScaleRows" not in type(out.grad_fn).__name__


def test_second_derivatives_and_no_grad():
    x = torch.randn(7, 1, 3, dtype=torch.float64, requires_grad=True)
    factor = torch.rand(7, 1, 1, dtype=torch.float64)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_buffers, "MIN_POOLED_BYTES", 0)
        assert torch.autograd.gradcheck(lambda t: ops.scale_rows(t, factor).pow(2), (x,))
        assert torch.autograd.gradgradcheck(lambda t: ops.scale_rows(t, factor).pow(2), (x,))
        with torch.no_grad():
            assert ops.scale_rows(x, factor).grad_fn is None
