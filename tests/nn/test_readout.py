"""Readouts over padded packed batches equal per-graph references on the unpadded graphs."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.graph import Graph, GraphBatch
from gnnforge.nn import max_pool, mean_pool, pool, sum_pool

REFERENCE = {"sum": lambda x: x.sum(0), "mean": lambda x: x.mean(0),
             "max": lambda x: x.max(0).values}


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 6), min_size=1, max_size=6), extra_nodes=st.integers(1, 5),
       extra_graphs=st.integers(1, 3), seed=st.integers(0, 1000),
       reduce=st.sampled_from(["sum", "mean", "max"]))
def test_pool_matches_reference(sizes, extra_nodes, extra_graphs, seed, reduce):
    generator = torch.Generator().manual_seed(seed)
    graphs = [Graph([], [], n) for n in sizes]
    batch = GraphBatch.from_graphs(graphs)
    padded = batch.pad(batch.num_nodes + extra_nodes, 3, batch.num_graphs + extra_graphs)
    x = torch.randn(padded.num_nodes, 4, generator=generator, dtype=torch.float64) - 5
    out = pool(x, padded, reduce)
    assert out.shape == (padded.num_graphs, 4)
    start = 0
    for slot, n in enumerate(sizes):
        rows = x[start:start + n]
        expected = REFERENCE[reduce](rows) if n else torch.zeros(4, dtype=torch.float64)
        torch.testing.assert_close(out[slot], expected)
        start += n
    assert bool((out[len(sizes):] == 0).all())  # padding slots read as zero


def test_functional_forms_and_errors():
    x = torch.tensor([[1.0], [2.0], [7.0]])
    node_graph = torch.tensor([0, 0, 1])
    assert sum_pool(x, node_graph, 2).flatten().tolist() == [3.0, 7.0]
    assert mean_pool(x, node_graph, 2).flatten().tolist() == [1.5, 7.0]
    masked = max_pool(x, node_graph, 2, node_mask=torch.tensor([True, False, True]))
    assert masked.flatten().tolist() == [1.0, 7.0]
    batch = GraphBatch.from_graphs([Graph([], [], 2)])
    with pytest.raises(ValueError, match="reduce"):
        pool(torch.zeros(2, 1), batch, "median")
    with pytest.raises(ValueError, match="rows"):
        pool(torch.zeros(3, 1), batch)
