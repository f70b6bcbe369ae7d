"""Property-based: the numba backend equals the reference on arbitrary small graphs,
including empty ones, isolated nodes, self-loops and duplicate edges."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gnnforge.ops as ops
from gnnforge.graph import Graph


@st.composite
def graphs_and_features(draw):
    num_nodes = draw(st.integers(1, 12))
    num_edges = draw(st.integers(0, 40))
    ends = st.lists(st.integers(0, num_nodes - 1), min_size=num_edges, max_size=num_edges)
    src, dst = draw(ends), draw(ends)
    width = draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**16))
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_nodes, width, generator=generator, dtype=torch.float64)
    weight = torch.randn(num_edges, generator=generator, dtype=torch.float64)
    return Graph(src, dst, num_nodes), x, weight


@settings(max_examples=60, deadline=None)
@given(graphs_and_features())
def test_numba_equals_reference(sample):
    graph, x, weight = sample
    calls = [
        lambda: ops.copy_u_sum(graph, x), lambda: ops.copy_u_mean(graph, x),
        lambda: ops.copy_u_max(graph, x), lambda: ops.copy_u_min(graph, x),
        lambda: ops.u_mul_e_sum(graph, x, weight), lambda: ops.copy_e_max(graph, weight),
        lambda: ops.u_dot_v(graph, x, x), lambda: ops.edge_softmax(graph, weight),
    ]
    for call in calls:
        with ops.use_backend("numba"):
            fast = call()
        with ops.use_backend("reference"):
            expected = call()
        torch.testing.assert_close(fast, expected)
