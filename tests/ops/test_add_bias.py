"""ops.add_bias: x + bias with the sum's values and gradients, on the reused-buffer path and
off it (other shapes, dtypes, small outputs), first and second derivatives, and the planned
layers' use of it (GCN, TAGCN, SGC, R-GCN)."""

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
       needs=st.sampled_from(["both", "x", "bias"]), seed=st.integers(0, 2**16))
def test_values_and_gradients_are_the_sums(rows, heads, width, pooled, dtype, needs, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, heads, width, generator=generator, dtype=dtype)
    bias = torch.randn(width, generator=generator, dtype=dtype)
    leaves = {"x": [x.clone(), x.clone()], "bias": [bias.clone(), bias.clone()]}
    for name in ("x", "bias"):
        if needs in (name, "both"):
            for leaf in leaves[name]:
                leaf.requires_grad_()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_buffers, "MIN_POOLED_BYTES", 0 if pooled else 2**62)
        ours = ops.add_bias(leaves["x"][0], leaves["bias"][0])
        plain = leaves["x"][1] + leaves["bias"][1]
        assert torch.equal(ours, plain)
        grad = torch.randn(plain.shape, generator=generator, dtype=dtype)
        ours.backward(grad)
        plain.backward(grad)
    for name in ("x", "bias"):
        ours_leaf, plain_leaf = leaves[name]
        if needs in (name, "both"):
            torch.testing.assert_close(ours_leaf.grad, plain_leaf.grad, rtol=1e-5, atol=1e-5)


def test_a_large_sum_takes_a_reused_buffer_and_its_bias_gradient_is_the_column_sum():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(6000, 64, generator=generator, requires_grad=True)   # 1.5 MiB
    bias = torch.randn(64, generator=generator, requires_grad=True)
    before = _buffers.buffer_pool_statistics()
    for _ in range(2):
        x.grad = bias.grad = None
        out = ops.add_bias(x, bias)
        assert out.grad_fn.name() == "_AddBiasBackward"
        grad = torch.randn(6000, 64, generator=generator)
        out.backward(grad)
        assert torch.equal(x.grad, grad)
        # float32 sums of 6000 terms in another order: compared with float64's
        torch.testing.assert_close(bias.grad.double(), grad.double().sum(0), rtol=1e-4,
                                   atol=1e-3)
        del out
    after = _buffers.buffer_pool_statistics()
    assert (after["hits"] + after["misses"]) - (before["hits"] + before["misses"]) == 2


def test_other_shapes_and_types_get_torchs_sum():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_buffers, "MIN_POOLED_BYTES", 0)
        x = torch.randn(5, 3, requires_grad=True)
        for bias in (torch.randn(1, 3), torch.randn(5, 3), torch.randn(3, dtype=torch.float64),
                     torch.randn(())):
            out = ops.add_bias(x, bias)
            assert out.grad_fn.name() != "_AddBiasBackward"
            assert torch.equal(out, x + bias)
        whole = torch.arange(6).reshape(2, 3)
        assert torch.equal(ops.add_bias(whole, torch.arange(3)), whole + torch.arange(3))


def test_first_and_second_derivatives():
    x = torch.randn(7, 2, 3, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(3, dtype=torch.float64, requires_grad=True)

    def squared(x, bias):
        return ops.add_bias(x, bias) ** 2
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_buffers, "MIN_POOLED_BYTES", 0)
        assert torch.autograd.gradcheck(squared, (x, bias))
        assert torch.autograd.gradgradcheck(squared, (x, bias))


def _planned_layer(name: str):
    """(layer, its bias, extra forward arguments) of a planned layer 16 -> 64."""
    from gnnforge.nn import GCNConv, RGCNConv, SGConv, TAGConv

    if name == "gcn":
        layer = GCNConv(16, 64)
        return layer, layer.bias, {}
    if name == "tag":
        layer = TAGConv(16, 64, K=2)
        return layer, layer.bias, {}
    if name == "sgc":
        layer = SGConv(16, 64, K=2)
        return layer, layer.lin.bias, {}
    # max: the relation-wise path (mean and sum add the bias inside their plan)
    layer = RGCNConv(16, 64, num_relations=3, aggr="max")
    types = torch.randint(0, 3, (20000,), generator=torch.Generator().manual_seed(1))
    return layer, layer.bias, {"edge_type": types}


@pytest.mark.parametrize("name", ["gcn", "tag", "sgc", "rgcn"])
def test_planned_layers_add_their_bias_through_it_when_training(name):
    from gnnforge.graph import Graph

    generator = torch.Generator().manual_seed(0)
    graph = Graph(torch.randint(0, 5000, (20000,), generator=generator),
                  torch.randint(0, 5000, (20000,), generator=generator), num_nodes=5000)
    layer, bias, extra = _planned_layer(name)
    torch.nn.init.normal_(bias)
    x = torch.randn(5000, 16)
    out = layer(graph, x, **extra)                               # [5000, 64]: 1.2 MiB
    assert out.grad_fn.name() == "_AddBiasBackward"
    out.sum().backward()
    torch.testing.assert_close(bias.grad, torch.full((64,), 5000.0))
    with torch.no_grad():  # the in-place add of inference (its plan may differ: rounding)
        torch.testing.assert_close(layer(graph, x, **extra), out.detach(), rtol=1e-4,
                                   atol=1e-4)
