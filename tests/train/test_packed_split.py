"""Packed splits: one shape, every graph once per epoch, seeded order, exact graphs."""

from __future__ import annotations

import pytest
import torch

from gnnforge.graph import Graph
from gnnforge.train import PackedSplit, split_indices


def graphs(count: int) -> list[Graph]:
    generator = torch.Generator().manual_seed(3)
    out = []
    for i in range(count):
        n = int(torch.randint(1, 12, (1,), generator=generator))
        e = int(torch.randint(0, 20, (1,), generator=generator))
        src = torch.randint(0, n, (e,), generator=generator)
        dst = torch.randint(0, n, (e,), generator=generator)
        out.append(Graph(src, dst, n, node_data={"x": torch.randn(n, 2, generator=generator)},
                         graph_data={"y": torch.tensor([float(i)])}))
    return out


@pytest.mark.parametrize("batch_graphs", [1, 4, 16])
def test_every_graph_once_in_fixed_shapes(batch_graphs):
    data = graphs(60)
    indices = list(range(5, 60))
    split = PackedSplit(data, indices, batch_graphs, seed=1)
    plans = []
    for epoch in range(2):
        plan = [p.tolist() for p in split.plan(epoch)]
        assert sorted(p for pack in plan for p in pack) == list(range(len(indices)))
        for number in range(len(split)):
            batch = split.batch(number)
            assert (batch.num_nodes, batch.num_edges, batch.num_graphs) == split.shape
            assert batch.unbatch() == [data[indices[p]] for p in plan[number]]
        plans.append(plan)
    assert plans[0] != plans[1]                       # reshuffled per epoch
    again = PackedSplit(data, indices, batch_graphs, seed=1)
    assert [p.tolist() for p in again.plan(1)] == plans[1]
    nodes, edges = split.padding_fraction()
    assert 0 <= nodes < 1 and 0 <= edges < 1


def test_split_is_a_seeded_partition():
    split = split_indices(101, seed=4)
    assert sorted(split["train"] + split["val"] + split["test"]) == list(range(101))
    assert split == split_indices(101, seed=4) and split != split_indices(101, seed=5)


def test_given_limits_are_kept_and_raised_to_the_largest_graph():
    data = graphs(60)
    train = PackedSplit(data, list(range(40)), 4, seed=1)
    val = PackedSplit(data, list(range(40, 60)), 4, seed=1, shuffle=False, limits=train.limits)
    assert val.shape == train.shape                   # one compiled step serves both
    small = PackedSplit(data, list(range(40, 60)), 4, limits=(1, 0))
    largest = max(data[i].num_nodes for i in range(40, 60)), \
        max(data[i].num_edges for i in range(40, 60))
    assert small.limits == (max(largest[0], 1), max(largest[1], 1))
