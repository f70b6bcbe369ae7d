"""Bad calls on the graph types raise clear errors; huge ids never overflow a sort key.

From the hardening audit: unchecked `BipartiteGraph` ids (a huge one crashed the native
kernel, a negative one returned zeros), sort keys `dst * num_src + src` and
`src * num_nodes + dst` that wrap around int64 (csr() and coalesce() then disagree or drop
edges), and arguments accepted without a check (`add_self_loops(edge_type=-5)`,
non-string graph_data keys, float pad sizes).
"""

from __future__ import annotations

import pytest
import torch

from gnnforge import Graph, GraphBatch, GraphError
from gnnforge.graph import BipartiteGraph

# ----------------------------------------------------------------------------- item 6


@pytest.mark.parametrize("src, dst, num_src, num_dst, message", [
    ([0, 5], [0, 1], 5, 2, r"src\[1\] = 5 is out of range: ids must lie in \[0, 5\) "
                           r"for num_src_nodes=5"),
    ([0, 1], [0, -1], 5, 2, r"dst\[1\] = -1 is out of range"),
    ([0, 2**40], [0, 1], 5, 2, r"src\[1\] = 1099511627776 is out of range"),
    ([0.0, 1.0], [0, 1], 5, 2, "src: expected an integer tensor"),
    ([0, 1, 2], [0, 1], 5, 2, "src and dst must have equal length"),
    ([0], [0], -1, 2, r"num_src_nodes must lie in \[0, 2\*\*63\)"),
    ([0], [0], 5, 2.5, "num_dst_nodes must be an int"),
])
def test_bipartite_graph_validates_like_graph(src, dst, num_src, num_dst, message):
    with pytest.raises(GraphError, match=message):
        BipartiteGraph(torch.tensor(src), torch.tensor(dst), num_src, num_dst)


def test_bipartite_csr_agrees_with_its_edges_when_the_sort_key_would_overflow():
    """num_src = 2**62: dst * num_src + src wraps around int64 for dst >= 2."""
    src = torch.tensor([5, 7, 2**62 - 1, 0, 3])
    dst = torch.tensor([3, 1, 2, 3, 0])
    graph = BipartiteGraph(src, dst, 2**62, 4)
    rowptr, col, edge_ids = graph.csr()
    assert rowptr.tolist() == [0, 1, 2, 3, 5]
    for row in range(4):
        ids = edge_ids[rowptr[row]:rowptr[row + 1]]
        assert (dst[ids] == row).all() and torch.equal(col[rowptr[row]:rowptr[row + 1]],
                                                       src[ids])
    assert col.tolist() == [3, 7, 2**62 - 1, 0, 5]  # sources ascending within each row
    mirrored = BipartiteGraph(dst, src, 4, 2**62)  # CSC sorts by src * num_dst + dst
    colptr, row, csc_ids = mirrored.csc()
    assert colptr.tolist() == [0, 1, 2, 3, 5] and row.tolist() == [3, 7, 2**62 - 1, 0, 5]
    assert torch.equal(row, src[csc_ids])


# ----------------------------------------------------------------------------- item 10


def test_coalesce_keeps_distinct_edges_whose_key_would_wrap():
    """num_nodes = 2**32 + 1: src * num_nodes + dst wraps, and (2**32, 5) aliased (1, 4)."""
    big = 2**32
    graph = Graph(torch.tensor([1, big, 1, big]), torch.tensor([4, 5, 4, 3]), big + 1)
    kept = graph.coalesce()
    assert list(zip(kept.src.tolist(), kept.dst.tolist())) == [(1, 4), (big, 5), (big, 3)]
    undirected = Graph(torch.tensor([1, big]), torch.tensor([4, 5]), big + 1).to_undirected()
    assert undirected.num_edges == 4


def test_coalesce_with_edge_types_whose_key_would_wrap():
    """num_nodes = 2**31 + 1, 4 types: (2**31, 1, type 0) aliased (1, 0, type 0)."""
    big = 2**31
    graph = Graph(torch.tensor([1, big, big]), torch.tensor([0, 1, 1]), big + 1,
                  edge_type=torch.tensor([0, 0, 3]))
    assert graph.coalesce().num_edges == 3
    assert Graph([0, 0, 1], [1, 1, 1], 2, edge_type=[2, 2, 2]).coalesce().num_edges == 2


# ----------------------------------------------------------------------------- item 14


def test_add_self_loops_checks_its_edge_type():
    typed = Graph([0, 1], [1, 0], 2, edge_type=[0, 1])
    with pytest.raises(ValueError, match="edge_type must be an int >= 0, got -5"):
        typed.add_self_loops(edge_type=-5)
    with pytest.raises(ValueError, match="edge_type must be an int >= 0, got 1.5"):
        typed.add_self_loops(edge_type=1.5)
    with pytest.raises(ValueError, match="has no edge types"):
        Graph([0], [1], 2).add_self_loops(edge_type=2)
    assert typed.add_self_loops(edge_type=2).edge_type.tolist() == [0, 1, 2, 2]


def test_graph_data_keys_must_be_strings():
    with pytest.raises(GraphError, match=r"graph_data: keys must be strings, got 1"):
        Graph([0], [1], 2, graph_data={1: torch.zeros(1)})
    with pytest.raises(GraphError, match="graph_data: expected a dict"):
        Graph([0], [1], 2, graph_data=[torch.zeros(1)])


@pytest.mark.parametrize("sizes, message", [
    ((10.0, 5, 3), "num_nodes must be an int, got 10.0"),
    ((10, 5.5, 3), "num_edges must be an int, got 5.5"),
    ((10, 5, True), "num_graphs must be an int, got True"),
])
def test_pad_sizes_must_be_integers(sizes, message):
    batch = GraphBatch.from_graphs([Graph([0], [1], 2)])
    with pytest.raises(TypeError, match=f"pad: {message}"):
        batch.pad(*sizes)
    assert batch.pad(10, 5, 3).num_nodes == 10
