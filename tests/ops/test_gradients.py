"""Gradients: float64 gradcheck of every primitive w.r.t. every input on the fast backends,
and fast gradients equal to the reference's (PyTorch autograd of gather/scatter).

Copy ops run on every CPU backend (every native variant); the other ops on `OP_FAST`
(gradcheck on 'auto'), since test_native_binary.py checks their native kernels' gradients
on every variant.
"""

from __future__ import annotations

import pytest
import torch

import gnnforge.ops as ops
from ._backends import CPU_FAST, backends_for
from .conftest import random_graph

SPMM = [  # (op, reduce, lhs feature shape, rhs feature shape)
    ("copy_lhs", "sum", (3,), None), ("copy_lhs", "mean", (3,), None),
    ("copy_lhs", "max", (3,), None), ("copy_lhs", "min", (3,), None),
    ("copy_rhs", "sum", None, (2,)), ("copy_rhs", "max", None, (2,)),
    ("copy_rhs", "mean", None, (2,)), ("copy_rhs", "min", None, (2,)),
    ("mul", "sum", (2, 3), (2, 1)), ("mul", "mean", (3,), ()), ("mul", "max", (3,), (1,)),
    ("mul", "min", (2, 3), (2, 1)),
    ("add", "sum", (1, 3), (2, 1)), ("add", "max", (3,), (3,)),
    ("sub", "sum", (3,), (3,)), ("div", "sum", (3,), (1,)), ("dot", "sum", (2, 3), (2, 3)),
]
SDDMM = [  # (op, lhs target, rhs target, lhs shape, rhs shape)
    ("dot", "u", "v", (2, 3), (2, 3)), ("add", "u", "v", (3,), (1,)),
    ("mul", "u", "e", (2, 3), (2, 1)), ("mul", "e", "v", (3,), (3,)),
    ("sub", "v", "u", (3,), (3,)), ("div", "e", "e", (2,), (2,)),
    ("mul", "u", "u", (3,), (3,)), ("dot", "e", "u", (3,), (3,)),
    ("copy_lhs", "v", "u", (3,), None),
]


def _small_graph(kind):
    return random_graph(kind, seed=11, num_edges=30)


def _leaf(rows, shape, seed, positive=False):
    if shape is None:
        return None
    generator = torch.Generator().manual_seed(seed)
    data = torch.randn((rows, *shape), generator=generator, dtype=torch.float64)
    return (data.abs() + 0.5 if positive else data).requires_grad_()


def _rows(graph, target):
    return {"u": graph.num_src_nodes, "v": graph.num_dst_nodes, "e": graph.num_edges}[target]


def _check(function, inputs, op=None):
    """Gradients equal to the reference's on the CPU backends and 'torch', and float64
    gradcheck: on every CPU backend for the copy ops (and when `op` is None); for the other
    ops on `OP_FAST` and gradcheck on 'auto' only, since test_native_binary.py gradchecks
    their native kernels on every variant."""
    inputs = tuple(t for t in inputs if t is not None)
    cpu = CPU_FAST if op is None else backends_for(op, CPU_FAST)
    for backend in (cpu if op is None or op.startswith("copy") else ["auto"]):
        with ops.use_backend(backend):
            assert torch.autograd.gradcheck(function, inputs)
    for backend in (*cpu, "torch"):
        with ops.use_backend(backend):
            fast = torch.autograd.grad(function(*inputs).square().sum(), inputs)
        with ops.use_backend("reference"):
            expected = torch.autograd.grad(function(*inputs).square().sum(), inputs)
        for got, want in zip(fast, expected):
            torch.testing.assert_close(got, want)


@pytest.mark.parametrize("kind", ["square", "bipartite"])
@pytest.mark.parametrize("case", SPMM, ids=lambda c: f"{c[0]}-{c[1]}")
def test_gspmm_gradients(kind, case):
    op, reduce, lhs_shape, rhs_shape = case
    graph = _small_graph(kind)
    lhs = _leaf(graph.num_src_nodes, lhs_shape, 1)
    rhs = _leaf(graph.num_edges, rhs_shape, 2, positive=op == "div")
    if lhs is None:
        _check(lambda b: ops.gspmm(graph, op, reduce, None, b), (rhs,), op)
    elif rhs is None:
        _check(lambda a: ops.gspmm(graph, op, reduce, a, None), (lhs,), op)
    else:
        _check(lambda a, b: ops.gspmm(graph, op, reduce, a, b), (lhs, rhs), op)


@pytest.mark.parametrize("kind", ["square", "bipartite"])
@pytest.mark.parametrize("case", SDDMM, ids=lambda c: "-".join(c[:3]))
def test_gsddmm_gradients(kind, case):
    op, lhs_target, rhs_target, lhs_shape, rhs_shape = case
    graph = _small_graph(kind)
    lhs = _leaf(_rows(graph, lhs_target), lhs_shape, 3)
    rhs = _leaf(_rows(graph, rhs_target), rhs_shape, 4, positive=op == "div")
    if rhs is None:
        _check(lambda a: ops.gsddmm(graph, op, a, None, lhs_target, rhs_target), (lhs,), op)
    else:
        _check(lambda a, b: ops.gsddmm(graph, op, a, b, lhs_target, rhs_target), (lhs, rhs),
               op)


@pytest.mark.parametrize("kind", ["square", "bipartite"])
def test_edge_softmax_gradients(kind):
    graph = _small_graph(kind)
    logits = _leaf(graph.num_edges, (2,), 5)
    _check(lambda s: ops.edge_softmax(graph, s), (logits,), "edge_softmax")


def test_second_derivative_through_weighted_sum():
    graph = _small_graph("square")
    x = _leaf(graph.num_src_nodes, (3,), 6)
    weight = _leaf(graph.num_edges, (), 7)
    with ops.use_backend("numba"):
        assert torch.autograd.gradgradcheck(lambda a, b: ops.u_mul_e_sum(graph, a, b), (x, weight))


def test_no_grad_call_builds_no_reverse_graph():
    graph = _small_graph("square")
    x = torch.randn(graph.num_src_nodes, 3)
    with ops.use_backend("numba"):
        ops.copy_u_sum(graph, x)
    assert not any(kind == "csc" for kind, _ in graph._cache)


@pytest.mark.parametrize("backend", CPU_FAST)
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("seed", range(4))
def test_copy_u_backward_pull_kernels_match_reference(backend, reduce, index_dtype, seed):
    # The CSC pull kernels (mean: 1/deg(v) read from the CSR; max/min: multi-edges counted
    # once, isolated sources get 0) against PyTorch autograd of the reference, on graphs
    # with loops, duplicates and nodes without in- or out-edges.
    graph = random_graph("square" if seed % 2 else "bipartite", seed=seed, num_edges=200)
    x = _leaf(graph.num_src_nodes, (2, 5), seed).detach().float().requires_grad_()
    grad = torch.randn(graph.num_dst_nodes, 2, 5, generator=torch.Generator().manual_seed(seed))
    with ops.use_backend(backend, index_dtype):
        fast, = torch.autograd.grad(ops.gspmm(graph, "copy_lhs", reduce, x), x, grad)
    with ops.use_backend("reference"):
        expected, = torch.autograd.grad(ops.gspmm(graph, "copy_lhs", reduce, x), x, grad)
    torch.testing.assert_close(fast, expected)


def test_extreme_gradient_second_derivative_still_works():
    graph = _small_graph("square")
    x = _leaf(graph.num_src_nodes, (3,), 8)
    with ops.use_backend("numba"):
        assert torch.autograd.gradgradcheck(lambda a: ops.copy_u_max(graph, a).square(), (x,))
