"""RCM order and bandwidth: valid permutations, known answers, ours vs scipy."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge import Graph
from gnnforge.banded import bandwidth, bandwidth_stats, rcm_order
from gnnforge.data import grid_2d, program_graphs


@st.composite
def graphs(draw, max_nodes=40, max_edges=120):
    n = draw(st.integers(0, max_nodes))
    e = draw(st.integers(0, max_edges)) if n else 0
    src = draw(st.lists(st.integers(0, max(n - 1, 0)), min_size=e, max_size=e))
    dst = draw(st.lists(st.integers(0, max(n - 1, 0)), min_size=e, max_size=e))
    return Graph(torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64), n)


def _shuffled(graph, seed=0):
    perm = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(seed))
    return graph.reorder_nodes(perm)


@settings(max_examples=60, deadline=None)
@given(graphs(), st.sampled_from(["gnnforge", "scipy"]))
def test_rcm_is_a_permutation(graph, method):
    """Empty graphs, isolated nodes, self-loops and multi-edges included."""
    order = rcm_order(graph, method)
    assert order.dtype == torch.int64
    assert sorted(order.tolist()) == list(range(graph.num_nodes))
    reordered = graph.reorder_nodes(order)
    assert reordered.num_edges == graph.num_edges
    assert bandwidth(reordered) == bandwidth(graph, order)


def test_bandwidth_known_answers():
    graph = Graph([0, 1, 3], [3, 2, 3], 5)
    assert bandwidth(graph) == 3
    assert bandwidth(graph, torch.tensor([0, 3, 1, 2, 4])) == 1  # 0->3 adjacent, 1->2 adjacent
    assert bandwidth(Graph([], [], 4)) == 0
    with pytest.raises(ValueError, match="not a permutation"):
        bandwidth(graph, torch.tensor([0, 0, 1, 2, 3]))
    with pytest.raises(ValueError, match="permutation of 5"):
        bandwidth(graph, torch.tensor([0, 1]))


@pytest.mark.parametrize("method", ["gnnforge", "scipy"])
def test_rcm_recovers_path_and_grid_bands(method):
    path = Graph(torch.arange(29), torch.arange(1, 30), 30).to_undirected()
    assert bandwidth(_shuffled(path)) > 1
    assert bandwidth(_shuffled(path), rcm_order(_shuffled(path), method)) == 1
    grid = _shuffled(grid_2d(8, 25), seed=1)
    assert bandwidth(grid, rcm_order(grid, method)) <= 2 * 8  # a good order is ~min(rows, cols)


def test_rcm_rejects_bad_input():
    with pytest.raises(TypeError, match="gnnforge.Graph"):
        rcm_order(torch.zeros(3))
    with pytest.raises(ValueError, match="method"):
        rcm_order(Graph([0], [1], 2), method="metis")


def test_ours_vs_scipy_on_program_graphs():
    corpus = program_graphs(max_files=6, progress=False)
    stats = bandwidth_stats(corpus.graphs, progress=False)
    ours, theirs = stats.after["gnnforge"], stats.after["scipy"]
    assert (ours <= stats.before).mean() > 0.9 and (theirs <= stats.before).mean() > 0.9
    assert ours.mean() <= 1.25 * theirs.mean()  # at least comparable on real graphs
    table = stats.table()
    assert "rcm:gnnforge" in table and "B<64" in table
    assert 0.0 <= stats.fraction_under(ours, 64) <= 1.0
