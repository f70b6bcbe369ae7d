import gzip
import json

import numpy as np
import pytest
import scipy.io
import scipy.sparse

from gnnforge.data import DataFormatError, read_graph_json, read_mat_graph, read_musae


def _gz(path, text):
    path.write_bytes(gzip.compress(text.encode()))
    return path


def test_musae_small(tmp_path):
    edges = _gz(tmp_path / "toy_edges.csv.gz", "id_1,id_2\n0,1\n1,2\n3,3\n")
    target = _gz(
        tmp_path / "toy_target.csv.gz",
        'id,name,page_type\n0,"a, b",tvshow\n1,c,company\n2,d,tvshow\n3,e,company\n',
    )
    features = _gz(tmp_path / "toy.json.gz", json.dumps({"0": [2, 0], "1": [], "3": [1]}))
    graph, meta = read_musae(edges, target, features)
    assert graph.num_nodes == 4 and graph.num_edges == 3
    assert meta["classes"] == ["company", "tvshow"]
    assert graph.node_data["y"].tolist() == [1, 0, 1, 0]
    assert graph.node_data["feature_ids"].tolist() == [[2, 0], [-1, -1], [-1, -1], [1, -1]]
    assert meta["nodes_without_features"] == 2
    dense, _ = read_musae(edges, target, features, features="dense")
    np.testing.assert_array_equal(
        dense.node_data["x"].numpy(), [[1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 1, 0]]
    )


def test_musae_target_must_cover_ids(tmp_path):
    edges = _gz(tmp_path / "t_edges.csv.gz", "id_1,id_2\n0,1\n")
    target = _gz(tmp_path / "t_target.csv.gz", "id,ml_target\n0,1\n0,0\n")
    with pytest.raises(DataFormatError, match="each id 0..1 exactly once"):
        read_musae(edges, target)
    bad = _gz(tmp_path / "b_target.csv.gz", "id,ml_target\n0,1\nx,0\n")
    with pytest.raises(DataFormatError, match=r"b_target\.csv\.gz:3: id 'x'"):
        read_musae(edges, bad)


def test_graph_json_small(tmp_path):
    graphs = _gz(tmp_path / "graphs.json.gz", json.dumps({"1": [[0, 2]], "0": [[0, 1], [1, 2]]}))
    target = tmp_path / "target.csv"
    target.write_text("id,target\n0,1\n1,0\n")
    result, meta = read_graph_json(graphs, target, progress=False)
    assert [g.num_nodes for g in result] == [3, 3] and [g.num_edges for g in result] == [2, 1]
    assert [int(g.graph_data["y"]) for g in result] == [1, 0]
    broken = _gz(tmp_path / "broken.json.gz", json.dumps({"0": [[0, 1, 2]]}))
    with pytest.raises(DataFormatError, match="graph 0: edges must be"):
        read_graph_json(broken)


def test_mat_small(tmp_path):
    matrix = scipy.sparse.csc_matrix(np.array([[0, 1.0], [1.0, 0]]))
    problem = {"A": matrix, "name": "toy", "aux": {"coord": np.array([[1.0, 2.0], [3.0, 4.0]])}}
    scipy.io.savemat(tmp_path / "toy.mat", {"Problem": problem})
    graph, meta = read_mat_graph(tmp_path / "toy.mat")
    assert graph.num_edges == 2 and graph.node_data["pos"].tolist() == [[1, 2], [3, 4]]
    scipy.io.savemat(tmp_path / "other.mat", {"B": np.eye(2)})
    with pytest.raises(DataFormatError, match="no 'Problem' struct"):
        read_mat_graph(tmp_path / "other.mat")


def test_real_musae(datasets_dir):
    folder = datasets_dir / "musae_facebook"
    graph, meta = read_musae(
        folder / "facebook_edges.csv.gz",
        folder / "facebook_target.csv.gz",
        folder / "facebook.json.gz",
    )
    assert (graph.num_nodes, graph.num_edges, graph.num_self_loops()) == (22470, 171002, 179)
    assert meta["num_classes"] == 4 and meta["feature_dim"] == 4714
    assert abs(meta["feature_nnz"] / 22470 - 14.0) < 0.05
    folder = datasets_dir / "musae_github"
    graph, meta = read_musae(folder / "git_edges.csv.gz", folder / "git_target.csv.gz")
    assert (graph.num_nodes, graph.num_edges) == (37700, 289003)
    assert int((graph.in_degrees() + graph.out_degrees()).max()) == 9458


def test_real_reddit10k(datasets_dir):
    graphs, meta = read_graph_json(
        datasets_dir / "reddit10k" / "graphs.json.gz",
        datasets_dir / "reddit10k" / "target.csv",
        progress=False,
    )
    assert len(graphs) == 10000 and sum(g.num_edges for g in graphs) == 247549
    assert max(g.num_nodes for g in graphs) == 97 and meta["num_classes"] == 2


def test_real_usroads(datasets_dir):
    graph, meta = read_mat_graph(datasets_dir / "suitesparse_usroads48" / "usroads-48.mat")
    assert (graph.num_nodes, graph.num_edges, graph.num_self_loops()) == (126146, 323900, 0)
    assert int(graph.in_degrees().max()) == 7 and meta["name"] == "Gleich/usroads-48"
    assert float(graph.node_data["pos"][:, 0].min()) == pytest.approx(-124.71, abs=0.01)


def test_musae_features_none_still_reports_width(tmp_path):
    edges = _gz(tmp_path / "n_edges.csv.gz", "id_1,id_2\n0,1\n")
    features = _gz(tmp_path / "n.json.gz", json.dumps({"0": [5], "1": [0, 1]}))
    graph, meta = read_musae(edges, None, features, features="none")
    assert graph.node_data == {} and meta["feature_dim"] == 6 and meta["feature_nnz"] == 3
