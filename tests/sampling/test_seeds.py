import pytest
import torch

from gnnforge.graph import Graph
from gnnforge.sampling import EdgeSeeds, NodeSeeds


def test_node_seeds_cover_each_node_once_per_epoch():
    seeds = NodeSeeds(torch.arange(10, 33), batch_size=5, seed=1)
    batches = list(seeds)
    assert len(batches) == len(seeds) == 5 and batches[-1].numel() == 3
    assert sorted(torch.cat(batches).tolist()) == list(range(10, 33))
    assert torch.equal(torch.cat(list(seeds)), torch.cat(batches))  # seeded
    seeds.set_epoch(1)
    assert not torch.equal(torch.cat(list(seeds)), torch.cat(batches))
    assert len(NodeSeeds(torch.arange(23), 5, drop_last=True)) == 4
    with pytest.raises(ValueError, match="batch_size"):
        NodeSeeds(torch.arange(3), 0)


def test_edge_seeds_positive_negative_and_indices():
    graph = Graph([0, 1, 2, 3, 4, 4], [1, 2, 3, 4, 0, 4], 6)
    batches = list(EdgeSeeds(graph, batch_size=4, seed=0))
    assert [b.pos_src.numel() for b in batches] == [4, 2]
    all_ids = torch.cat([b.edge_ids for b in batches])
    assert sorted(all_ids.tolist()) == list(range(6))
    for b in batches:
        assert torch.equal(graph.src[b.edge_ids], b.pos_src)
        assert torch.equal(graph.dst[b.edge_ids], b.pos_dst)
        assert torch.equal(b.neg_src, b.pos_src)
        assert torch.equal(b.seeds[b.pos_index[0]], b.pos_src)
        assert torch.equal(b.seeds[b.pos_index[1]], b.pos_dst)
        assert torch.equal(b.seeds[b.neg_index[1]], b.neg_dst)
        assert torch.unique(b.seeds).numel() == b.seeds.numel()
    with pytest.raises(ValueError, match="no nodes"):
        EdgeSeeds(Graph([], [], 0), 2)
