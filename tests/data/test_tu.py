import zipfile

import pytest
import torch

from gnnforge.data import CleanOptions, DataFormatError, read_tu_zip


def _tu_zip(path, files, prefix="TOY//TOY_"):
    with zipfile.ZipFile(path, "w") as archive:
        for part, text in files.items():
            archive.writestr(f"{prefix}{part}.txt", text)
        archive.writestr("TOY//README.txt", "toy")
    return path


_GOOD = {
    "A": "1, 2\n2, 1\n2, 3\n3, 2\n4, 5\n5, 4\n5, 4\n",
    "graph_indicator": "1\n1\n1\n2\n2\n",
    "graph_labels": "-1\n1\n",
    "node_labels": "0\n1\n0\n2\n2\n",
    "edge_labels": "0\n0\n1\n1\n2\n2\n2\n",
    "node_attributes": "0.5, 1\n1, 1\n2, 1\n3, 1\n4, 1\n",
}


def test_toy_zip(tmp_path):
    graphs, meta = read_tu_zip(_tu_zip(tmp_path / "TOY.zip", _GOOD), progress=False)
    assert [g.num_nodes for g in graphs] == [3, 2] and [g.num_edges for g in graphs] == [4, 3]
    assert graphs[1].src.tolist() == [0, 1, 1] and graphs[1].dst.tolist() == [1, 0, 0]
    assert [int(g.graph_data["y"]) for g in graphs] == [0, 1] and meta["label_values"] == [-1, 1]
    assert graphs[0].node_data["node_label"].tolist() == [0, 1, 0]
    torch.testing.assert_close(graphs[0].node_data["x"][0], torch.tensor([0.5, 1.0]))
    assert graphs[1].edge_data["edge_label"].tolist() == [2, 2, 2]


def test_dedup_counts_and_keeps_graphs_apart(tmp_path):
    graphs, meta = read_tu_zip(
        _tu_zip(tmp_path / "TOY.zip", _GOOD), clean=CleanOptions(dedup=True), progress=False
    )
    assert meta["drops"]["duplicates_removed"] == 1 and graphs[1].num_edges == 2


@pytest.mark.parametrize(
    "change, pattern",
    [
        ({"A": "1, 2\n2, 4\n"}, r"TOY_A\.txt\]:2: edge \[2, 4\] joins graphs 1 and 2"),
        ({"A": "1, 2\n2, 9\n"}, r"TOY_A\.txt\]:2: node id \[2, 9\] outside 1\.\.5"),
        ({"A": "1, 2\n2; 3\n"}, r"TOY_A\.txt\]:2: expected integers"),
        ({"graph_indicator": "1\n1\n2\n1\n2\n"}, r"graph_indicator\.txt\]:4: graph ids must"),
        ({"graph_labels": "1\n"}, "1 graph labels for 2 graphs"),
        ({"node_labels": "0\n1\n"}, r"node_labels\.txt\]: 2 rows, expected 5"),
    ],
)
def test_malformed_members(tmp_path, change, pattern):
    with pytest.raises(DataFormatError, match=pattern):
        read_tu_zip(_tu_zip(tmp_path / "TOY.zip", {**_GOOD, **change}), progress=False)


def test_missing_member_and_not_tu(tmp_path):
    files = {k: v for k, v in _GOOD.items() if k != "graph_labels"}
    with pytest.raises(DataFormatError, match="missing member TOY_graph_labels.txt"):
        read_tu_zip(_tu_zip(tmp_path / "TOY.zip", files))
    with pytest.raises(DataFormatError, match="not a TU Dortmund"):
        read_tu_zip(_tu_zip(tmp_path / "other.zip", {"B": "1\n"}))


@pytest.mark.parametrize(
    "name, graphs, nodes, lines, max_nodes, classes",
    [
        ("PROTEINS", 1113, 43471, 162088, 620, 2),
        ("NCI1", 4110, 122747, 265506, 111, 2),
        ("ENZYMES", 600, 19580, 74564, 126, 6),
        ("MUTAG", 188, 3371, 7442, 28, 2),
        ("IMDB-BINARY", 1000, 19773, 386124, 136, 2),
        ("Mutagenicity", 4337, 131488, 266894, 417, 2),
    ],
)
def test_real_tu(datasets_dir, name, graphs, nodes, lines, max_nodes, classes):
    result, meta = read_tu_zip(datasets_dir / "tu_datasets" / f"{name}.zip", progress=False)
    assert len(result) == graphs and meta["num_classes"] == classes
    assert sum(g.num_nodes for g in result) == nodes
    assert sum(g.num_edges for g in result) == lines
    assert max(g.num_nodes for g in result) == max_nodes
