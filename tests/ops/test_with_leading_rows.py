"""ops.with_leading_rows: (aggregate(x), x[:rows]) with the values and gradients of the two
calls apart, one gradient for x; first and second derivatives, a retained graph, an
aggregation that hands back its input's gradient, and the planned layers that use it."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge import ops
from gnnforge.graph import Graph
from gnnforge.ops import _buffers


def _graph(num_nodes: int, num_edges: int, seed: int) -> Graph:
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(0, max(num_nodes, 1), (num_edges,), generator=generator)
    dst = torch.randint(0, max(num_nodes, 1), (num_edges,), generator=generator)
    return Graph(src, dst, num_nodes=num_nodes)


AGGREGATES = {
    "mean": lambda graph: (lambda x: ops.copy_u_mean(graph, x)),
    "sum": lambda graph: (lambda x: ops.copy_u_sum(graph, x)),
    "max": lambda graph: (lambda x: ops.copy_u_max(graph, x)),
    "squares": lambda graph: (lambda x: ops.copy_u_sum(graph, x * x)),   # not linear
    "identity": lambda graph: (lambda x: x),                             # x's gradient back
    "column_sums": lambda graph: (lambda x: x.sum(0) * 2),               # an expanded one
}


@settings(max_examples=60, deadline=None)
@given(num_nodes=st.integers(0, 25), num_edges=st.integers(0, 60), width=st.integers(1, 4),
       kind=st.sampled_from(sorted(AGGREGATES)), use=st.sampled_from(["both", "agg", "rows"]),
       pooled=st.booleans(), data=st.data(), seed=st.integers(0, 2**16))
def test_values_and_gradients_are_the_two_calls_apart(num_nodes, num_edges, width, kind, use,
                                                      pooled, data, seed):
    rows = data.draw(st.integers(0, num_nodes))
    graph = _graph(num_nodes, num_edges if num_nodes else 0, seed)
    aggregate = AGGREGATES[kind](graph)
    x = torch.randn(num_nodes, width, dtype=torch.float64,
                    generator=torch.Generator().manual_seed(seed))
    ours_x, plain_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_buffers, "MIN_POOLED_BYTES", 0 if pooled else 2**62)
        ours = ops.with_leading_rows(aggregate, ours_x, rows)
        plain = (aggregate(plain_x), plain_x[:rows])
        for got, expected in zip(ours, plain, strict=True):
            assert torch.equal(got, expected)
        weights = [torch.randn_like(t) for t in plain]
        pick = {"both": (0, 1), "agg": (0,), "rows": (1,)}[use]

        def loss(values):
            return sum((values[i] * weights[i]).sum() for i in pick)
        loss(ours).backward()
        loss(plain).backward()
    torch.testing.assert_close(ours_x.grad, plain_x.grad, rtol=1e-12, atol=1e-12)


def test_first_and_second_derivatives():
    graph = _graph(9, 30, seed=1)
    x = torch.randn(9, 3, dtype=torch.float64, requires_grad=True)

    def both(x):
        aggregated, head = ops.with_leading_rows(lambda t: ops.copy_u_sum(graph, t * t), x, 4)
        return aggregated.sum(1) ** 2, head ** 3
    assert torch.autograd.gradcheck(both, (x,))
    assert torch.autograd.gradgradcheck(both, (x,))


def test_a_retained_graph_runs_backward_twice():
    graph = _graph(12, 40, seed=2)
    x = torch.randn(12, 5, requires_grad=True)
    aggregated, head = ops.with_leading_rows(lambda t: ops.copy_u_mean(graph, t), x, 6)
    loss = aggregated.sum() + (head * 2).sum()
    loss.backward(retain_graph=True)
    first = x.grad.clone()
    x.grad = None
    loss.backward()
    assert torch.equal(x.grad, first)


def test_without_a_gradient_it_is_the_two_calls_and_bad_counts_are_named():
    graph = _graph(6, 10, seed=3)
    x = torch.randn(6, 2)
    aggregated, head = ops.with_leading_rows(lambda t: ops.copy_u_sum(graph, t), x, 2)
    assert torch.equal(aggregated, ops.copy_u_sum(graph, x)) and head.data_ptr() == x.data_ptr()
    with pytest.raises(ValueError, match=r"rows must lie in \[0, 6\].*got 7"):
        ops.with_leading_rows(lambda t: t, x, 7)


def test_the_planned_sage_layer_takes_one_gradient_for_its_input():
    """A block's SAGE layer reads x aggregated and its destinations' rows: the planner's
    executor runs both through with_leading_rows, and the layer's gradients equal the
    unplanned (PyG's) association's."""
    from gnnforge.nn import SAGEConv
    from gnnforge.sampling import NeighborSampler

    graph = _graph(300, 2000, seed=4)
    block = NeighborSampler([4]).sample(graph, torch.arange(40),
                                        generator=torch.Generator().manual_seed(0))[0]
    torch.manual_seed(0)
    layer = SAGEConv(8, 6)
    layer.plan = "default"
    x = torch.randn(block.num_src_nodes, 8, dtype=torch.float64, requires_grad=True)
    layer = layer.double()
    out = layer(block, x)
    assert any("WithLeadingRows" in str(node) for node in _graph_nodes(out.grad_fn))
    weights = torch.randn_like(out)
    (grad,) = torch.autograd.grad((out * weights).sum(), x)
    x_plain = x.detach().clone().requires_grad_()
    aggregated = ops.copy_u_mean(block, x_plain)
    plain = layer.lin_l(aggregated) + layer.lin_r(x_plain[:block.num_dst_nodes])
    (expected,) = torch.autograd.grad((plain * weights).sum(), x_plain)
    torch.testing.assert_close(grad, expected, rtol=1e-10, atol=1e-10)


def _graph_nodes(root):
    seen, stack = [], [root]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.append(node)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return seen
