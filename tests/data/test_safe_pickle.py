import collections
import os
import pickle

import numpy as np
import pytest
import scipy.sparse

from gnnforge.data import DataFormatError, UnsafePickleError, safe_load, safe_loads


class _CallsSystem:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


class _CallsEval:
    def __reduce__(self):
        return (eval, ("1+1",))


def test_refuses_os_system_and_names_it():
    data = pickle.dumps(_CallsSystem())
    with pytest.raises(UnsafePickleError, match=r"(posix|os|nt)\.system"):
        safe_loads(data, "evil.pkl")


def test_refuses_builtins_eval():
    with pytest.raises(UnsafePickleError, match=r"builtins\.eval"):
        safe_loads(pickle.dumps(_CallsEval()))


def test_unsafe_error_is_a_value_error_naming_the_file():
    with pytest.raises(ValueError, match="evil.pkl"):
        safe_loads(pickle.dumps(_CallsSystem()), "evil.pkl")


@pytest.mark.parametrize("protocol", [3, 4, 5])
def test_admits_numpy_scipy_defaultdict(protocol):
    value = {
        "array": np.arange(6, dtype=np.float32).reshape(2, 3),
        "csr": scipy.sparse.csr_matrix(np.eye(3)),
        "adjacency": collections.defaultdict(list, {0: [1, 2], 2: [0]}),
        "scalar": np.int64(7),
    }
    loaded = safe_loads(pickle.dumps(value, protocol=protocol))
    np.testing.assert_array_equal(loaded["array"], value["array"])
    assert (loaded["csr"] != value["csr"]).nnz == 0
    assert loaded["adjacency"] == value["adjacency"]
    assert loaded["scalar"] == 7


def test_garbage_is_a_format_error():
    with pytest.raises(DataFormatError, match="not a valid pickle"):
        safe_loads(b"definitely not a pickle", "junk.bin")


def test_real_planetoid_pickles_load(datasets_dir):
    graph = safe_load(datasets_dir / "planetoid" / "ind.cora.graph")
    assert isinstance(graph, collections.defaultdict) and len(graph) == 2708
    allx = safe_load(datasets_dir / "planetoid" / "ind.cora.allx")
    assert scipy.sparse.issparse(allx) and allx.shape == (1708, 1433)


def test_a_memo_index_beyond_the_pickle_is_refused_before_unpickling():
    """The C unpickler sizes its memo array by the largest PUT index: a 2^31 index in a
    tiny pickle asked for tens of GiB (the fuzzer's Planetoid finding, killed for memory)."""
    forged = b"\x80\x02]r\x00\x00\x00\x80."  # PROTO 2, EMPTY_LIST, LONG_BINPUT 2^31, STOP
    with pytest.raises(DataFormatError, match=r"memo index 2147483648 at byte 3"):
        safe_loads(forged, "graph.pkl")
    honest = pickle.dumps([[1, 2], [3]] * 300, protocol=2)   # many memo entries
    assert safe_loads(honest) == [[1, 2], [3]] * 300
