import collections
import pickle

import numpy as np
import pytest
import scipy.sparse

from gnnforge.data import CleanOptions, DataFormatError, UnsafePickleError, read_planetoid


def _write_planetoid(folder, with_allx=True, gap=False):
    """5 known nodes (2 labelled for training), 2 test nodes; `gap` leaves an id unlisted."""
    rng = np.random.default_rng(0)
    feats = scipy.sparse.csr_matrix(rng.integers(0, 2, (8, 4)).astype(np.float32))
    onehot = np.eye(3, dtype=np.int64)[rng.integers(0, 3, 8)]
    test_ids = [7, 5] if gap else [6, 5]
    parts = {
        "x": feats[:2],
        "y": onehot[:2],
        "allx": feats[:5],
        "ally": onehot[:5],
        "tx": feats[test_ids],
        "ty": onehot[test_ids],
        "graph": collections.defaultdict(list, {0: [1, 5], 1: [0], 5: [0, 5], 2: [3], 3: [2]}),
    }
    if not with_allx:
        del parts["allx"]
    for part, value in parts.items():
        (folder / f"ind.toy.{part}").write_bytes(pickle.dumps(value, protocol=4))
    (folder / "ind.toy.test.index").write_text("\n".join(map(str, test_ids)) + "\n")
    return feats, onehot, test_ids


def test_toy_planetoid_matches_the_reference_processing(tmp_path):
    feats, onehot, test_ids = _write_planetoid(tmp_path)
    graph, meta = read_planetoid(tmp_path, "toy")
    assert graph.num_nodes == 7
    expected = np.zeros((7, 4), np.float32)
    expected[:5] = feats[:5].toarray()
    expected[test_ids] = feats[test_ids].toarray()
    np.testing.assert_array_equal(graph.node_data["x"].numpy(), expected)
    assert graph.node_data["train_mask"].tolist() == [True, True] + [False] * 5
    assert graph.node_data["test_mask"].nonzero().flatten().tolist() == [5, 6]
    assert graph.node_data["val_mask"][2:5].all() and meta["split"]["val_mask"] == 5
    # graph[node] lists neighbours; each is an edge neighbour -> node, as stored
    assert sorted(zip(graph.src.tolist(), graph.dst.tolist())) == sorted(
        [(1, 0), (5, 0), (0, 1), (0, 5), (5, 5), (3, 2), (2, 3)]
    )


def test_gap_in_test_ids_is_zero_filled_and_flagged(tmp_path):
    _write_planetoid(tmp_path, gap=True)
    graph, meta = read_planetoid(tmp_path, "toy")
    assert graph.num_nodes == 8
    assert not graph.node_data["has_features"][6] and not graph.node_data["has_label"][6]
    assert float(graph.node_data["x"][6].abs().sum()) == 0.0
    assert meta["nodes_without_features"] == 1 and not graph.node_data["test_mask"][6]


def test_missing_allx_keeps_structure_and_flags_features(tmp_path):
    feats, _, _ = _write_planetoid(tmp_path, with_allx=False)
    graph, meta = read_planetoid(tmp_path, "toy")
    assert graph.node_data["has_features"].tolist() == [True, True, False, False, False, True, True]
    assert float(graph.node_data["x"][2:5].abs().sum()) == 0.0
    assert meta["nodes_without_features"] == 3 and meta["allx"].startswith("absent")


def test_missing_required_part(tmp_path):
    _write_planetoid(tmp_path)
    (tmp_path / "ind.toy.graph").unlink()
    with pytest.raises(DataFormatError, match=r"missing Planetoid parts \['graph'\]"):
        read_planetoid(tmp_path, "toy")


@pytest.mark.parametrize(
    "name, nodes, entries, loops, pyg_edges, no_features, dim",
    [
        ("cora", 2708, 10858, 0, 10556, 0, 1433),
        ("citeseer", 3327, 9464, 248, 9104, 15, 3703),
        ("pubmed", 19717, 88676, 6, 88648, 18657, 500),
    ],
)
def test_real_planetoid(datasets_dir, name, nodes, entries, loops, pyg_edges, no_features, dim):
    graph, meta = read_planetoid(datasets_dir / "planetoid", name, features="none")
    assert (graph.num_nodes, graph.num_edges, graph.num_self_loops()) == (nodes, entries, loops)
    assert meta["nodes_without_features"] == no_features and meta["feature_dim"] == dim
    assert int(graph.node_data["test_mask"].sum()) == 1000
    # PyG's Planetoid removes self-loops and duplicates
    pyg_like, _ = read_planetoid(
        datasets_dir / "planetoid",
        name,
        features="none",
        clean=CleanOptions(dedup=True, self_loops="remove"),
    )
    assert pyg_like.num_edges == pyg_edges


def test_cora_features_dense(datasets_dir):
    graph, _ = read_planetoid(datasets_dir / "planetoid", "cora")
    x = graph.node_data["x"]
    assert x.shape == (2708, 1433) and str(x.dtype) == "torch.float32"
    assert int(graph.node_data["y"].max()) == 6


class _Evil:
    def __reduce__(self):
        import os

        return (os.system, ("echo pwned",))


@pytest.mark.parametrize(
    "part, value, error, pattern",
    [
        ("graph", [1, 2, 3], DataFormatError, "expected a dict of neighbour lists"),
        ("graph", {0: [99]}, DataFormatError, "neighbour id 99 outside"),
        ("y", "not an array", DataFormatError, "ind.toy.y: expected a 2-D one-hot"),
        ("tx", _Evil(), UnsafePickleError, r"ind\.toy\.tx: .*system"),
    ],
)
def test_malformed_parts(tmp_path, part, value, error, pattern):
    _write_planetoid(tmp_path)
    (tmp_path / f"ind.toy.{part}").write_bytes(pickle.dumps(value, protocol=4))
    with pytest.raises(error, match=pattern):
        read_planetoid(tmp_path, "toy")


def test_test_index_must_match_tx(tmp_path):
    _write_planetoid(tmp_path)
    (tmp_path / "ind.toy.test.index").write_text("6\n")
    with pytest.raises(DataFormatError, match="1 test ids but tx has 2 rows"):
        read_planetoid(tmp_path, "toy")
