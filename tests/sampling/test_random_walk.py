import pytest
import torch

from gnnforge.graph import Graph
from gnnforge.sampling import RandomWalkSampler

from .sampling_helpers import check_blocks, random_multigraph


def test_path_known_answer():
    # 3 -> 2 -> 1 -> 0: every walk (and every restart) from 0 first visits 1; 2 and 3 lie
    # further, so 1 is the most visited with at least one visit per walk.
    graph = Graph([3, 2, 1], [2, 1, 0], 4)
    sampler = RandomWalkSampler(1, num_neighbors=2, walk_length=3, num_walks=50, restart_prob=0.3)
    (block,) = sampler.sample(graph, torch.tensor([0]), torch.Generator().manual_seed(0))
    picked = block.src_nodes[block.col].tolist()
    assert picked[0] == 1 and block.edge_weight[0] >= 50
    assert set(picked) <= {1, 2} and block.edge_weight[0] >= block.edge_weight[-1]
    assert bool((block.edge_ids == -1).all())


def test_neighbours_within_walk_length_and_top_k():
    graph = random_multigraph(3)
    seeds = torch.arange(0, 30, 3)
    sampler = RandomWalkSampler(2, num_neighbors=4, walk_length=2, num_walks=10)
    blocks = sampler.sample(graph, seeds, torch.Generator().manual_seed(1))
    check_blocks(graph, seeds, blocks, parent_edges=False)
    adjacency = torch.zeros(graph.num_nodes, graph.num_nodes, dtype=torch.bool)
    adjacency[graph.dst, graph.src] = True  # walks follow in-edges
    two_hop = adjacency | ((adjacency.float() @ adjacency.float()) > 0)
    block = blocks[-1]
    src, dst = block.coo()
    assert bool(two_hop[block.dst_nodes[dst], block.src_nodes[src]].all())
    counts = block.rowptr[1:] - block.rowptr[:-1]
    assert bool((counts <= 4).all())
    for i in range(block.num_dst_nodes):
        w = block.edge_weight[block.rowptr[i]:block.rowptr[i + 1]]
        assert bool((w[:-1] >= w[1:]).all())


def test_arguments_checked():
    with pytest.raises(ValueError, match="restart_prob"):
        RandomWalkSampler(1, restart_prob=1.0)
    with pytest.raises(ValueError, match="num_walks"):
        RandomWalkSampler(1, num_walks=0)
