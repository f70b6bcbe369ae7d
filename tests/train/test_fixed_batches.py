"""Fixed-shape batches: one shape, every graph once per epoch, seeded order, exact graphs."""

from __future__ import annotations

import pytest
import torch

from gnnforge.graph import Graph
from gnnforge.train import FixedShapeBatches, split_indices


def graphs(count: int) -> list[Graph]:
    generator = torch.Generator().manual_seed(3)
    out = []
    for i in range(count):
        n = int(torch.randint(0, 12, (1,), generator=generator))
        e = int(torch.randint(0, 20, (1,), generator=generator)) if n else 0
        src = torch.randint(0, max(n, 1), (e,), generator=generator)
        dst = torch.randint(0, max(n, 1), (e,), generator=generator)
        out.append(Graph(src, dst, n, node_data={"x": torch.randn(n, 2, generator=generator)},
                         graph_data={"y": torch.tensor([float(i)])}))
    return out


@pytest.mark.parametrize("batch_graphs", [1, 4, 16])
def test_every_graph_once_in_fixed_shapes(batch_graphs):
    data = graphs(60)
    indices = list(range(5, 60))
    loader = FixedShapeBatches(data, indices, batch_graphs, seed=1)
    seen = []
    for epoch in range(2):
        plan = loader.plan(epoch)
        positions = sorted(p for batch in plan for p in batch)
        assert positions == list(range(len(indices)))
        for number in range(len(loader)):
            batch = loader.batch(number)
            assert (batch.num_nodes, batch.num_edges, batch.num_graphs) == \
                (loader.max_nodes, loader.max_edges, loader.max_graphs)
            real = batch.unbatch()
            assert real == [data[indices[p]] for p in plan[number]]
        seen.append(plan)
    assert seen[0] != seen[1]                       # reshuffled per epoch
    assert FixedShapeBatches(data, indices, batch_graphs, seed=1).plan(1) == seen[1]
    nodes, edges = loader.padding_fraction()
    assert 0 <= nodes < 1 and 0 <= edges < 1


def test_split_is_a_seeded_partition():
    split = split_indices(101, seed=4)
    assert sorted(split["train"] + split["val"] + split["test"]) == list(range(101))
    assert split == split_indices(101, seed=4) and split != split_indices(101, seed=5)
