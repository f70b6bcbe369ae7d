import gzip

import numpy as np
import pytest
import torch

from gnnforge.data import (
    DataFormatError,
    read_ligra,
    read_matrix_market,
    read_matrix_market_array,
    read_mtx_with_coordinates,
)


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    return path


def test_symmetric_pattern_mirrors_off_diagonal(tmp_path):
    path = _write(
        tmp_path,
        "s.mtx.gz",
        "%%MatrixMarket matrix coordinate pattern symmetric\n% comment\n3 3 3\n2 1\n3 3\n3 2\n",
    )
    graph, meta = read_matrix_market(path)
    assert sorted(zip(graph.src.tolist(), graph.dst.tolist())) == [
        (0, 1),
        (1, 0),
        (1, 2),
        (2, 1),
        (2, 2),
    ]
    assert meta["mirrored_entries"] == 2 and meta["values"] == "none (pattern)"


def test_general_real_weights_and_skew(tmp_path):
    path = _write(
        tmp_path, "g.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 2 0.5\n2 1 3\n"
    )
    graph, meta = read_matrix_market(path, weights=True)
    assert graph.src.tolist() == [0, 1] and graph.dst.tolist() == [1, 0]
    torch.testing.assert_close(graph.edge_data["weight"], torch.tensor([0.5, 3.0]))
    path = _write(
        tmp_path, "k.mtx", "%%MatrixMarket matrix coordinate integer skew-symmetric\n2 2 1\n2 1 4\n"
    )
    graph, _ = read_matrix_market(path, weights=True)
    assert graph.edge_data["weight"].tolist() == [4.0, -4.0]


def test_array_is_column_major(tmp_path):
    path = _write(
        tmp_path,
        "c.mtx",
        "%%MatrixMarket matrix array real general\n% x\n3 2\n1\n2\n3\n10\n20\n30\n",
    )
    np.testing.assert_array_equal(read_matrix_market_array(path), [[1, 10], [2, 20], [3, 30]])


@pytest.mark.parametrize(
    "text, pattern",
    [
        ("%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n", "field 'complex'"),
        ("hello\n", r"bad\.mtx:1: not a MatrixMarket file"),
        ("%%MatrixMarket matrix coordinate pattern general\n2 3 1\n1 1\n", "square"),
        (
            "%%MatrixMarket matrix coordinate pattern general\n2 2 2\n1 1\n",
            "declares 2 entries but 1",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n2 2 2\n1 1\n2 3\n",
            r"bad\.mtx:4: index \(2, 3\)",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n2 2 2\n1 1\n2 y\n",
            r"bad\.mtx:4: expected integers",
        ),
    ],
)
def test_malformed_mtx(tmp_path, text, pattern):
    with pytest.raises(DataFormatError, match=pattern):
        read_matrix_market(_write(tmp_path, "bad.mtx", text))


def test_ligra_small_and_weighted(tmp_path):
    graph, meta = read_ligra(_write(tmp_path, "g.adj", "AdjacencyGraph\n3\n3\n0\n2\n2\n1\n2\n0\n"))
    assert graph.src.tolist() == [0, 0, 2] and graph.dst.tolist() == [1, 2, 0]
    assert graph.num_nodes == 3 and meta["unused_ids"] == 0
    graph, _ = read_ligra(_write(tmp_path, "w.adj", "WeightedAdjacencyGraph\n2\n1\n0\n1\n1\n7\n"))
    assert graph.edge_data["weight"].tolist() == [7.0]


@pytest.mark.parametrize(
    "text, pattern",
    [
        ("EdgeArray\n1 2\n", "not a Ligra file"),
        ("AdjacencyGraph\n2\n2\n0\n1\n1\n", "2 numbers|6 numbers"),
        ("AdjacencyGraph\n2\n2\n0\n3\n1\n1\n", "offsets"),
        ("AdjacencyGraph\n2\n2\n0\n1\n1\n5\n", "target #1 = 5"),
        ("AdjacencyGraph\n2\n2\n0\n1\n1\nq\n", r"bad\.adj:7: expected a number"),
    ],
)
def test_malformed_ligra(tmp_path, text, pattern):
    with pytest.raises(DataFormatError, match=pattern):
        read_ligra(_write(tmp_path, "bad.adj", text))


def test_luxembourg_known_answer(datasets_dir):
    folder = datasets_dir / "suitesparse_luxembourg_osm"
    graph, meta = read_mtx_with_coordinates(
        folder / "luxembourg_osm.mtx.gz", folder / "luxembourg_osm_coord.mtx.gz"
    )
    assert graph.num_nodes == 114599 and graph.num_edges == 2 * 119666
    assert graph.num_self_loops() == 0 and int(graph.in_degrees().max()) == 6
    pos = graph.node_data["pos"]
    assert pos[:, 0].min() == 574024 and pos[:, 1].max() == 5118043
    assert meta["symmetry"] == "symmetric"


@pytest.mark.parametrize(
    "folder, name, nodes, edges, loops",
    [
        ("snap_soc_epinions1_ligra", "soc-Epinions1.mtx.gz", 75888, 508837, 0),
        ("snap_cit_hepth_ligra", "cit-HepTh.txt.gz", 27770, 352807, 39),
    ],
)
def test_ligra_known_answers(datasets_dir, folder, name, nodes, edges, loops):
    graph, meta = read_ligra(datasets_dir / folder / name)
    assert (graph.num_nodes, graph.num_edges, graph.num_self_loops()) == (nodes, edges, loops)
    if nodes == 75888:
        assert meta["unused_ids"] == 9


def test_coordinates_must_match_nodes(tmp_path):
    graph = _write(
        tmp_path, "g.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 2\n"
    )
    coord = _write(tmp_path, "g_coord.mtx", "%%MatrixMarket matrix array real general\n2 1\n1\n2\n")
    with pytest.raises(DataFormatError, match=r"g_coord\.mtx: 2 coordinate rows for 3 nodes"):
        read_mtx_with_coordinates(graph, coord)
    short = _write(tmp_path, "s_coord.mtx", "%%MatrixMarket matrix array real general\n3 1\n1\n2\n")
    with pytest.raises(DataFormatError, match="declares 3 x 1 = 3 values but 2 follow"):
        read_matrix_market_array(short)
