"""Sparse matrices read from files are checked in int64 before scipy touches them.

scipy's `check_format` computes row-pointer differences in int32, so the pointers
[0, 2**31 - 1, -2**31, -1, 3] pass it and `toarray()` reads out of bounds; unpickled
matrices are not checked at all. The crafted files run in a child process: before the fix
they killed it with SIGSEGV, which fails the test instead of the whole run.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse

from gnnforge.data import DataFormatError
from gnnforge.data._sparse import checked_compressed, checked_matrix
from tests.isolated import expect_clean_error

WRAPPING = [0, 2**31 - 1, -(2**31), -1, 3]

_CRAFTED_NPZ = """
import sys
import numpy as np
from gnnforge.data import DataFormatError, read_graph_npz
pointers = np.array({pointers}, dtype=np.int32)
np.savez(sys.argv[1], adj_data=np.ones(3, np.float32), adj_indices=np.arange(3, dtype=np.int32),
         adj_indptr=pointers, adj_shape=np.array([4, 4]), labels=np.zeros(4, np.int64),
         attr_data=np.ones(3, np.float32), attr_indices=np.arange(3, dtype=np.int32),
         attr_indptr=pointers, attr_shape=np.array([4, 4]))
try:
    read_graph_npz(sys.argv[1])
except DataFormatError as error:
    print("CLEAN-ERROR:", error)
"""


def test_crafted_npz_with_int32_wrapping_row_pointers_is_refused(tmp_path):
    path = tmp_path / "crafted.npz"
    message = expect_clean_error(_CRAFTED_NPZ.format(pointers=WRAPPING), str(path))
    assert str(path) in message and "adjacency indptr" in message and "decreases" in message


_CRAFTED_PICKLE = """
import collections, pickle, sys
from pathlib import Path
import numpy as np
import scipy.sparse
from gnnforge.data import DataFormatError, read_planetoid, read_graph_npz

folder = Path(sys.argv[1])
good = scipy.sparse.csr_matrix(np.eye(4, dtype=np.float32))
bad = scipy.sparse.csr_matrix(np.eye(4, dtype=np.float32))
bad.indptr = np.array({pointers}, dtype=np.int32)   # attribute set after construction
onehot = np.eye(2, dtype=np.int64)[[0, 1, 0, 1]]
parts = dict(x=bad, tx=good[:2], allx=good, y=onehot[:2], ty=onehot[:2], ally=onehot,
             graph=collections.defaultdict(list, {{0: [1]}}))
for part, value in parts.items():
    (folder / f"ind.toy.{{part}}").write_bytes(pickle.dumps(value, protocol=4))
(folder / "ind.toy.test.index").write_text("4\\n5\\n")
try:
    read_planetoid(folder, "toy")
except DataFormatError as error:
    print("CLEAN-ERROR:", error)
"""


def test_planetoid_csr_pickle_with_bad_row_pointers_is_refused(tmp_path):
    message = expect_clean_error(_CRAFTED_PICKLE.format(pointers=WRAPPING), str(tmp_path))
    assert "ind.toy.x" in message and "indptr" in message


_CRAFTED_GALLERY = """
import io, sys, zipfile
import numpy as np
import scipy.sparse
from gnnforge.data import DataFormatError, read_graph_npz

bad = scipy.sparse.csr_matrix(np.eye(4, dtype=np.float32))
bad.indptr = np.array({pointers}, dtype=np.int32)
def member(value):
    handle = io.BytesIO()
    np.lib.format.write_array(handle, np.asarray(value, dtype=object) if not
                              isinstance(value, np.ndarray) else value, allow_pickle=True)
    return handle.getvalue()
with zipfile.ZipFile(sys.argv[1], "w") as archive:
    archive.writestr("adj_matrix.npy", member(bad))
    archive.writestr("node_label.npy", member(np.zeros(4, np.int64)))
