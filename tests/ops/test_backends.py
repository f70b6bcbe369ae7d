"""Every fast backend equals the reference: ops x reduces x dtypes x index dtypes x shapes.

The 'torch' backend is the CUDA path; it runs here on CPU tensors so its logic is tested
without a GPU. Graphs carry self-loops, duplicate edges and isolated nodes (conftest).
"""

from __future__ import annotations

import pytest
import torch

import gnnforge.ops as ops
from gnnforge import BipartiteGraph
from ._backends import CPU_FAST, backends_for

FAST = [*CPU_FAST, "torch"]
# Both float types and both index types, paired to keep the run short (each pair is a
# separate compiled kernel signature).
DTYPES = [(torch.float32, torch.int32), (torch.float64, torch.int64),
          (torch.float32, torch.int64)]

# (op, reduces, lhs feature shape, rhs feature shape)
SPMM_CASES = [
    ("copy_lhs", ("sum", "mean", "max", "min"), (5,), None),
    ("copy_rhs", ("sum", "mean", "max", "min"), None, (3,)),
    ("mul", ("sum", "mean", "max", "min"), (6,), ()),          # edge scalar [E]
    ("mul", ("sum", "mean"), (2, 4), (2, 1)),                 # per-head weights
    ("add", ("sum", "max"), (1, 4), (3, 1)),                  # two-sided broadcast
    ("sub", ("sum", "min"), (4,), (4,)),
    ("div", ("sum", "mean"), (4,), (4,)),
    ("dot", ("sum", "mean"), (2, 4), (2, 4)),
]

# (op, lhs target, rhs target, lhs feature shape, rhs feature shape)
SDDMM_CASES = [
    ("dot", "u", "v", (3, 4), (3, 4)),
    ("add", "u", "v", (4,), (4,)),
    ("mul", "u", "e", (2, 4), (2, 1)),
    ("sub", "e", "v", (4,), (1,)),
    ("div", "v", "u", (4,), (4,)),
    ("mul", "e", "e", (3,), (3,)),
    ("dot", "v", "v", (5,), (5,)),
    ("copy_lhs", "u", "v", (4,), None),
    ("copy_rhs", "u", "e", None, (2, 3)),
]


def _rows(graph, target):
    return {"u": graph.num_src_nodes, "v": graph.num_dst_nodes, "e": graph.num_edges}[target]


def _data(rows, shape, dtype, seed, positive=False):
    if shape is None:
        return None
    generator = torch.Generator().manual_seed(seed)
    data = torch.randn((rows, *shape), generator=generator, dtype=torch.float64)
    if positive:
        data = data.abs() + 0.5  # keeps div well conditioned
    return data.to(dtype)


def _tolerance(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)


def _compare(fast, reference, dtype):
    assert fast.shape == reference.shape
    assert fast.dtype == reference.dtype
    torch.testing.assert_close(fast, reference, **_tolerance(dtype))


def _run_both(backend, index_dtype, function, inputs):
    with ops.use_backend("reference"):
        expected = function(*inputs)
    with ops.use_backend(backend, index_dtype=index_dtype):
        actual = function(*inputs)
    return actual, expected


def _grid(cases, name):
    """(backend, case) pairs: every backend for the copy ops, `OP_FAST` for the others."""
    return [pytest.param(backend, case, id=f"{name(case)}-{backend}")
            for case in cases for backend in backends_for(case[0], FAST)]


@pytest.mark.parametrize(("dtype", "index_dtype"), DTYPES, ids=str)
@pytest.mark.parametrize(("backend", "case"), _grid(SPMM_CASES, lambda case: case[0]))
def test_gspmm_matches_reference(graph, backend, index_dtype, dtype, case):
    op, reduces, lhs_shape, rhs_shape = case
    lhs = _data(graph.num_src_nodes, lhs_shape, dtype, 1)
    rhs = _data(graph.num_edges, rhs_shape, dtype, 2, positive=op == "div")
    for reduce in reduces:
        actual, expected = _run_both(backend, index_dtype,
                                     lambda a, b: ops.gspmm(graph, op, reduce, a, b), (lhs, rhs))
        _compare(actual, expected, dtype)


@pytest.mark.parametrize(("dtype", "index_dtype"), DTYPES, ids=str)
@pytest.mark.parametrize(("backend", "case"), _grid(SDDMM_CASES, lambda case: "_".join(case[:3])))
def test_gsddmm_matches_reference(graph, backend, index_dtype, dtype, case):
    op, lhs_target, rhs_target, lhs_shape, rhs_shape = case
    lhs = _data(_rows(graph, lhs_target), lhs_shape, dtype, 3)
    rhs = _data(_rows(graph, rhs_target), rhs_shape, dtype, 4, positive=op == "div")
    actual, expected = _run_both(
        backend, index_dtype,
        lambda a, b: ops.gsddmm(graph, op, a, b, lhs_target, rhs_target), (lhs, rhs))
    _compare(actual, expected, dtype)


@pytest.mark.parametrize("backend", FAST)
def test_empty_graph_gives_zeros(empty_graph, backend):
    x = torch.randn(6, 3)
    with ops.use_backend(backend):
        for reduce in ("sum", "mean", "max", "min"):
            assert torch.equal(ops.gspmm(empty_graph, "copy_lhs", reduce, x), torch.zeros(6, 3))
        assert ops.u_dot_v(empty_graph, x, x).shape == (0, 1)
        assert ops.edge_softmax(empty_graph, torch.zeros(0, 2)).shape == (0, 2)


