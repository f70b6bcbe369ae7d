"""Corner cases found by the hardening audit: graphs without edges under binary max/min,
and ties exactly at zero in the reference's max/min gradient."""

from __future__ import annotations

import pytest
import torch

import gnnforge.ops as ops
from gnnforge.graph import Graph

from ._backends import CPU_FAST

BACKENDS = ["reference", *CPU_FAST, "torch"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["mul", "add"])
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_binary_extreme_on_a_graph_without_edges(backend, op, reduce):
    graph = Graph(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), 4)
    lhs = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    rhs = torch.randn(0, 3, dtype=torch.float64, requires_grad=True)
    with ops.use_backend(backend):
        out = ops.gspmm(graph, op, reduce, lhs, rhs)
        out.sum().backward()
    assert torch.equal(out, torch.zeros(4, 3, dtype=torch.float64))
    assert torch.equal(lhs.grad, torch.zeros_like(lhs))
    assert rhs.grad.shape == (0, 3)


@pytest.mark.parametrize("reduce", ["max", "min"])
@pytest.mark.parametrize("tie", [0.0, 1.5, -2.0])
def test_reference_extreme_gradient_at_a_tie_sums_to_one(reduce, tie):
    """Three in-edges tie at `tie`; each gets a third of the gradient, whatever the value
    (a tie at 0 also tied with scatter_reduce's zero-initialised output and lost a share)."""
    graph = Graph([0, 1, 2, 4], [3, 3, 3, 4], 5)
    x = torch.tensor([[tie], [tie], [tie], [7.0], [-1.0]], dtype=torch.float64,
                     requires_grad=True)
    with ops.use_backend("reference"):
        out = ops.gspmm(graph, "copy_lhs", reduce, x, None)
        out.sum().backward()
    assert out.flatten().tolist() == [0.0, 0.0, 0.0, tie, -1.0]
    torch.testing.assert_close(x.grad.flatten(),
                               torch.tensor([1 / 3, 1 / 3, 1 / 3, 0.0, 1.0], dtype=torch.float64))
    for backend in CPU_FAST:  # the fast backends give the whole gradient to one winner
        x.grad = None
        with ops.use_backend(backend):
            ops.gspmm(graph, "copy_lhs", reduce, x, None).sum().backward()
        assert float(x.grad[:3].sum()) == 1.0 and float(x.grad[4]) == 1.0
