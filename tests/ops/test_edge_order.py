"""Edge rows read in storage order (gnnforge/ops/_edge_order.py) on edge lists grouped by
destination: equal to the reference on every CPU backend, forward and gradients; used
only where it applies; computed once per graph."""

from __future__ import annotations

import gc

import pytest
import torch

import gnnforge.ops as ops
import gnnforge.ops._custom_ops as custom_ops
from gnnforge import Graph
from gnnforge.ops import _edge_order
from gnnforge.ops._reference import gspmm_ref
from ._backends import OP_FAST


def _grouped_graph(num_nodes: int, num_edges: int, seed: int) -> Graph:
    """Random multigraph (self-loops, duplicates, isolated nodes) stored by destination,
    sources unsorted within each destination."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=generator)
    dst = torch.randint(0, max(num_nodes - 2, 1), (num_edges,), generator=generator)
    order = torch.argsort(dst, stable=True)
    return Graph(src[order], dst[order], num_nodes)


def _shuffled(graph: Graph, seed: int) -> Graph:
    perm = torch.randperm(graph.num_edges, generator=torch.Generator().manual_seed(seed))
    return Graph(graph.src[perm], graph.dst[perm], graph.num_nodes)


CASES = [  # (op, reduce, lhs feature shape, rhs feature shape)
    ("mul", "sum", (16,), (16,)),
    ("mul", "mean", (20,), (20,)),
    ("add", "sum", (4, 8), (4, 8)),
    ("copy_rhs", "sum", None, (32,)),
    ("copy_rhs", "mean", None, (2, 8)),
    ("dot", "sum", (2, 16), (2, 16)),
]


def _operands(graph, lhs_shape, rhs_shape, dtype, seed):
    generator = torch.Generator().manual_seed(seed)

    def make(rows, shape):
        if shape is None:
            return None
        return torch.randn((rows, *shape), generator=generator, dtype=torch.float64
                           ).to(dtype).requires_grad_()
    return make(graph.num_nodes, lhs_shape), make(graph.num_edges, rhs_shape)


@pytest.mark.parametrize("backend", OP_FAST)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("op,reduce,lhs_shape,rhs_shape", CASES)
def test_grouped_edge_lists_match_the_reference_forward_and_backward(
        backend, index_dtype, op, reduce, lhs_shape, rhs_shape):
    graph = _grouped_graph(40, 300, seed=len(CASES))
    lhs, rhs = _operands(graph, lhs_shape, rhs_shape, torch.float64, seed=1)
    with ops.use_backend(backend, index_dtype):
        out = ops.gspmm(graph, op, reduce, lhs, rhs)
    expected = gspmm_ref(graph, op, reduce, lhs, rhs)
    torch.testing.assert_close(out, expected)
    grad = torch.randn_like(out)
    inputs = [t for t in (lhs, rhs) if t is not None]
    got = torch.autograd.grad(out, inputs, grad)
    want = torch.autograd.grad(expected, inputs, grad)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def _spy_eids(monkeypatch) -> list[torch.Tensor]:
    seen: list[torch.Tensor] = []
    real = custom_ops.kernel

    def spying(family, backend):
        inner = real(family, backend)

        def call(rowptr, col, eids, *rest):
            seen.append(eids)
            return inner(rowptr, col, eids, *rest)
        return call
    monkeypatch.setattr(custom_ops, "kernel", spying)
    return seen


def test_wide_edge_rows_are_read_in_edge_id_order_on_a_grouped_edge_list(monkeypatch):
    graph = _grouped_graph(30, 200, seed=3)
    seen = _spy_eids(monkeypatch)
    x, e = torch.randn(30, 16), torch.randn(200, 16)
    with ops.use_backend("numba"):
        ops.u_mul_e_sum(graph, x, e)
    assert torch.equal(seen[-1].long(), torch.arange(200))


@pytest.mark.parametrize("reason", ["narrow rows", "max", "shuffled edge list"])
def test_the_csr_order_stays_where_edge_order_does_not_apply(monkeypatch, reason):
    graph = _grouped_graph(30, 200, seed=4)
    width, reduce = 16, "sum"
    if reason == "narrow rows":
        width = 1
    elif reason == "max":
        reduce = "max"
    else:
        graph = _shuffled(graph, seed=5)
    seen = _spy_eids(monkeypatch)
    x, e = torch.randn(30, 16), torch.randn(200, width)
    with ops.use_backend("numba"):
        ops.gspmm(graph, "mul", reduce, x, e)
    assert torch.equal(seen[-1].long(), graph.csr()[2])


def test_a_shuffled_edge_list_still_matches_the_reference():
    graph = _shuffled(_grouped_graph(30, 200, seed=6), seed=7)
    x, e = torch.randn(30, 16, dtype=torch.float64), torch.randn(200, 16, dtype=torch.float64)
    torch.testing.assert_close(ops.u_mul_e_sum(graph, x, e),
                               gspmm_ref(graph, "mul", "sum", x, e))


def test_the_remap_is_computed_once_per_graph_and_released_with_it(monkeypatch):
    calls = []
    real = _edge_order._remap
    monkeypatch.setattr(_edge_order, "_remap", lambda *a: calls.append(1) or real(*a))
    graph = _grouped_graph(30, 200, seed=8)
    x, e = torch.randn(30, 16), torch.randn(200, 16)
    for _ in range(3):
        ops.u_mul_e_sum(graph, x, e)
    assert len(calls) == 1
    before = len(_edge_order._CACHE)
    del graph
    gc.collect()
    assert len(_edge_order._CACHE) < before


@pytest.mark.parametrize("num_nodes,num_edges", [(5, 0), (1, 1), (6, 3)])
def test_degenerate_graphs_match_the_reference(num_nodes, num_edges):
    graph = _grouped_graph(num_nodes, num_edges, seed=9)
    x = torch.randn(num_nodes, 16, dtype=torch.float64)
    e = torch.randn(num_edges, 16, dtype=torch.float64)
    torch.testing.assert_close(ops.u_mul_e_sum(graph, x, e),
                               gspmm_ref(graph, "mul", "sum", x, e))


def test_edge_ordered_recognises_grouping_directly():
    rowptr = torch.tensor([0, 2, 2, 5])
    col = torch.tensor([0, 1, 0, 1, 2])
    grouped = torch.tensor([1, 0, 4, 2, 3])      # each row's ids are its own range
    assert _edge_order._remap(rowptr, col, grouped) is not None
    sources, positions = _edge_order._remap(rowptr, col, grouped)
    assert sources.tolist() == [1, 0, 1, 2, 0] and positions.tolist() == [0, 1, 2, 3, 4]
    assert _edge_order._remap(rowptr, col, torch.tensor([2, 0, 4, 1, 3])) is None
    assert _edge_order._remap(rowptr, col, torch.arange(5)) is None
