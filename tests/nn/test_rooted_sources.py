"""RootedTableSources: each destination's in-edges, then its own row, as table rows; and
SAGEConv's first layer on `IndexedRows` computing one product over [aggr | root] rows."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge import ops
from gnnforge.graph import BipartiteGraph, Graph
from gnnforge.nn import IndexedRows, SAGEConv
from gnnforge.nn._rooted_sources import RootedTableSources
from gnnforge.sampling import NeighborSampler


def _block(num_nodes: int, num_edges: int, seeds: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(0, max(num_nodes, 1), (num_edges if num_nodes else 0,),
                        generator=generator)
    dst = torch.randint(0, max(num_nodes, 1), (num_edges if num_nodes else 0,),
                        generator=generator)
    graph = Graph(src, dst, num_nodes=num_nodes)
    batch = torch.randperm(num_nodes, generator=generator)[:seeds]
    return NeighborSampler([3]).sample(graph, batch, generator=generator)[0]


@settings(max_examples=50, deadline=None)
@given(num_nodes=st.integers(0, 40), num_edges=st.integers(0, 200), seeds=st.integers(0, 12),
       seed=st.integers(0, 2**16), dtype=st.sampled_from([torch.int32, torch.int64]))
def test_rows_interleave_each_destinations_in_edges_and_its_own_row(
        num_nodes, num_edges, seeds, seed, dtype):
    block = _block(num_nodes, num_edges, seeds, seed)
    table_rows = 3 * max(num_nodes, 1)
    index = torch.randperm(table_rows, generator=torch.Generator().manual_seed(seed))
    index = index[:block.num_src_nodes]
    sources = RootedTableSources(block, index, table_rows)
    rowptr, col, order = sources.csr(dtype)
    block_rowptr, block_col, _ = block.csr(torch.int64)
    assert rowptr.dtype == col.dtype == order.dtype == dtype
    assert sources.num_dst_nodes == 2 * block.num_dst_nodes
    assert sources.num_edges == block.num_edges + block.num_dst_nodes == col.numel()
    for v in range(block.num_dst_nodes):
        edges = col[rowptr[2 * v]:rowptr[2 * v + 1]]
        assert torch.equal(edges.long(), index[block_col[block_rowptr[v]:block_rowptr[v + 1]]])
        assert col[rowptr[2 * v + 1]:rowptr[2 * v + 2]].tolist() == [int(index[v])]
    assert int(rowptr[-1]) == col.numel()
    src, dst = sources.coo()
    assert torch.equal(src, col.long())
    assert torch.equal(dst, torch.arange(sources.num_dst_nodes).repeat_interleave(
        rowptr.long().diff()))
    colptr, rows, _ = sources.csc(torch.int64)
    assert colptr.numel() == table_rows + 1 and rows.numel() == sources.num_edges


def test_an_index_of_another_length_or_fewer_sources_than_destinations_is_named():
    graph = Graph(torch.tensor([0]), torch.tensor([0]), num_nodes=2)
    with pytest.raises(ValueError, match="index has 1 rows but the graph has 2"):
        RootedTableSources(graph, torch.tensor([0]), 5)
    bipartite = BipartiteGraph([0, 0], [0, 2], num_src_nodes=1, num_dst_nodes=3)
    with pytest.raises(ValueError, match="3 destinations but only 1 sources"):
        RootedTableSources(bipartite, torch.tensor([4]), 5)


@pytest.mark.parametrize("aggr", ["mean", "sum"])
def test_the_first_layer_is_one_product_over_joined_rows(aggr, monkeypatch):
    # Two products of inner size F (W_l and W_r) were one GEMM each; now one of 2F.
    block = _block(50, 300, 10, seed=2)
    table = torch.randn(50, 6, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    conv = SAGEConv(6, 4, aggr=aggr)
    products = []
    product = ops.dense_product_plus
    monkeypatch.setattr(ops, "dense_product_plus", lambda start, a, b, more=():
                        products.append((tuple(a.shape), len(more))) or
                        product(start, a, b, more))
    out = conv(block, IndexedRows(table, block.src_nodes))
    assert products == [((block.num_dst_nodes, 12), 0)]
    monkeypatch.setattr(ops, "dense_product_plus", product)
    torch.testing.assert_close(out, conv(block, table[block.src_nodes]), rtol=1e-5, atol=1e-5)
