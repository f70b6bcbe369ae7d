"""LargestConnectedComponents keeps the largest components' induced subgraph, as PyG's
transform does, and counts what it drops."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.graph import Graph
from gnnforge.transforms import LargestConnectedComponents


def _weak_components(graph: Graph) -> list[set[int]]:
    """Reference: union-find over the edges, direction ignored."""
    parent = list(range(graph.num_nodes))

    def find(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for u, v in zip(graph.src.tolist(), graph.dst.tolist()):
        parent[find(u)] = find(v)
    groups: dict[int, set[int]] = {}
    for node in range(graph.num_nodes):
        groups.setdefault(find(node), set()).add(node)
    return list(groups.values())


@settings(max_examples=40, deadline=None)
@given(nodes=st.integers(0, 30), edges=st.integers(0, 40), keep=st.integers(1, 3),
       seed=st.integers(0, 2**16))
def test_keeps_the_largest_weak_components(nodes, edges, keep, seed):
    generator = torch.Generator().manual_seed(seed)
    edges = edges if nodes else 0
    src = torch.randint(0, max(nodes, 1), (edges,), generator=generator)
    dst = torch.randint(0, max(nodes, 1), (edges,), generator=generator)
    x = torch.randn(nodes, 2, generator=generator)
    graph = Graph(src, dst, nodes, node_data={"x": x}, edge_data={"w": torch.arange(edges)})
    transform = LargestConnectedComponents(keep)
    out = transform(graph)
    components = sorted(_weak_components(graph), key=lambda c: (-len(c), min(c)))
    expected = sorted(set().union(*components[:keep])) if components else []
    assert out.num_nodes == len(expected)
    torch.testing.assert_close(out.node_data["x"], x[expected])      # node order kept
    kept = torch.isin(graph.src, torch.tensor(expected, dtype=torch.int64))
    assert out.num_edges == int(kept.sum())                          # components: both ends
    assert torch.equal(out.edge_data["w"], torch.arange(edges)[kept])
    assert transform.dropped_nodes == nodes - len(expected)
    assert transform.dropped_edges == edges - out.num_edges


def test_equals_pyg_and_strong_connection():
    pyg_transforms = pytest.importorskip("torch_geometric.transforms")
    # components {0,1,2} (a directed path), {3,4,5,6} (a directed cycle), {7}, {8,9}
    src = torch.tensor([0, 1, 3, 4, 5, 6, 8])
    dst = torch.tensor([1, 2, 4, 5, 6, 3, 9])
    graph = Graph(src, dst, 10, node_data={"x": torch.arange(10.0)[:, None]})
    for keep in (1, 2):
        ours = LargestConnectedComponents(keep)(graph)
        theirs = pyg_transforms.LargestConnectedComponents(keep)(graph.to_pyg())
        assert torch.equal(ours.node_data["x"], theirs.x)
        assert torch.equal(torch.stack([ours.src, ours.dst]), theirs.edge_index)
    strong = LargestConnectedComponents(connection="strong")(graph)
    assert strong.node_data["x"].flatten().tolist() == [3.0, 4.0, 5.0, 6.0]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="num_components must be >= 1"):
        LargestConnectedComponents(0)
    with pytest.raises(ValueError, match="connection must be one of"):
        LargestConnectedComponents(connection="both")
    assert "weak" in repr(LargestConnectedComponents())
    assert np.array_equal(LargestConnectedComponents()(Graph([], [], 0)).src.numpy(), [])