@pytest.mark.parametrize("backend", FAST)
@pytest.mark.parametrize(("num_src", "num_dst"), [(0, 4), (3, 0), (0, 0)])
def test_edgeless_bipartite_forward_and_backward(backend, num_src, num_dst):
    """No edges and an empty side: zeros forward, zero gradients back, no indexing error."""
    empty = torch.zeros(0, dtype=torch.int64)
    graph = BipartiteGraph(empty, empty, num_src_nodes=num_src, num_dst_nodes=num_dst)
    x = torch.randn(num_src, 5, requires_grad=True)
    weight = torch.randn(0, requires_grad=True)
    with ops.use_backend(backend):
        out = ops.u_mul_e_sum(graph, x, weight) + ops.copy_u_sum(graph, x)
        out.sum().backward()
    assert torch.equal(out, torch.zeros(num_dst, 5))
    assert torch.equal(x.grad, torch.zeros(num_src, 5))
    assert weight.grad.shape == (0,)


@pytest.mark.parametrize("backend", FAST)
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_edgeless_max_min_backward(empty_graph, backend, reduce):
    """Every winner is -1 on a graph without edges: zero gradients, no index error."""
    x = torch.randn(6, 4, requires_grad=True)
    weight = torch.randn(0, 4, requires_grad=True)
    with ops.use_backend(backend):
        out = (ops.gspmm(empty_graph, "mul", reduce, x, weight)
               + ops.gspmm(empty_graph, "copy_rhs", reduce, None, weight))
        out.sum().backward()
    assert torch.equal(out, torch.zeros(6, 4))
    assert torch.equal(x.grad, torch.zeros(6, 4))
    assert weight.grad.shape == (0, 4)


@pytest.mark.parametrize("backend", FAST)
def test_zero_width_features(graph, backend):
    x = torch.randn(graph.num_src_nodes, 0)
    with ops.use_backend(backend):
        assert ops.copy_u_sum(graph, x).shape == (graph.num_dst_nodes, 0)


@pytest.mark.parametrize("backend", FAST)
def test_non_contiguous_inputs(graph, backend):
    base = torch.randn(8, graph.num_src_nodes)
    x = base.t()[:, ::2]                                     # strided, transposed
    weight = torch.randn(graph.num_edges, 2)[:, 1]           # strided edge scalar
    assert not x.is_contiguous() and not weight.is_contiguous()
    for function in (ops.copy_u_sum, ops.copy_u_max, ops.copy_u_mean):
        actual, expected = _run_both(backend, None, lambda a: function(graph, a), (x,))
        _compare(actual, expected, torch.float32)
    actual, expected = _run_both(backend, None, lambda a, b: ops.u_mul_e_sum(graph, a, b),
                                 (x, weight))
    _compare(actual, expected, torch.float32)


@pytest.mark.parametrize("backend", FAST)
def test_bfloat16_is_accumulated_in_float32(graph, backend):
    # Seeded, and the oracle sums the bfloat16 inputs exactly as float32: what is left is
    # one final rounding (unseeded data against the unrounded x failed now and then).
    x = torch.randn(graph.num_src_nodes, 8, generator=torch.Generator().manual_seed(3))
    x = x.to(torch.bfloat16)
    with ops.use_backend(backend):
        out = ops.copy_u_sum(graph, x)
    with ops.use_backend("reference"):
        expected = ops.copy_u_sum(graph, x.float())
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), expected.to(torch.bfloat16).float(), rtol=0, atol=0)


@pytest.mark.parametrize("backend", FAST)
def test_mixed_precision_operands_promote(graph, backend):
    x = torch.randn(graph.num_src_nodes, 4, dtype=torch.float32)
    weight = torch.randn(graph.num_edges, dtype=torch.float64)
    actual, expected = _run_both(backend, None, lambda a, b: ops.u_mul_e_sum(graph, a, b),
                                 (x, weight))
    _compare(actual, expected, torch.float64)


def test_scalar_operands_give_one_dimensional_output(graph):
    weight = torch.randn(graph.num_edges)
    node = torch.randn(graph.num_src_nodes)
    for backend in ("reference", *FAST):
        with ops.use_backend(backend):
            assert ops.copy_e_sum(graph, weight).shape == (graph.num_dst_nodes,)
            assert ops.u_mul_e_sum(graph, node, weight).shape == (graph.num_dst_nodes,)
            assert ops.edge_softmax(graph, weight).shape == (graph.num_edges,)


@pytest.mark.parametrize("backend", FAST)
def test_max_without_gradient_skips_arg_recording(graph, backend):
    x = torch.randn(graph.num_src_nodes, 6)
    with ops.use_backend(backend):
        fast = [ops.copy_u_max(graph, x), ops.copy_u_min(graph, x),
                ops.u_mul_e_max(graph, x, torch.ones(graph.num_edges))]
    with ops.use_backend("reference"):
        expected = [ops.copy_u_max(graph, x), ops.copy_u_min(graph, x), ops.copy_u_max(graph, x)]
    for got, want in zip(fast, expected):
        torch.testing.assert_close(got, want)
