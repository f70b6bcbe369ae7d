import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.data import CleanOptions, clean_graph, collection_stats, graph_stats

from .strategies import small_graphs


def _clean_ref(edges, options):
    """Plain-Python specification of CleanOptions on a list of (src, dst, w)."""
    if options.self_loops == "remove":
        edges = [e for e in edges if e[0] != e[1]]
    if options.symmetrize:
        edges = edges + [(d, s, w) for s, d, w in edges]
    if options.dedup:
        seen, kept = set(), []
        for edge in edges:
            if edge[:2] not in seen:
                seen.add(edge[:2])
                kept.append(edge)
        edges = kept
    return edges


@settings(max_examples=60, deadline=None)
@given(
    graph=small_graphs(with_data=True),
    symmetrize=st.booleans(),
    dedup=st.booleans(),
    loops=st.sampled_from(["keep", "remove"]),
)
def test_clean_matches_reference(graph, symmetrize, dedup, loops):
    options = CleanOptions(symmetrize, dedup, loops)
    edges = list(zip(graph.src.tolist(), graph.dst.tolist(), graph.edge_data["w"].tolist()))
    expected = _clean_ref(edges, options)
    cleaned, report = clean_graph(graph, options)
    got = list(zip(cleaned.src.tolist(), cleaned.dst.tolist(), cleaned.edge_data["w"].tolist()))
    assert sorted(got) == sorted(expected)
    assert (
        report["edges_out"]
        == len(expected)
        == (
            report["edges_in"]
            - report["self_loops_removed"]
            + report["reverse_edges_added"]
            - report["duplicates_removed"]
        )
    )
    assert cleaned.num_nodes == graph.num_nodes


def test_clean_options_validate():
    with pytest.raises(ValueError, match="self_loops must be one of"):
        CleanOptions(self_loops="drop")
    with pytest.raises(TypeError, match="symmetrize must be a bool"):
        CleanOptions(symmetrize="yes")


def _summary_ref(values):
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return None
    std = values.std()
    skew = ((values - values.mean()) ** 3).mean() / std**3 if std > 0 else 0.0
    return values.min(), values.mean(), np.median(values), values.max(), std, skew


@settings(max_examples=60, deadline=None)
@given(graph=small_graphs())
def test_graph_stats_match_networkx(graph):
    stats = graph_stats(graph)
    multi = nx.MultiDiGraph()
    multi.add_nodes_from(range(graph.num_nodes))
    edges = list(zip(graph.src.tolist(), graph.dst.tolist()))
    multi.add_edges_from(edges)
    simple = nx.DiGraph(multi)
    assert stats["num_edges"] == multi.number_of_edges()
    assert stats["self_loops"] == nx.number_of_selfloops(multi)
    assert stats["duplicate_edges"] == multi.number_of_edges() - simple.number_of_edges()
    assert stats["isolated_nodes"] == sum(1 for v in multi if multi.degree(v) == 0)
    undirected = nx.Graph(simple)
    undirected.remove_edges_from(nx.selfloop_edges(undirected))
    assert stats["undirected_edges"] == undirected.number_of_edges()
    assert stats["bandwidth"] == max((abs(u - v) for u, v in edges), default=0)
    non_loop = [(u, v) for u, v in edges if u != v]
    expected_rec = (
        (sum(simple.has_edge(v, u) for u, v in non_loop) / len(non_loop)) if non_loop else 0.0
    )
    assert stats["reciprocity"] == pytest.approx(expected_rec)
    reference = _summary_ref([multi.in_degree(v) for v in range(graph.num_nodes)])
    if reference is not None:
        got = stats["in_degree"]
        assert [got[k] for k in ("min", "mean", "median", "max", "std", "skew")] == pytest.approx(
            reference
        )


@settings(max_examples=30, deadline=None)
@given(graphs=st.lists(small_graphs(max_nodes=6, max_edges=10), min_size=1, max_size=6))
def test_collection_stats(graphs):
    stats = collection_stats(graphs)
    assert stats["num_graphs"] == len(graphs)
    assert stats["num_nodes"] == sum(g.num_nodes for g in graphs)
    assert stats["nodes_per_graph"]["max"] == max(g.num_nodes for g in graphs)
    assert stats["edges_per_graph"]["mean"] == pytest.approx(np.mean([g.num_edges for g in graphs]))
    assert stats["bandwidth"] == max(graph_stats(g)["bandwidth"] for g in graphs)
    assert stats["self_loops"] == sum(g.num_self_loops() for g in graphs)


def test_known_answer_cit_hepth_stats(datasets_dir):
    from gnnforge.data import CleanOptions, read_ligra

    graph, _ = read_ligra(datasets_dir / "snap_cit_hepth_ligra" / "cit-HepTh.txt.gz")
    stats = graph_stats(graph)
    assert stats["undirected_edges"] == 352285 and stats["self_loops"] == 39
    undirected, _ = clean_graph(graph, CleanOptions(True, True, "remove"))
    degree = graph_stats(undirected)["in_degree"]
    assert degree["max"] == 2468 and degree["median"] == 14
    assert degree["mean"] == pytest.approx(25.37, abs=0.01)


@settings(max_examples=50, deadline=None)
@given(values=st.lists(st.integers(0, 5000), max_size=100))
def test_log2_histogram(values):
    from gnnforge.data._stats import log2_histogram

    histogram = log2_histogram(np.asarray(values))
    assert sum(histogram["counts"]) == len(values)
    for label, count in zip(histogram["bins"], histogram["counts"]):
        low, _, high = label.partition("-")
        high = high or low
        assert count == sum(int(low) <= v <= int(high) for v in values)
