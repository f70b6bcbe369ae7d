"""Every sampler returns valid chained blocks on arbitrary multigraphs."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.graph import Graph
from gnnforge.sampling import DependentKeys, LaborSampler, NeighborSampler, RandomWalkSampler

from .sampling_helpers import check_blocks

SAMPLERS = [NeighborSampler([2, 3]), NeighborSampler([2, -1], replace=False),
            NeighborSampler([3, 1], replace=True), LaborSampler([2, 2]),
            LaborSampler([2, 2], importance_sampling=True), RandomWalkSampler(2, 3, 2, 4)]


@st.composite
def graphs_and_seeds(draw):
    num_nodes = draw(st.integers(1, 12))
    edges = draw(st.lists(st.tuples(st.integers(0, num_nodes - 1),
                                    st.integers(0, num_nodes - 1)), max_size=40))
    graph = Graph([e[0] for e in edges], [e[1] for e in edges], num_nodes)
    seeds = draw(st.lists(st.integers(0, num_nodes - 1), unique=True, max_size=num_nodes))
    return graph, torch.tensor(seeds, dtype=torch.int64)


@settings(max_examples=40, deadline=None)
@given(data=graphs_and_seeds(), which=st.integers(0, len(SAMPLERS) - 1),
       dependent=st.booleans())
def test_blocks_valid_on_any_multigraph(data, which, dependent):
    graph, seeds = data
    sampler = SAMPLERS[which]
    key = DependentKeys(8, seed=1)[3] if dependent else None
    generator = None if dependent else torch.Generator().manual_seed(0)
    blocks = sampler.sample(graph, seeds, generator, key=key)
    assert len(blocks) == 2
    check_blocks(graph, seeds, blocks, parent_edges=not isinstance(sampler, RandomWalkSampler))
    for block in blocks:  # no block invents an in-neighbour
        src, dst = block.coo()
        if not isinstance(sampler, RandomWalkSampler):
            has_edge = torch.zeros(graph.num_nodes, graph.num_nodes, dtype=torch.bool)
            has_edge[graph.src, graph.dst] = True
            assert bool(has_edge[block.src_nodes[src], block.dst_nodes[dst]].all())
