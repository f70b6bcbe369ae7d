import numpy as np
import pytest
import torch
from scipy import stats

from gnnforge.graph import Graph
from gnnforge.sampling import DependentKeys, NeighborSampler

from .sampling_helpers import check_blocks, random_multigraph, star_in


def test_star_uniform_without_replacement():
    leaves, fanout, trials = 30, 5, 2000
    graph = star_in(leaves)
    generator = torch.Generator().manual_seed(0)
    counts = np.zeros(leaves + 1)
    sampler = NeighborSampler([fanout])
    for _ in range(trials):
        (block,) = sampler.sample(graph, torch.tensor([0]), generator)
        picked = block.src_nodes[block.col]
        assert picked.numel() == fanout and torch.unique(picked).numel() == fanout
        counts[picked.numpy()] += 1
    assert counts[0] == 0
    _, p_value = stats.chisquare(counts[1:])  # every leaf equally often
    assert p_value > 1e-3


@pytest.mark.parametrize("dependent", [False, True])
def test_takes_min_fanout_degree_distinct_edges(dependent):
    graph = random_multigraph(1)
    seeds = torch.arange(graph.num_nodes)
    degree = graph.in_degrees()
    key = DependentKeys(4, seed=3)[2] if dependent else None
    generator = None if dependent else torch.Generator().manual_seed(1)
    blocks = NeighborSampler([3, 4]).sample(graph, seeds, generator, key=key)
    check_blocks(graph, seeds, blocks)
    last = blocks[-1]
    per_dst = last.rowptr[1:] - last.rowptr[:-1]
    assert torch.equal(per_dst, torch.clamp(degree, max=4))
    for i in range(last.num_dst_nodes):
        ids = last.edge_ids[last.rowptr[i]:last.rowptr[i + 1]]
        assert torch.unique(ids).numel() == ids.numel()


def test_dependent_star_uniform():
    graph = star_in(20)
    counts = np.zeros(21)
    for step in range(1500):
        # the ranked-variates path at a mix strictly inside (0, 1); one independent
        # sequence per draw, because batches inside a group are (on purpose) correlated
        key = DependentKeys(3, seed=step)[1]
        (block,) = NeighborSampler([4]).sample(graph, torch.tensor([0]), key=key)
        counts[block.src_nodes[block.col].numpy()] += 1
    assert stats.chisquare(counts[1:]).pvalue > 1e-3


def test_with_replacement_draws_fanout_edges():
    graph = random_multigraph(2)
    seeds = torch.arange(graph.num_nodes)
    generator = torch.Generator().manual_seed(0)
    blocks = NeighborSampler([6], replace=True).sample(graph, seeds, generator)
    check_blocks(graph, seeds, blocks)
    per_dst = blocks[0].rowptr[1:] - blocks[0].rowptr[:-1]
    assert torch.equal(per_dst, torch.where(graph.in_degrees() > 0, 6, 0))


def test_full_fanout_is_whole_neighbourhood():
    graph = random_multigraph(3)
    seeds = torch.tensor([0, 4, 39])
    (block,) = NeighborSampler([-1]).sample(graph, seeds)
    expected = sorted(int(e) for e in torch.nonzero(torch.isin(graph.dst, seeds)).flatten())
    assert sorted(block.edge_ids.tolist()) == expected


def test_same_key_same_blocks_and_empty_cases():
    graph = random_multigraph(4)
    key = DependentKeys(1, seed=9)[0]
    a = NeighborSampler([2, 2]).sample(graph, torch.tensor([1, 2]), key=key)
    b = NeighborSampler([2, 2]).sample(graph, torch.tensor([1, 2]), key=key)
    assert all(torch.equal(x.edge_ids, y.edge_ids) for x, y in zip(a, b))
    empty = Graph([], [], 3)
    blocks = NeighborSampler([5, 5]).sample(empty, torch.tensor([0, 2]))
    assert [blk.num_edges for blk in blocks] == [0, 0]
    no_seeds = torch.zeros(0, dtype=torch.int64)
    assert NeighborSampler([5]).sample(empty, no_seeds)[0].num_dst_nodes == 0


def test_bad_input_is_named():
    graph = random_multigraph(5)
    with pytest.raises(ValueError, match="fanouts\\[1\\]"):
        NeighborSampler([2, 0])
    with pytest.raises(ValueError, match="out of range"):
        NeighborSampler([2]).sample(graph, torch.tensor([0, 400]))
    with pytest.raises(ValueError, match="repeated"):
        NeighborSampler([2]).sample(graph, torch.tensor([1, 1]))
    with pytest.raises(ValueError, match="either generator= or key="):
        NeighborSampler([2]).sample(graph, torch.tensor([1]), torch.Generator(),
                                    key=DependentKeys(1)[0])
