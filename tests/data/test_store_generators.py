import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.data import (
    cache_key,
    cached_graphs,
    cached_meta,
    grid_2d,
    load_graphs,
    random_molecule_like,
    rmat,
    save_graphs,
    stochastic_block_model,
    uniform_random,
)

from .strategies import small_graphs


@settings(max_examples=30, deadline=None)
@given(graphs=st.lists(small_graphs(max_nodes=6, with_data=True), max_size=5))
def test_store_round_trip(tmp_path_factory, graphs):
    path = tmp_path_factory.mktemp("store") / "g.npz"
    save_graphs(path, graphs, {"note": "x", "n": [1, 2]})
    loaded, meta = load_graphs(path)
    assert meta == {"note": "x", "n": [1, 2]}
    assert len(loaded) == len(graphs) and all(a == b for a, b in zip(loaded, graphs))


def test_cached_graphs_builds_once_and_keys_on_options_and_files(tmp_path):
    source = tmp_path / "src.txt"
    source.write_text("a")
    calls = []

    def build():
        calls.append(1)
        return [grid_2d(2, 2)], {"built": len(calls)}

    first, meta = cached_graphs("toy", [source], {"k": 1}, build)
    again, meta_again = cached_graphs("toy", [source], {"k": 1}, build)
    assert len(calls) == 1 and first[0] == again[0] and meta_again == {"built": 1}
    assert cached_meta("toy", [source], {"k": 1}) == {"built": 1}
    assert cached_meta("toy", [source], {"k": 2}) is None
    key = cache_key([source], {"k": 1})
    source.write_text("changed content")
    os.utime(source, ns=(1, 1))
    assert cache_key([source], {"k": 1}) != key


@settings(max_examples=20, deadline=None)
@given(scale=st.integers(1, 7), fraction=st.floats(0.0, 0.5), seed=st.integers(0, 2**31))
def test_rmat_properties(scale, fraction, seed):
    n = 1 << scale
    edges = int(fraction * n * (n - 1))
    graph = rmat(scale, edges, seed=seed)
    assert graph.num_nodes == n and graph.num_edges == edges and graph.num_self_loops() == 0
    key = graph.dst * n + graph.src
    assert bool((key[1:] > key[:-1]).all())  # sorted by (dst, src) and unique
    assert rmat(scale, edges, seed=seed) == graph


@settings(max_examples=20, deadline=None)
@given(
    rows=st.integers(1, 8), cols=st.integers(1, 8), shuffle=st.booleans(), seed=st.integers(0, 99)
)
def test_grid_properties(rows, cols, shuffle, seed):
    graph = grid_2d(rows, cols, shuffle=shuffle, seed=seed)
    assert graph.num_edges == 2 * (rows * (cols - 1) + cols * (rows - 1))
    pairs = set(zip(graph.src.tolist(), graph.dst.tolist()))
    assert pairs == {(v, u) for u, v in pairs} and len(pairs) == graph.num_edges
    assert int(graph.in_degrees().max()) <= 4


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 50), m=st.integers(0, 200), seed=st.integers(0, 99))
def test_uniform_properties(n, m, seed):
    graph = uniform_random(n, m, seed=seed)
    assert graph.num_nodes == n and graph.num_edges == m
    assert uniform_random(n, m, seed=seed) == graph


@settings(max_examples=20, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 12), min_size=1, max_size=4),
    p_in=st.floats(0, 1),
    p_out=st.floats(0, 1),
    seed=st.integers(0, 99),
)
def test_sbm_properties(sizes, p_in, p_out, seed):
    graph = stochastic_block_model(sizes, p_in, p_out, seed=seed)
    pairs = list(zip(graph.src.tolist(), graph.dst.tolist()))
    assert graph.num_nodes == sum(sizes) and graph.num_self_loops() == 0
    assert len(set(pairs)) == len(pairs) and set(pairs) == {(v, u) for u, v in pairs}
    if p_in == 1 and p_out == 1:
        total = sum(sizes)
        assert len(pairs) == total * (total - 1)


@settings(max_examples=10, deadline=None)
@given(count=st.integers(0, 20), max_atoms=st.integers(1, 30), seed=st.integers(0, 99))
def test_molecule_like_properties(count, max_atoms, seed):
    graphs = random_molecule_like(count, mean_atoms=10, max_atoms=max_atoms, seed=seed)
    assert len(graphs) == count
    for graph in graphs:
        assert 1 <= graph.num_nodes <= max_atoms and graph.num_self_loops() == 0
        pairs = set(zip(graph.src.tolist(), graph.dst.tolist()))
        assert pairs == {(v, u) for u, v in pairs}
        assert graph.num_edges >= 2 * (graph.num_nodes - 1)  # a spanning tree, both directions
        assert graph.edge_data["edge_attr"].shape == (graph.num_edges, 1)


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.integers(-(2**40), 2**40), max_size=200))
def test_sorted_unique_equals_numpy_unique(values):
    from gnnforge.data._arrays import sorted_unique

    array = np.asarray(values, dtype=np.int64)
    assert np.array_equal(sorted_unique(array), np.unique(array))
