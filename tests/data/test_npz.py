import io
import os
import zipfile

import numpy as np
import pytest
import scipy.sparse

from gnnforge.data import DataFormatError, UnsafePickleError, read_graph_npz


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def _npy_object(value) -> bytes:
    buffer = io.BytesIO()
    array = np.empty((), dtype=object)
    array[()] = value
    np.lib.format.write_array(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def _npy(value) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.asarray(value), allow_pickle=False)
    return buffer.getvalue()


def _zip(path, members):
    with zipfile.ZipFile(path, "w") as archive:
        for name, raw in members.items():
            archive.writestr(name + ".npy", raw)
    return path


def test_gnn_benchmark_layout(tmp_path):
    adj = scipy.sparse.csr_matrix(np.array([[0, 1, 0], [0, 0, 1], [1, 0, 1]], dtype=np.float32))
    attr = scipy.sparse.csr_matrix(np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32))
    path = tmp_path / "tiny.npz"
    np.savez(
        path,
        adj_data=adj.data,
        adj_indices=adj.indices,
        adj_indptr=adj.indptr,
        adj_shape=adj.shape,
        attr_data=attr.data,
        attr_indices=attr.indices,
        attr_indptr=attr.indptr,
        attr_shape=attr.shape,
        labels=np.array([0, 2, 1]),
    )
    graph, meta = read_graph_npz(path)
    assert sorted(zip(graph.src.tolist(), graph.dst.tolist())) == [(0, 1), (1, 2), (2, 0), (2, 2)]
    np.testing.assert_array_equal(graph.node_data["x"].numpy(), attr.toarray())
    assert graph.node_data["y"].tolist() == [0, 2, 1]
    assert meta["feature_dim"] == 2 and meta["num_classes"] == 3


def test_graphgallery_layout_through_restricted_unpickler(tmp_path):
    adj = scipy.sparse.csr_matrix(np.array([[0, 1], [1, 0]], dtype=np.float32))
    path = _zip(
        tmp_path / "gg.npz",
        {
            "adj_matrix": _npy_object(adj),
            "node_attr": _npy_object(adj),
            "node_label": _npy(np.array([1, 0], dtype=np.int32)),
            "metadata": _npy_object({"class_names": ["a", "b"]}),
        },
    )
    graph, meta = read_graph_npz(path, features="none")
    assert graph.num_edges == 2 and "x" not in graph.node_data and meta["feature_dim"] == 2


def test_evil_member_is_refused(tmp_path):
    path = _zip(
        tmp_path / "evil.npz",
        {"adj_matrix": _npy_object(_Evil()), "node_label": _npy(np.zeros(2, np.int32))},
    )
    with pytest.raises(UnsafePickleError, match=r"evil\.npz\[adj_matrix\.npy\].*system"):
        read_graph_npz(path)


def _forged_shape(array: np.ndarray, shape: bytes) -> bytes:
    """`array`'s .npy bytes with the shape in its header replaced by `shape` (the header
    keeps its length: the padding absorbs the longer text)."""
    raw = _npy(array)
    header_end = raw.index(b"\n") + 1
    forged = raw[:header_end].replace(str(array.shape).encode(), shape)
    return forged[:header_end - 1].ljust(header_end - 1) + b"\n" + raw[header_end:]


def _edge_arrays_zip(path, src_raw: bytes):
    return _zip(path, {"src": src_raw, "dst": _npy(np.zeros(1, np.int64)),
                       "num_nodes": _npy(np.int64(1))})


def test_a_header_declaring_more_data_than_the_member_holds_is_refused(tmp_path):
    """numpy would allocate the declared array first (2^31 strings of 22 characters:
    176 GiB, a MemoryError); the reader names the member and the sizes instead."""
    path = _edge_arrays_zip(tmp_path / "huge.npz",
                            _forged_shape(np.array(["a"], dtype="<U22"), b"(2147483648,)"))
    with pytest.raises(DataFormatError, match=r"huge\.npz\[src\.npy\].*declares shape "
                                              r"\(2147483648,\).*holds 88"):
        read_graph_npz(path)


def test_a_header_with_an_overflowing_dimension_is_refused(tmp_path):
    """Shape (0, 2^70): zero elements, so no size check trips, but numpy's int64 element
    count overflows (OverflowError)."""
    path = _edge_arrays_zip(tmp_path / "wide.npz",
                            _forged_shape(np.zeros((0, 1), dtype=np.int64),
                                          b"(0, 1180591620717411303424)"))
    with pytest.raises(DataFormatError, match=r"wide\.npz\[src\.npy\].*beyond 2\^62"):
        read_graph_npz(path)


def test_unknown_layout_and_bad_zip(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, something=np.zeros(3))
    with pytest.raises(DataFormatError, match="unknown npz layout"):
        read_graph_npz(path)
    (tmp_path / "broken.npz").write_bytes(b"not a zip")
    with pytest.raises(DataFormatError, match="broken.npz: not an npz"):
        read_graph_npz(tmp_path / "broken.npz")


def test_edge_arrays_out_of_range(tmp_path):
    path = tmp_path / "e.npz"
    np.savez(path, src=np.array([0, 3]), dst=np.array([1, 0]), num_nodes=np.array(3))
    with pytest.raises(ValueError, match=r"src\[1\] = 3 is out of range"):
        read_graph_npz(path)


@pytest.mark.parametrize(
    "name, nodes, stored, loops, dim, classes",
    [
        ("amazon_cs", 13752, 287209, 0, 767, 10),
        ("amazon_photo", 7650, 143663, 1, 745, 8),
        ("coauthor_cs", 18333, 163788, 0, 6805, 15),
        ("coauthor_phy", 34493, 495924, 0, 8415, 5),
    ],
)
def test_graphgallery_known_answers(datasets_dir, name, nodes, stored, loops, dim, classes):
    graph, meta = read_graph_npz(datasets_dir / "graphgallery_npz" / f"{name}.npz", features="none")
    assert (graph.num_nodes, graph.num_edges, graph.num_self_loops()) == (nodes, stored, loops)
    assert (meta["feature_dim"], meta["num_classes"]) == (dim, classes)


@pytest.mark.parametrize(
    "name, nodes, nnz, loops, feature_nnz",
    [("cora", 2708, 5429, 0, 49216), ("citeseer", 3312, 4715, 124, 105165)],
)
def test_gnn_benchmark_known_answers(datasets_dir, name, nodes, nnz, loops, feature_nnz):
    graph, meta = read_graph_npz(datasets_dir / "gnn_benchmark_npz" / f"{name}.npz")
    assert (graph.num_nodes, graph.num_edges, graph.num_self_loops()) == (nodes, nnz, loops)
    assert int(graph.node_data["x"].sum()) == feature_nnz == meta["feature_nnz"]
    assert graph.node_data["x"].dtype.is_floating_point and graph.node_data["y"].dtype.is_signed


def test_rmat_benchmark_graph(datasets_dir):
    graph, _ = read_graph_npz(datasets_dir / "synthetic" / "rmat_s17_e21.npz")
    assert (graph.num_nodes, graph.num_edges) == (131072, 2097152)
    assert int(graph.in_degrees().max()) == 9481
