"""PackedLoader: fixed shapes, every graph exactly once per epoch, seeded reshuffles."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.data import random_molecule_like
from gnnforge.graph import Graph
from gnnforge.packing import PackedLoader


def _dataset(num_graphs, seed):
    graphs = random_molecule_like(num_graphs, mean_atoms=8, max_atoms=20, seed=seed)
    # Tag every graph so the round trip can be checked by identity, plus odd cases:
    # an isolated-node graph, a self-loop with a duplicate edge.
    extra = [Graph([], [], 3, node_data={"x": torch.zeros(3, 1, dtype=torch.int64)},
                   edge_data={"edge_attr": torch.zeros(0, 1, dtype=torch.int64)}),
             Graph([0, 0, 1], [0, 1, 0], 2, node_data={"x": torch.ones(2, 1, dtype=torch.int64)},
                   edge_data={"edge_attr": torch.ones(3, 1, dtype=torch.int64)})]
    graphs = graphs + extra
    return [g.with_graph_data(tag=torch.tensor(i)) for i, g in enumerate(graphs)]


@settings(max_examples=12, deadline=None)
@given(num_graphs=st.integers(1, 60), seed=st.integers(0, 10**6),
       cap=st.one_of(st.none(), st.integers(1, 8)), method=st.sampled_from(["lpfhp", "spfhp"]),
       refine=st.sampled_from([0.0, 1.0]))
def test_epoch_round_trip_and_fixed_shapes(num_graphs, seed, cap, method, refine):
    graphs = _dataset(num_graphs, seed)
    loader = PackedLoader(graphs, max_graphs_per_pack=cap, method=method, seed=seed,
                          refine=refine)
    assert (loader.plan.lp is not None) == bool(refine)
    for _ in range(2):  # two epochs, different shuffles
        shapes, seen = set(), []
        for batch in loader:
            shapes.add((batch.num_nodes, batch.num_edges, batch.num_graphs,
                        tuple(batch.node_data["x"].shape),
                        tuple(batch.edge_data["edge_attr"].shape)))
            assert not bool(batch.graph_mask[-1])  # the padding slot is there
            assert bool((batch.node_mask == batch.graph_mask[batch.node_graph]).all())
            real_nodes = int(batch.graph_ptr[batch.num_real_graphs])
            padding_edges = ~batch.edge_mask
            assert bool((batch.src[padding_edges] >= real_nodes).all())  # point at padding
            assert bool((batch.dst[padding_edges] >= real_nodes).all())
            seen.extend(batch.unbatch())
        assert len(shapes) == 1
        assert len(seen) == len(graphs)
        by_tag = {int(g.graph_data["tag"]): g for g in seen}
        assert sorted(by_tag) == list(range(len(graphs)))
        for tag, graph in by_tag.items():
            assert graph == graphs[tag]


def test_epochs_reshuffle_and_are_seeded():
    graphs = _dataset(200, 0)
    a = PackedLoader(graphs, max_graphs_per_pack=8, seed=5)
    b = PackedLoader(graphs, max_graphs_per_pack=8, seed=5)
    first = [p.tolist() for p in a.epoch_packs(0)]
    assert first == [p.tolist() for p in b.epoch_packs(0)]
    assert first != [p.tolist() for p in a.epoch_packs(1)]
    # Same pack shapes every epoch: only which graph fills a place changes.
    sizes = np.array([(g.num_nodes, g.num_edges) for g in graphs])
    shape = lambda packs: sorted(sorted(map(tuple, sizes[p])) for p in packs)
    assert shape(a.epoch_packs(0)) == shape(a.epoch_packs(3))


def test_no_shuffle_is_stable():
    graphs = _dataset(50, 1)
    loader = PackedLoader(graphs, shuffle=False)
    first, second = loader.epoch_packs(0), loader.epoch_packs(1)
    assert [p.tolist() for p in first] == [p.tolist() for p in second]


def test_oversized_graph_error_names_it():
    graphs = _dataset(20, 2)
    big = max(range(len(graphs)), key=lambda i: graphs[i].num_nodes)
    limit = graphs[big].num_nodes - 1
    with pytest.raises(ValueError, match=rf"graphs\[{big}\] has {graphs[big].num_nodes} nodes"):
        PackedLoader(graphs, limits=(limit, 1000))


def test_oversized_drop_is_counted():
    graphs = _dataset(30, 3)
    limit = sorted(g.num_nodes for g in graphs)[-3]
    too_big = [i for i, g in enumerate(graphs) if g.num_nodes > limit]
    loader = PackedLoader(graphs, limits=(limit, 1000), oversized="drop")
    assert loader.dropped.tolist() == too_big
    assert loader.plan.num_dropped == len(too_big)
    seen = [int(g.graph_data["tag"]) for batch in loader for g in batch.unbatch()]
    assert sorted(seen) == sorted(set(range(len(graphs))) - set(too_big))


def test_bad_method_and_empty():
    with pytest.raises(ValueError, match="empty"):
        PackedLoader([])
    with pytest.raises(ValueError, match="overflow"):
        PackedLoader(_dataset(5, 0), method="nodes_only")
