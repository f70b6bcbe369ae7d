"""Projections of one input run as one GEMM (`_shared_products`): SAGE's project-first
plan computes X W_l and rows(X) W_r as X [W_l | W_r] on a full graph, and equals the
two-GEMM evaluation in value and gradients; on a block (fewer destination rows) it does
not fuse."""

from __future__ import annotations

import pytest
import torch

from gnnforge.graph import Graph
from gnnforge.nn import SAGEConv
from gnnforge.plan import _execute, enumerate_compositions
from gnnforge.plan._ir import render
from gnnforge.plan._shared_products import shared_input_groups

from ..nn.planned_graphs import random_block


def _project_first(layer: SAGEConv):
    """The composition that projects X before aggregating it."""
    for composition in enumerate_compositions(layer.plan_expression()):
        if "(X @ Wl)" in render(composition.tree):
            return composition
    raise AssertionError("no project-first composition")


def _graph(nodes: int = 30, edges: int = 120, seed: int = 0) -> Graph:
    generator = torch.Generator().manual_seed(seed)
    return Graph(torch.randint(0, nodes, (edges,), generator=generator),
                 torch.randint(0, nodes, (edges,), generator=generator), nodes)


def test_project_first_sage_groups_its_two_projections_on_a_full_graph_only():
    tree = _project_first(SAGEConv(8, 4)).tree
    groups = shared_input_groups(tree, rows_are_all=True)
    assert len(groups) == 2 and len(set(groups.values())) == 1
    assert shared_input_groups(tree, rows_are_all=False) == {}
    default = enumerate_compositions(SAGEConv(8, 4).plan_expression())[0].tree
    assert "(X @ Wl)" not in render(default)
    assert shared_input_groups(default, rows_are_all=True) == {}   # (M X) W_l, X W_r


def _gemms(monkeypatch) -> list[tuple[int, ...]]:
    """The right factors of the GEMMs run, sums of products left unfused (`_fused_sums`
    folds a sum's products into addmm: its own tests cover that)."""
    monkeypatch.setattr(_execute._Evaluator, "_fused_sum", lambda self, node: None)
    shapes: list[tuple[int, ...]] = []
    original = _execute._dense_matmul

    def counting(left, right, left_is_weight):
        shapes.append(tuple(right.shape))
        return original(left, right, left_is_weight)
    monkeypatch.setattr(_execute, "_dense_matmul", counting)
    return shapes


def _value_and_grads(layer, graph, x):
    x = x.clone().requires_grad_(True)
    out = layer(graph, x)
    (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
    grads = [x.grad] + [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    return [out.detach(), *grads]


@pytest.mark.parametrize("aggr", ["mean", "sum"])
def test_one_gemm_on_a_full_graph_equal_to_two(monkeypatch, aggr):
    torch.manual_seed(0)
    layer = SAGEConv(8, 5, aggr=aggr).double()
    layer.plan = _project_first(layer)
    graph, x = _graph(), torch.randn(30, 8, dtype=torch.float64)
    gemms = _gemms(monkeypatch)
    fused = _value_and_grads(layer, graph, x)
    assert gemms == [(1, 8, 10)]                       # [W_l | W_r] side by side
    gemms.clear()
    monkeypatch.setattr(_execute, "_shared_groups", lambda tree, rows_are_all: {})
    separate = _value_and_grads(layer, graph, x)
    assert gemms == [(1, 8, 5), (1, 8, 5)]
    for got, want in zip(fused, separate, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_a_block_with_fewer_destinations_keeps_two_gemms(monkeypatch):
    torch.manual_seed(0)
    block = random_block()
    layer = SAGEConv(6, 4).double()
    layer.plan = _project_first(layer)
    gemms = _gemms(monkeypatch)
    out = layer(block, torch.randn(block.num_src_nodes, 6, dtype=torch.float64))
    assert out.shape == (block.num_dst_nodes, 4)
    assert len(gemms) == 2


def test_a_graph_without_edges_or_nodes():
    layer = SAGEConv(3, 2).double()
    layer.plan = _project_first(layer)
    for nodes in (0, 4):
        graph = Graph(torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), nodes)
        x = torch.randn(nodes, 3, dtype=torch.float64)
        want = x @ layer.lin_r.weight.t() + layer.lin_l.bias     # no neighbours: b + W_r x
        torch.testing.assert_close(layer(graph, x), want)


@pytest.mark.parametrize(("in_width", "gemms"), [(8, 2), (16, 1)])
def test_inference_shares_only_when_the_input_is_over_twice_as_wide(monkeypatch, in_width,
                                                                     gemms):
    torch.manual_seed(0)
    layer = SAGEConv(in_width, 4).double()
    layer.plan = _project_first(layer)
    graph, x = _graph(), torch.randn(30, in_width, dtype=torch.float64)
    shapes = _gemms(monkeypatch)
    with torch.no_grad():
        got = layer(graph, x)
    assert len(shapes) == gemms
    layer.plan = "default"
    torch.testing.assert_close(got, layer(graph, x).detach(), rtol=1e-12, atol=1e-12)