try:
    read_graph_npz(sys.argv[1])
except DataFormatError as error:
    print("CLEAN-ERROR:", error)
"""


def test_graphgallery_pickled_matrix_with_bad_row_pointers_is_refused(tmp_path):
    path = tmp_path / "gallery.npz"
    message = expect_clean_error(_CRAFTED_GALLERY.format(pointers=WRAPPING), str(path))
    assert "adj_matrix indptr" in message


_CRAFTED_MAT = """
import sys
import numpy as np
import scipy.io, scipy.sparse
from gnnforge.data import DataFormatError, read_mat_graph

matrix = scipy.sparse.csc_matrix(np.eye(4))
matrix.indptr = np.array({pointers}, dtype=np.int32)
scipy.io.savemat(sys.argv[1], {{"Problem": {{"A": matrix}}}})
try:
    read_mat_graph(sys.argv[1])
except DataFormatError as error:
    print("CLEAN-ERROR:", error)
"""


def test_mat_file_with_bad_column_pointers_is_refused(tmp_path):
    path = tmp_path / "crafted.mat"
    message = expect_clean_error(_CRAFTED_MAT.format(pointers=[0, 3, 1, 2, 4]), str(path))
    assert "Problem.A" in message


@pytest.mark.parametrize("change, expected", [
    (dict(indptr=[1, 1, 2, 3, 3]), "must start at 0"),
    (dict(indptr=[0, 2, 1, 3, 3]), "decreases at entry 2"),
    (dict(indptr=[0, 1, 2, 3, 4]), "indptr ends at 4 but there are 3 indices"),
    (dict(indptr=[0, 1, 2, 3]), "expected 5 entries"),
    (dict(indices=[0, 1, 4]), "indices[2] = 4 outside 0..3"),
    (dict(indices=[0, -1, 2]), "indices[1] = -1"),
    (dict(indices=[0.0, 1.0, 2.0]), "expected a 1-D integer array"),
    (dict(indptr=np.array([0, 1, 2, 3, 2**63], dtype=np.uint64)), "does not fit in int64"),
    (dict(shape=[4, -4]), "must be non-negative"),
    (dict(shape=[4, 4, 4]), "two non-negative integers"),
    (dict(data=np.array(["a", "b", "c"])), "numeric"),
])
def test_each_rule_is_checked_and_named(change, expected):
    parts = dict(data=np.ones(3), indices=[0, 1, 2], indptr=[0, 1, 2, 3, 3], shape=[4, 4])
    parts.update(change)
    with pytest.raises(DataFormatError, match="f.npz: adj") as info:
        checked_compressed("f.npz", "adj", parts["data"], parts["indices"], parts["indptr"],
                           parts["shape"])
    assert expected in str(info.value)


@pytest.mark.parametrize("kind", ["csr", "csc"])
def test_valid_matrices_round_trip(kind):
    rng = np.random.default_rng(0)
    dense = (rng.random((7, 5)) < 0.3) * rng.random((7, 5))
    source = scipy.sparse.csr_matrix(dense) if kind == "csr" else scipy.sparse.csc_matrix(dense)
    rebuilt = checked_compressed("f", "m", source.data, source.indices, source.indptr,
                                 source.shape, kind=kind)
    np.testing.assert_array_equal(rebuilt.toarray(), dense)
    np.testing.assert_array_equal(checked_matrix("f", "m", source).toarray(), dense)
    empty = checked_compressed("f", "m", [], np.zeros(0, np.int32), [0], (0, 3))
    assert empty.shape == (0, 3) and empty.nnz == 0


def test_checked_matrix_refuses_other_objects():
    with pytest.raises(DataFormatError, match="expected a scipy CSR/CSC matrix"):
        checked_matrix("f", "x", {"not": "a matrix"})
    with pytest.raises(DataFormatError, match="2-D numeric array"):
        checked_matrix("f", "x", np.zeros(3))
