"""The copy_u sum/mean fast path equals the reference, gradients and second derivatives too.

`copy_u_fast` serves eligible calls (2-D contiguous float CPU tensors, native backend,
eager); everything else must fall back to the generic route with the same results.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gnnforge.ops as ops
from gnnforge.graph import Graph
from gnnforge.ops._fast_copy import copy_u_fast
from gnnforge.ops._native import available

pytestmark = pytest.mark.skipif(not available(), reason="native kernels unavailable here")

FUNCTIONS = {"sum": ops.copy_u_sum, "mean": ops.copy_u_mean}


def _graph(seed: int, num_nodes: int, num_edges: int) -> Graph:
    """Random edges plus self-loops and repeated edges; some nodes end up isolated."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(0, max(num_nodes - 2, 1), (num_edges,), generator=generator)
    dst = torch.randint(0, max(num_nodes - 3, 1), (num_edges,), generator=generator)
    if num_edges:
        src = torch.cat([src, src[:3], torch.zeros(1, dtype=torch.long)])
        dst = torch.cat([dst, dst[:3], torch.zeros(1, dtype=torch.long)])
    return Graph(src, dst, num_nodes)


def _reference(graph, reduce, x):
    with ops.use_backend("reference"):
        return FUNCTIONS[reduce](graph, x)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), num_nodes=st.integers(1, 40),
       num_edges=st.integers(0, 150), width=st.sampled_from([1, 5, 8, 16, 33, 64, 100]),
       reduce=st.sampled_from(["sum", "mean"]))
def test_forward_and_gradient_equal_the_reference(seed, num_nodes, num_edges, width, reduce):
    graph = _graph(seed, num_nodes, num_edges)
    x = torch.randn(num_nodes, width, generator=torch.Generator().manual_seed(seed),
                    dtype=torch.float64, requires_grad=True)
    out = copy_u_fast(graph, reduce, x)
    assert out is not None  # eligible: the fast path itself is under test
    expected = _reference(graph, reduce, x)
    torch.testing.assert_close(out, expected)
    upstream = torch.randn_like(out)
    grad, = torch.autograd.grad(out, x, upstream)
    expected_grad, = torch.autograd.grad(expected, x, upstream)
    torch.testing.assert_close(grad, expected_grad)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_gradcheck_and_second_derivative(reduce):
    graph = _graph(3, 12, 40)
    x = torch.randn(12, 4, dtype=torch.float64, requires_grad=True)
    function = lambda a: FUNCTIONS[reduce](graph, a)  # noqa: E731
    assert copy_u_fast(graph, reduce, x) is not None
    assert torch.autograd.gradcheck(function, (x,))
    assert torch.autograd.gradgradcheck(lambda a: function(a).square(), (x,))


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_float32_and_the_empty_graph(reduce):
    edgeless = Graph(torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long), 6)
    x = torch.randn(6, 16, requires_grad=True)
    out = FUNCTIONS[reduce](edgeless, x)
    assert torch.equal(out, torch.zeros(6, 16))
    grad, = torch.autograd.grad(out.sum(), x)
    assert torch.equal(grad, torch.zeros(6, 16))
    nodeless = Graph(torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long), 0)
    assert FUNCTIONS[reduce](nodeless, torch.randn(0, 16)).shape == (0, 16)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_ineligible_calls_fall_back_with_the_same_result(reduce):
    graph = _graph(5, 20, 60)
    x = torch.randn(16, 20, dtype=torch.float64).t()          # non-contiguous
    features = torch.randn(20, 2, 3, dtype=torch.float64)      # 3-D
    assert copy_u_fast(graph, reduce, x) is None
    assert copy_u_fast(graph, reduce, features) is None
    for backend, index_dtype in (("torch", None), ("reference", None), ("numba", torch.int64)):
        with ops.use_backend(backend, index_dtype=index_dtype):
            assert copy_u_fast(graph, reduce, x.contiguous()) is None
    for backend in ("numba", "mkl"):                           # any CPU backend is eligible
        with ops.use_backend(backend):
            torch.testing.assert_close(copy_u_fast(graph, reduce, x.contiguous()),
                                       _reference(graph, reduce, x))
    torch.testing.assert_close(FUNCTIONS[reduce](graph, x), _reference(graph, reduce, x))
    torch.testing.assert_close(FUNCTIONS[reduce](graph, features),
                               _reference(graph, reduce, features))


def test_bad_input_still_gets_the_generic_errors():
    graph = _graph(1, 10, 20)
    with pytest.raises(ValueError, match="num_src_nodes"):
        ops.copy_u_sum(graph, torch.randn(9, 4))
    with pytest.raises(TypeError, match="graph"):
        ops.copy_u_sum(object(), torch.randn(10, 4))
