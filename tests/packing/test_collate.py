"""PackCollator equals GraphBatch.from_graphs(...).pad(...) exactly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.graph import Graph, GraphBatch
from gnnforge.packing import PackCollator


def _graph(generator: torch.Generator, nodes: int, edges: int, typed: bool) -> Graph:
    """Random graph: may have 0 nodes, isolated nodes, self-loops and multi-edges."""
    if nodes == 0:
        edges = 0
    src = torch.randint(0, max(nodes, 1), (edges,), generator=generator)
    dst = torch.randint(0, max(nodes, 1), (edges,), generator=generator)
    return Graph(src, dst, nodes,
                 edge_type=torch.randint(0, 3, (edges,), generator=generator) if typed else None,
                 node_data={"x": torch.randint(0, 9, (nodes, 4), generator=generator),
                            "h": torch.randn(nodes, 2, generator=generator)},
                 edge_data={"edge_attr": torch.randn(edges, 3, generator=generator)},
                 graph_data={"y": torch.randn(2, generator=generator)})


def _assert_same(fast: GraphBatch, slow: GraphBatch) -> None:
    assert fast == slow
    for got, want in zip(fast.csr(), slow.csr()):     # the collator's CSR vs a sort
        assert torch.equal(got, want)
    assert fast.num_graphs == slow.num_graphs
    assert torch.equal(fast.node_graph, slow.node_graph)
    assert torch.equal(fast.node_mask, slow.node_mask)
    assert torch.equal(fast.edge_mask, slow.edge_mask)


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 9)), min_size=1, max_size=12),
       picks=st.lists(st.integers(0, 11), max_size=8), typed=st.booleans(),
       seed=st.integers(0, 2**16), extra=st.tuples(st.integers(1, 5), st.integers(0, 5),
                                                     st.integers(1, 3)))
def test_equals_from_graphs_pad(sizes, picks, typed, seed, extra) -> None:
    generator = torch.Generator().manual_seed(seed)
    graphs = [_graph(generator, n, e, typed) for n, e in sizes]
    indices = np.array([p % len(graphs) for p in picks], dtype=np.int64)
    chosen = [graphs[i] for i in indices.tolist()]
    nodes = sum(g.num_nodes for g in chosen) + extra[0]
    edges = sum(g.num_edges for g in chosen) + extra[1]
    slots = len(chosen) + extra[2]
    fast = PackCollator(graphs, (nodes, edges, slots))(indices)
    slow = GraphBatch.from_graphs(chosen).pad(nodes, edges, slots)
    if chosen:
        _assert_same(fast, slow)
        return
    # An empty batch of graphs has no data keys; the collator keeps the dataset's keys
    # (zero-filled, the fixed shape a compiled model expects) and the same structure.
    assert torch.equal(fast.src, slow.src) and torch.equal(fast.graph_ptr, slow.graph_ptr)
    for got, want in zip(fast.csr(), slow.csr()):
        assert torch.equal(got, want)
    assert torch.equal(fast.edge_ptr, slow.edge_ptr)
    assert torch.equal(fast.graph_mask, slow.graph_mask)
    assert set(fast.node_data) == set(graphs[0].node_data)
    assert all(not v.any() for v in (*fast.node_data.values(), *fast.graph_data.values()))


def test_too_small_shape_raises() -> None:
    generator = torch.Generator().manual_seed(0)
    graphs = [_graph(generator, 4, 5, False) for _ in range(3)]
    collate = PackCollator(graphs, (8, 10, 3))
    with pytest.raises(ValueError, match="does not fit"):
        collate([0, 1])          # 8 real nodes leave no node for the padding graph
    with pytest.raises(ValueError, match="does not fit"):
        collate([0, 1, 2])


def test_incompatible_graphs_raise() -> None:
    good = Graph([0], [1], 2, node_data={"x": torch.zeros(2, 1)})
    bad = Graph([0], [1], 2)
    with pytest.raises(Exception, match="keys"):
        PackCollator([good, bad], (5, 3, 3))
