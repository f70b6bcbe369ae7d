"""The mkl backend (copy_u sum/mean as torch.sparse.mm, numba for the rest) equals the
reference, forward and gradients, on random and degenerate graphs."""

from __future__ import annotations

import pytest
import torch

from gnnforge import ops
from gnnforge.graph import Graph

SHAPES = [(0, 0), (1, 0), (5, 0), (6, 20), (40, 300)]   # empty, one node, no edges, ...


def _graph(seed: int, nodes: int, edges: int) -> Graph:
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(0, max(nodes, 1), (edges,), generator=generator)
    dst = torch.randint(0, max(nodes, 1), (edges,), generator=generator)
    if edges > 2:
        src[:2], dst[:2] = 3, 3                              # a duplicated self-loop
    return Graph(src, dst, nodes)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("index_dtype", [None, torch.int64])
def test_mkl_equals_the_reference(shape, reduce, dtype, index_dtype):
    graph = _graph(sum(shape), *shape)
    x = torch.randn(graph.num_nodes, 7, dtype=dtype, requires_grad=True)
    grad = torch.randn(graph.num_nodes, 7, dtype=dtype)
    results = []
    for backend, forced in (("reference", None), ("mkl", index_dtype)):
        with ops.use_backend(backend, index_dtype=forced):
            out = ops.gspmm(graph, "copy_lhs", reduce, x)
            (gradient,) = torch.autograd.grad(out, x, grad)
        results.append((out, gradient))
    tolerance = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else {}
    torch.testing.assert_close(results[1][0], results[0][0], **tolerance)
    torch.testing.assert_close(results[1][1], results[0][1], **tolerance)


def test_other_ops_run_numbas_kernels():
    graph = _graph(1, 30, 200)
    x, weight = torch.randn(30, 4), torch.rand(200)
    with ops.use_backend("mkl"):
        actual = ops.u_mul_e_sum(graph, x, weight)
    with ops.use_backend("reference"):
        expected = ops.u_mul_e_sum(graph, x, weight)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_mkl_under_bf16_autocast_computes_in_the_input_dtype(reduce):
    """Autocast would cast the kernel's torch.sparse.mm to bfloat16, which MKL's CSR product
    does not implement; like every kernel, mkl computes in its input's dtype there."""
    graph = _graph(3, 30, 200)
    x = torch.randn(30, 7, requires_grad=True)
    results = []
    for backend in ("reference", "mkl"):
        with ops.use_backend(backend), torch.autocast("cpu", dtype=torch.bfloat16):
            out = ops.gspmm(graph, "copy_lhs", reduce, x)
            (gradient,) = torch.autograd.grad(out.sum(), x)
        results.append((out, gradient))
    assert results[1][0].dtype == torch.float32
    torch.testing.assert_close(results[1][0], results[0][0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(results[1][1], results[0][1], atol=1e-5, rtol=1e-5)
