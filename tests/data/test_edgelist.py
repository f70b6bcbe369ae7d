import gzip

import numpy as np
import pytest
import torch

from gnnforge.data import CleanOptions, DataFormatError, read_edge_list


def _write(tmp_path, name, text, compress=False):
    path = tmp_path / name
    data = text.encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


@pytest.mark.parametrize("compress", [False, True])
def test_snap_comments_and_declared_nodes(tmp_path, compress):
    path = _write(
        tmp_path,
        "g.txt.gz" if compress else "g.txt",
        "# Directed graph\r\n# Nodes: 6 Edges: 3\r\n# FromNodeId\tToNodeId\r\n"
        "0\t1\r\n1\t2\r\n4\t4\r\n",
        compress,
    )
    graph, meta = read_edge_list(path)
    assert graph.num_nodes == 6  # declared, larger than max id + 1
    assert graph.src.tolist() == [0, 1, 4] and graph.dst.tolist() == [1, 2, 4]
    assert meta["declared_nodes"] == 6


def test_size_header_and_csv_header(tmp_path):
    graph, meta = read_edge_list(_write(tmp_path, "e.txt", "5 2\n0 1\n3 4\n"))
    assert graph.num_nodes == 5 and graph.num_edges == 2 and meta["header"] == "5 2"
    graph, meta = read_edge_list(_write(tmp_path, "e.csv", "id_1,id_2\n0,1\n2,0\n"))
    assert graph.num_edges == 2 and meta["header"] == "id_1,id_2"
    # a first row "N M" is only a header when exactly M rows follow
    graph, _ = read_edge_list(_write(tmp_path, "f.txt", "5 9\n0 1\n3 4\n"))
    assert graph.num_edges == 3 and graph.num_nodes == 10


def test_weights_and_relabel(tmp_path):
    graph, meta = read_edge_list(_write(tmp_path, "w.txt", "10 20 0.5\n20 30 2\n"), relabel=True)
    assert graph.num_nodes == 3 and meta["weighted"]
    assert graph.node_data["original_id"].tolist() == [10, 20, 30]
    assert graph.src.tolist() == [0, 1] and graph.dst.tolist() == [1, 2]
    torch.testing.assert_close(graph.edge_data["weight"], torch.tensor([0.5, 2.0]))


def test_cleaning_counts(tmp_path):
    path = _write(tmp_path, "c.txt", "0 1\n1 0\n0 1\n2 2\n1 2\n")
    graph, meta = read_edge_list(
        path, clean=CleanOptions(symmetrize=True, dedup=True, self_loops="remove")
    )
    assert meta["drops"] == {
        "edges_in": 5,
        "self_loops_removed": 1,
        "reverse_edges_added": 4,
        "duplicates_removed": 4,
        "edges_out": 4,
    }
    assert sorted(zip(graph.src.tolist(), graph.dst.tolist())) == [(0, 1), (1, 0), (1, 2), (2, 1)]


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("0 1\n1 x\n", 2, "expected integers"),
        ("# c\n0 1\n2 3 4 5\n", 3, "expected 2 values"),
        ("0 1\n-1 2\n", 2, "negative node id"),
    ],
)
def test_malformed_names_file_and_line(tmp_path, text, line, message):
    path = _write(tmp_path, "bad.txt", text)
    with pytest.raises(DataFormatError, match=rf"bad\.txt:{line}: .*{message}"):
        read_edge_list(path)


def test_declared_too_small(tmp_path):
    with pytest.raises(DataFormatError, match="declares 2 nodes but uses id 5"):
        read_edge_list(_write(tmp_path, "d.txt", "# Nodes: 2\n0 5\n"))


@pytest.mark.parametrize("header", ["# Nodes: 9223372036854775808\n",
                                    "9223372036854775808 1\n"])
def test_a_declared_node_count_beyond_int64_is_refused(tmp_path, header):
    with pytest.raises(DataFormatError, match="declares 9223372036854775808 nodes, more "
                                              "than an int64"):
        read_edge_list(_write(tmp_path, "huge.txt", header + "0 1\n"))


def test_slashdot_known_answer(datasets_dir):
    path = datasets_dir / "snap_soc_slashdot0902" / "soc-Slashdot0902.txt.gz"
    graph, meta = read_edge_list(path)
    assert (graph.num_nodes, graph.num_edges, graph.num_self_loops()) == (82168, 948464, 78303)
    undirected, meta = read_edge_list(path, clean=CleanOptions(True, True, "remove"))
    assert undirected.num_edges == 2 * 504230
    assert meta["drops"]["self_loops_removed"] == 78303


def test_enron_size_header(datasets_dir):
    graph, meta = read_edge_list(datasets_dir / "snap_email_enron" / "email-Enron.txt.gz")
    assert (graph.num_nodes, graph.num_edges) == (36692, 367662)
    assert meta["header"] == "36692 367662"
    src, dst = graph.src.numpy(), graph.dst.numpy()
    assert np.array_equal(np.sort(src * 36692 + dst), np.sort(dst * 36692 + src))  # reciprocal


def test_non_finite_weight(tmp_path):
    with pytest.raises(DataFormatError, match=r"w\.txt:3: non-finite weight"):
        read_edge_list(_write(tmp_path, "w.txt", "0 1 1.5\n\n1 2 nan\n"))


def test_blank_and_comment_lines_anywhere(tmp_path):
    graph, _ = read_edge_list(_write(tmp_path, "b.txt", "\n# a\n\n0 1\n  # mid\n1 2\n\n"))
    assert graph.src.tolist() == [0, 1] and graph.dst.tolist() == [1, 2]


def test_a_bad_first_row_is_not_mistaken_for_a_header(tmp_path):
    with pytest.raises(DataFormatError, match=r"h\.txt:1: expected integers"):
        read_edge_list(_write(tmp_path, "h.txt", "1 x\n2 3\n"))
