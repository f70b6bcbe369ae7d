"""Public surface: argument errors, backend forcing, custom-op registration, torch.compile."""

from __future__ import annotations

import pytest
import torch

import gnnforge.ops as ops
from ._backends import DEFAULT_CPU
from .conftest import random_graph
from gnnforge.ops._graph_arrays import graph_arrays as _arrays


@pytest.fixture
def graph():
    return random_graph("square", seed=3, num_edges=40)


def test_errors_name_the_argument(graph):
    x = torch.randn(graph.num_src_nodes, 4)
    with pytest.raises(ValueError, match="op must be one of"):
        ops.gspmm(graph, "pow", "sum", x)
    with pytest.raises(ValueError, match="reduce must be one of"):
        ops.gspmm(graph, "copy_lhs", "prod", x)
    with pytest.raises(TypeError, match="lhs: this op reads it"):
        ops.gspmm(graph, "mul", "sum", None, torch.randn(graph.num_edges))
    with pytest.raises(ValueError, match="rhs: first dimension must be num_edges"):
        ops.u_mul_e_sum(graph, x, torch.randn(3))
    with pytest.raises(TypeError, match="floating-point"):
        ops.copy_u_sum(graph, torch.ones(graph.num_src_nodes, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="do not broadcast"):
        ops.u_mul_e_sum(graph, x, torch.randn(graph.num_edges, 3))
    with pytest.raises(ValueError, match="dot needs equal last"):
        ops.u_dot_v(graph, x, torch.randn(graph.num_dst_nodes, 5))
    with pytest.raises(ValueError, match="lhs_target must be"):
        ops.gsddmm(graph, "add", x, x, "w", "v")
    with pytest.raises(ValueError, match="'dot' supports reduce"):
        ops.gspmm(graph, "dot", "max", x, torch.randn(graph.num_edges, 4))
    with pytest.raises(TypeError, match="kernel protocol"):
        ops.copy_u_sum(object(), x)
    with pytest.raises(ValueError, match="num_edges"):
        ops.edge_softmax(graph, torch.randn(2))


def test_use_backend_validates_and_restores(graph):
    with pytest.raises(ValueError, match="backend must be one of"):
        with ops.use_backend("cuda-kernels"):
            pass
    with pytest.raises(ValueError, match="index_dtype"):
        with ops.use_backend("numba", index_dtype=torch.int16):
            pass
    from gnnforge.ops._dispatch import choose
    assert choose("gspmm", torch.device("cpu")).backend == DEFAULT_CPU
    with ops.use_backend("reference"):
        assert choose("gspmm", torch.device("cpu")).backend == "reference"
        with ops.use_backend("torch"):
            assert choose("gspmm", torch.device("cpu")).backend == "torch"
    assert choose("gspmm", torch.device("cpu")).backend == DEFAULT_CPU
    with ops.use_backend("numba"), pytest.raises(ValueError, match="runs on"):
        choose("gspmm", torch.device("meta"))


def test_custom_ops_pass_opcheck(graph):
    arrays = _arrays(graph, None, csc=True, coo=True)
    x = torch.randn(graph.num_src_nodes, 2, 3, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(graph.num_edges, 2, 1, dtype=torch.float64, requires_grad=True)
    y = torch.randn(graph.num_dst_nodes, 2, 3, dtype=torch.float64, requires_grad=True)
    for reduce in ("sum", "max"):
        torch.library.opcheck(torch.ops.gnnforge.gspmm.default,
                              (arrays, x, weight, "mul", reduce, "numba", True))
    torch.library.opcheck(torch.ops.gnnforge.gspmm.default,
                          (arrays, x, None, "copy_lhs", "mean", "numba", True))
    torch.library.opcheck(torch.ops.gnnforge.gsddmm.default,
                          (arrays, x, y, "dot", "u", "v", "numba"))


def test_torch_compile_traces_through_the_custom_ops(graph):
    x = torch.randn(graph.num_src_nodes, 4, requires_grad=True)
    weight = torch.randn(graph.num_edges)
    linear = torch.nn.Linear(4, 4)

    def layer(features):
        return torch.relu(linear(ops.u_mul_e_sum(graph, features, weight) + features))

    compiled = torch.compile(layer, backend="aot_eager")
    torch.testing.assert_close(compiled(x), layer(x))
    grad_compiled, = torch.autograd.grad(compiled(x).sum(), x)
    grad_eager, = torch.autograd.grad(layer(x).sum(), x)
    torch.testing.assert_close(grad_compiled, grad_eager)


def test_shortcuts_are_the_generic_calls(graph):
    x = torch.randn(graph.num_src_nodes, 3)
    y = torch.randn(graph.num_dst_nodes, 3)
    e = torch.randn(graph.num_edges, 3)
    pairs = [
        (ops.copy_u_mean(graph, x), ops.gspmm(graph, "copy_lhs", "mean", x)),
        (ops.copy_e_max(graph, e), ops.gspmm(graph, "copy_rhs", "max", None, e)),
        (ops.u_add_e_sum(graph, x, e), ops.gspmm(graph, "add", "sum", x, e)),
        (ops.u_sub_v(graph, x, y), ops.gsddmm(graph, "sub", x, y)),
        (ops.e_div_v(graph, e, y.abs() + 1), ops.gsddmm(graph, "div", e, y.abs() + 1, "e", "v")),
        (ops.copy_v(graph, y), y[graph.dst]),
        (ops.copy_u(graph, x), x[graph.src]),
    ]
    for got, want in pairs:
        torch.testing.assert_close(got, want)


def test_edge_softmax_sums_to_one_per_destination(graph):
    logits = torch.randn(graph.num_edges, 3) * 10
    out = ops.edge_softmax(graph, logits)
    totals = ops.copy_e_sum(graph, out)
    has_edges = torch.bincount(graph.dst, minlength=graph.num_nodes) > 0
    torch.testing.assert_close(totals[has_edges], torch.ones(int(has_edges.sum()), 3))
    assert torch.all(totals[~has_edges] == 0)


@pytest.mark.gpu
def test_cuda_path_matches_reference(graph):
    cuda_graph = graph.to("cuda")
    x = torch.randn(graph.num_src_nodes, 8, device="cuda", requires_grad=True)
    weight = torch.randn(graph.num_edges, device="cuda", requires_grad=True)
    for reduce in ("sum", "mean", "max", "min"):
        out = ops.gspmm(cuda_graph, "mul", reduce, x, weight)
        grads = torch.autograd.grad(out.square().sum(), (x, weight))
        with ops.use_backend("reference"):
            ref = ops.gspmm(cuda_graph, "mul", reduce, x, weight)
            ref_grads = torch.autograd.grad(ref.square().sum(), (x, weight))
        torch.testing.assert_close(out, ref)
        for got, want in zip(grads, ref_grads):
            torch.testing.assert_close(got, want)
    torch.testing.assert_close(ops.u_dot_v(cuda_graph, x, x), x[graph.src.cuda()].mul(
        x[graph.dst.cuda()]).sum(-1, keepdim=True))


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_eager_fast_path_equals_the_custom_op(graph, reduce):
    # Eager calls run through a plain autograd.Function (or the kernel directly without a
    # gradient); traced calls through the custom op. Both must give the same values and
    # gradients, for Parameters too.
    from gnnforge.ops._custom_ops import spmm_op

    x = torch.nn.Parameter(torch.randn(graph.num_src_nodes, 4,
                                       generator=torch.Generator().manual_seed(5)))
    grad = torch.randn(graph.num_dst_nodes, 4, generator=torch.Generator().manual_seed(6))
    out = ops.gspmm(graph, "copy_lhs", reduce, x)
    assert type(out.grad_fn).__name__ == "_SpmmFunctionNoBindBackward"
    fast, = torch.autograd.grad(out, x, grad)
    arrays = _arrays(graph, None, csc=True, coo=True)
    through_op = spmm_op(arrays, x, None, "copy_lhs", reduce, DEFAULT_CPU, True)[0]
    slow, = torch.autograd.grad(through_op, x, grad)
    torch.testing.assert_close(out, through_op)
    torch.testing.assert_close(fast, slow)
    with torch.no_grad():
        torch.testing.assert_close(ops.gspmm(graph, "copy_lhs", reduce, x), out)
