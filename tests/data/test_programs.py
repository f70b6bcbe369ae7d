"""Program graphs: known-answer edges on small files, failures reported, cache, sizes."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from gnnforge.data import PROGRAM_EDGE_TYPES, program_graph_sizes, program_graphs

SIMPLE = """
def f(a, b):
    x = a + b
    y = x * a
    return y
"""

LOOP = """
def g(n):
    s = 0
    for i in range(n):
        s = s + i
    return s
"""

BRANCH = """
class C:
    def m(self, c):
        if c:
            v = 1
        else:
            v = 2
        return v

    def inner(self):
        def h(q):
            return q
        return h
"""


def _corpus(tmp_path, monkeypatch, **files):
    monkeypatch.setenv("GNNFORGE_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "src"
    root.mkdir()
    for name, text in files.items():
        (root / f"{name}.py").write_bytes(text if isinstance(text, bytes) else
                                          textwrap.dedent(text).encode())
    return root


def _named_edges(corpus, graph, kind):
    """{(src label, src token_pos, dst label, dst token_pos)} of one edge type."""
    label = graph.node_data["label"].tolist()
    pos = graph.node_data["token_pos"].tolist()
    kind_id = PROGRAM_EDGE_TYPES.index(kind)
    return {(corpus.vocab[label[s]], pos[s], corpus.vocab[label[d]], pos[d])
            for s, d, t in zip(graph.src.tolist(), graph.dst.tolist(), graph.edge_type.tolist())
            if t == kind_id}


def test_simple_function_known_edges(tmp_path, monkeypatch):
    corpus = program_graphs(_corpus(tmp_path, monkeypatch, simple=SIMPLE), min_count=1,
                            progress=False)
    assert corpus.failures == [] and len(corpus.graphs) == 1
    graph = corpus.graphs[0]
    order = graph.node_data["token_pos"]
    tokens = [corpus.vocab[int(graph.node_data["label"][i])]
              for i in sorted(np.nonzero(order.numpy() >= 0)[0], key=lambda i: int(order[i]))]
    assert tokens == ["f", "a", "b", "x", "a", "b", "y", "x", "a", "y"]
    next_token = _named_edges(corpus, graph, "NextToken")
    assert len(next_token) == 9 and ("f", 0, "a", 1) in next_token
    # tokens: f0 a1 b2 | x3 = a4 + b5 | y6 = x7 * a8 | return y9
    assert _named_edges(corpus, graph, "LastWrite") == {
        ("a", 4, "a", 1), ("b", 5, "b", 2), ("x", 7, "x", 3), ("a", 8, "a", 1), ("y", 9, "y", 6)}
    assert _named_edges(corpus, graph, "LastRead") == {("a", 8, "a", 4)}
    assert _named_edges(corpus, graph, "ComputedFrom") == {
        ("x", 3, "a", 4), ("x", 3, "b", 5), ("y", 6, "x", 7), ("y", 6, "a", 8)}
    returns = _named_edges(corpus, graph, "ReturnsTo")
    assert returns == {("Return", -1, "FunctionDef", -1)}
    child = _named_edges(corpus, graph, "Child")
    assert ("FunctionDef", -1, "f", 0) in child and ("BinOp:Add", -1, "a", 4) in child
    kinds = graph.node_data["var_kind"][graph.node_data["token_pos"] >= 0].tolist()
    assert kinds == [0, 2, 2, 2, 1, 1, 2, 1, 1, 1]  # f is not a variable
    var_id = graph.node_data["var_id"]
    assert len(set(var_id[var_id >= 0].tolist())) == 4  # a, b, x, y
    assert set(graph.node_data["scope"][var_id >= 0].tolist()) == {0}


def test_loop_carried_and_merged_flow(tmp_path, monkeypatch):
    corpus = program_graphs(_corpus(tmp_path, monkeypatch, loop=LOOP), min_count=1,
                            progress=False)
    graph = corpus.graphs[0]
    # tokens: g0 n1 | s2 0(3) | i4 range5 n6 | s7 = s8 + i9 | return s10
    writes = _named_edges(corpus, graph, "LastWrite")
    assert {("s", 8, "s", 2), ("s", 8, "s", 7)} <= writes  # first and later iterations
    assert {("s", 10, "s", 2), ("s", 10, "s", 7)} <= writes  # loop may run zero times
    assert ("i", 9, "i", 4) in writes
    assert ("i", 4, "i", 9) in _named_edges(corpus, graph, "LastRead")  # previous iteration


def test_methods_scopes_and_nested_functions(tmp_path, monkeypatch):
    corpus = program_graphs(_corpus(tmp_path, monkeypatch, branch=BRANCH), min_count=1,
                            progress=False)
    assert len(corpus.graphs) == 2  # two methods; the nested h is part of `inner`
    m, inner = corpus.graphs
    # tokens: m0 self1 c2 | if c3 | v4 = 1(5) | v6 = 2(7) | return v8: branches merge
    assert _named_edges(corpus, m, "LastWrite") == {("c", 3, "c", 2), ("v", 8, "v", 4),
                                                    ("v", 8, "v", 6)}
    scopes = inner.node_data["scope"]
    assert set(scopes[scopes >= 0].tolist()) == {0, 1}  # inner's scope and h's scope
    returns = inner.edge_type == PROGRAM_EDGE_TYPES.index("ReturnsTo")
    assert sorted(inner.dst[returns].tolist()) == sorted(  # each return to its own def
        i for i, label in enumerate(inner.node_data["label"].tolist())
        if corpus.vocab[label] == "FunctionDef")
    assert int(m.graph_data["line"]) == 3 and int(m.graph_data["file_id"]) == 0


def test_parse_failures_are_counted_not_dropped(tmp_path, monkeypatch):
    root = _corpus(tmp_path, monkeypatch, good=SIMPLE, broken="def f(:\n    pass\n",
                   badbytes=b"x = '\xff\xfe'\n", nulls=b"x = 1\x00\n")
    corpus = program_graphs(root, progress=False)
    failed = dict(corpus.failures)
    assert set(failed) == {"broken.py", "badbytes.py", "nulls.py"}
    assert "SyntaxError" in failed["broken.py"]
    assert corpus.files == ["good.py"] and len(corpus.graphs) == 1
    assert "3 failed to parse" in corpus.report()


def test_vocabulary_min_count_and_limits(tmp_path, monkeypatch):
    root = _corpus(tmp_path, monkeypatch, one=SIMPLE, two=LOOP, three=BRANCH)
    corpus = program_graphs(root, min_count=2, progress=False)
    assert corpus.vocab[:2] == ["<pad>", "<unk>"]
    labels = np.concatenate([g.node_data["label"].numpy() for g in corpus.graphs])
    assert labels.min() >= 1 and labels.max() < len(corpus.vocab)
    assert "range" not in corpus.vocab and (labels == 1).any()  # seen once -> <unk>
    assert len(program_graphs(root, max_files=1, progress=False).graphs) == 1  # one.py sorts first
    assert len(program_graphs(root, max_graphs=3, progress=False).graphs) == 3
    with pytest.raises(ValueError, match="max_files"):
        program_graphs(root, max_files=0)
    with pytest.raises(ValueError, match="not a directory"):
        program_graphs(tmp_path / "missing")


def test_cache_round_trip_and_sizes(tmp_path, monkeypatch):
    root = _corpus(tmp_path, monkeypatch, one=SIMPLE, two=LOOP, three=BRANCH)
    first = program_graphs(root, progress=False)
    again = program_graphs(root, progress=False)
    assert first.graphs == again.graphs and first.vocab == again.vocab
    assert any((tmp_path / "cache").glob("programs-*.npz"))
    sizes = program_graph_sizes(root, progress=False)
    expected = [[g.num_nodes, g.num_edges] for g in first.graphs]
    assert sizes.tolist() == expected
    assert program_graph_sizes(root, progress=False).tolist() == expected  # cached


def test_standard_library_subset_parses():
    corpus = program_graphs(max_files=4, progress=False)
    assert corpus.failures == [] and len(corpus.files) == 4 and corpus.graphs
    for graph in corpus.graphs:
        assert graph.edge_type.max() < len(PROGRAM_EDGE_TYPES)
        assert graph.node_data["label"].shape == (graph.num_nodes,)
