"""DataLoader: every graph once per epoch in batches of batch_size, equal to
GraphBatch.from_graphs; PackSampler works as torch's and PyG's batch_sampler with
fixed shapes; default pack limits follow the data."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnforge.data import random_molecule_like
from gnnforge.graph import Graph, GraphBatch
from gnnforge.loader import DataLoader, PackSampler, PackedLoader, collate_graphs
from gnnforge.packing import default_limits


def _dataset(count: int, seed: int = 0) -> list[Graph]:
    graphs = random_molecule_like(count, mean_atoms=8, max_atoms=20, seed=seed)
    return [g.with_graph_data(tag=torch.tensor(i)) for i, g in enumerate(graphs)]


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (7, False), (7, True), (64, False)])
def test_batches_cover_the_dataset_in_order(batch_size, drop_last):
    graphs = _dataset(30)
    batches = list(DataLoader(graphs, batch_size=batch_size, drop_last=drop_last))
    expected = [graphs[i:i + batch_size] for i in range(0, len(graphs), batch_size)]
    if drop_last:
        expected = [chunk for chunk in expected if len(chunk) == batch_size]
    assert len(batches) == len(expected)
    for batch, chunk in zip(batches, expected, strict=True):
        assert isinstance(batch, GraphBatch)
        assert batch.unbatch() == chunk
        assert batch == GraphBatch.from_graphs(chunk)


def test_shuffle_is_seeded_and_complete():
    graphs = _dataset(40)

    def tags(seed):
        loader = DataLoader(graphs, batch_size=8, shuffle=True,
                            generator=torch.Generator().manual_seed(seed))
        return [int(g.graph_data["tag"]) for b in loader for g in b.unbatch()]

    assert tags(3) == tags(3) and tags(3) != tags(4)
    assert sorted(tags(3)) == list(range(40))


def test_bad_items_and_arguments_are_named():
    with pytest.raises(TypeError, match="item 1 of the batch is a str"):
        collate_graphs([_dataset(1)[0], "graph"])
    with pytest.raises(TypeError, match="collate_fn is fixed"):
        DataLoader(_dataset(2), collate_fn=list)


def test_pack_sampler_with_torch_dataloader_gives_fixed_shapes():
    graphs = _dataset(120, seed=1)
    sampler = PackSampler(graphs, max_graphs_per_pack=16, seed=2)
    loader = torch.utils.data.DataLoader(graphs, batch_sampler=sampler,
                                         collate_fn=sampler.collate)
    for epoch in range(2):
        seen, shapes = [], set()
        for batch in loader:
            shapes.add((batch.num_nodes, batch.num_edges, batch.num_graphs))
            seen.extend(batch.unbatch())
        assert shapes == {(sampler.num_nodes, sampler.num_edges, sampler.num_graphs)}
        assert sorted(int(g.graph_data["tag"]) for g in seen) == list(range(120))
        for graph in seen:
            assert graph == graphs[int(graph.graph_data["tag"])]
    # The fast collator of PackedLoader builds the same batches for the same packs.
    packed = PackedLoader(graphs, max_graphs_per_pack=16, seed=2)
    for indices in packed.epoch_packs(0)[:3]:
        assert packed.collate(indices) == sampler.collate([graphs[i] for i in indices])


def test_gnnforge_dataloader_takes_the_pack_sampler():
    graphs = _dataset(50, seed=4)
    sampler = PackSampler(graphs, max_graphs_per_pack=8)
    batches = list(DataLoader(graphs, batch_sampler=sampler))
    assert len(batches) == len(sampler)
    assert sum(b.num_graphs for b in batches) == 50


def test_pack_sampler_with_pyg_dataloader():
    pyg_loader = pytest.importorskip("torch_geometric.loader")
    graphs = _dataset(60, seed=5)
    data = [g.to_pyg() for g in graphs]
    sampler = PackSampler(data, max_graphs_per_pack=10, seed=0)
    total = 0
    for batch, indices in zip(pyg_loader.DataLoader(data, batch_sampler=sampler),
                              sampler.epoch_packs(0), strict=True):
        assert batch.num_graphs == len(indices) <= 10
        assert batch.num_nodes <= sampler.limits[0] and batch.num_edges <= sampler.limits[1]
        total += batch.num_graphs
    assert total == 60


def test_default_limits_follow_the_data_not_the_largest_graph():
    graphs = _dataset(150, seed=6)
    sizes = np.array([(g.num_nodes, g.num_edges) for g in graphs])
    loader = PackedLoader(graphs, max_graphs_per_pack=32)
    # About 150 / 32 packs, not one or two graphs per pack.
    assert len(loader) <= 2 * int(np.ceil(150 / 32))
    assert (loader.sampler.limits >= sizes.max(axis=0)).all()
    at_largest = PackedLoader(graphs, limits=sizes.max(axis=0), max_graphs_per_pack=32)
    assert len(at_largest) > 3 * len(loader)
    limits = default_limits(sizes, 32)
    assert np.array_equal(limits, loader.sampler.limits)
    assert (limits <= np.ceil(1.25 * 32 * sizes.mean(axis=0))).all()
    # A dataset of one graph still gets limits that fit it.
    assert (default_limits(sizes[:1], 32) >= sizes[0]).all()
    with pytest.raises(ValueError, match="graphs_per_pack must be >= 1"):
        default_limits(sizes, 0)


def test_sampler_rejects_what_it_cannot_size():
    with pytest.raises(TypeError, match=r"graphs\[1\] is a str"):
        PackSampler([_dataset(1)[0], "x"])
    with pytest.raises(ValueError, match="empty"):
        PackSampler([])
