"""`.mat` files are parsed by scipy in a child process: its parser segfaults on some
malformed files (found by tests/data/fuzz.py), which must not take the caller down."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.io
import scipy.sparse

from gnnforge.data import DataFormatError, read_mat_graph
from gnnforge.data import _mat_isolated


def _crashing_child(tmp_path, body):
    script = tmp_path / "child.py"
    script.write_text(body)
    return script


@pytest.mark.parametrize("body, message", [
    ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
     r"scipy\.io\.loadmat crashed reading it \(signal 11\)"),
    ("import sys\nprint('PROBLEM \"no \\'Problem\\' struct\"')\nsys.exit(3)\n",
     "no 'Problem' struct"),
    ("import sys\nsys.exit(1)\n", "reading it failed in the child process"),
])
def test_a_child_that_crashes_or_fails_is_a_clean_error(tmp_path, monkeypatch, body, message):
    monkeypatch.setattr(_mat_isolated, "_CHILD", _crashing_child(tmp_path, body))
    with pytest.raises(DataFormatError, match=rf"some\.mat: {message}"):
        read_mat_graph(tmp_path / "some.mat")


def test_a_valid_file_round_trips_through_the_child(tmp_path):
    dense = np.array([[0, 1, 0], [1, 0, 2], [0, 2, 0]], dtype=float)
    coord = np.arange(6, dtype=float).reshape(3, 2)
    path = tmp_path / "toy.mat"
    scipy.io.savemat(path, {"Problem": {"A": scipy.sparse.csc_matrix(dense),
                                        "aux": {"coord": coord}, "name": "toy"}})
    graph, meta = read_mat_graph(path)
    assert sorted(zip(graph.src.tolist(), graph.dst.tolist())) == [(0, 1), (1, 0), (1, 2),
                                                                    (2, 1)]
    assert graph.node_data["pos"].tolist() == coord.tolist() and meta["name"] == "toy"


def test_garbage_and_missing_struct(tmp_path):
    (tmp_path / "junk.mat").write_bytes(b"MATLAB 5.0 MAT-file" + b"\x00" * 200)
    with pytest.raises(DataFormatError, match=r"junk\.mat: "):
        read_mat_graph(tmp_path / "junk.mat")
    scipy.io.savemat(tmp_path / "other.mat", {"B": np.eye(2)})
    with pytest.raises(DataFormatError, match=r"no 'Problem' struct \(variables: \['B'\]\)"):
        read_mat_graph(tmp_path / "other.mat")
