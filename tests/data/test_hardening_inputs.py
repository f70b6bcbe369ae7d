"""Malformed text and archives: ragged rows, ids beyond int64, decompression bombs and
corrupt zip members all end in a DataFormatError naming the file (and line)."""

from __future__ import annotations

import gzip
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.data import (DataFormatError, read_edge_list, read_graph_npz, read_ligra,
                           read_matrix_market, read_planetoid, read_tu_zip)
from gnnforge.data._text import parse_table, parse_table_ref, read_bytes

# ----------------------------------------------------------------------------- item 5


def test_ragged_rows_whose_total_balances_are_refused():
    """'0 1 / 1 2 3 / 4' holds 6 numbers in 3 lines; it is not 3 rows of 2."""
    for parse in (parse_table, parse_table_ref):
        with pytest.raises(DataFormatError, match=r"r\.txt:2: expected 2 values per line, got 3"):
            parse(b"0 1\n1 2 3\n4\n", "r.txt", 2)
    with pytest.raises(DataFormatError, match=r"i\.txt:1: expected 1 values per line, got 2"):
        parse_table(b"5 6\n\n7\n", "i.txt", 1)


_TOKENS = st.lists(st.lists(st.integers(-9, 99), max_size=4), max_size=12)


@settings(max_examples=150, deadline=None)
@given(rows=_TOKENS, columns=st.integers(1, 3), crlf=st.booleans())
def test_fast_parser_agrees_with_the_reference_on_ragged_input(rows, columns, crlf):
    end = "\r\n" if crlf else "\n"
    data = end.join(" ".join(map(str, row)) for row in rows).encode()
    try:
        expected = parse_table_ref(data, "t", columns)
    except DataFormatError as error:
        with pytest.raises(DataFormatError) as info:
            parse_table(data, "t", columns)
        assert info.value.line == error.line
        return
    np.testing.assert_array_equal(parse_table(data, "t", columns), expected)


@pytest.mark.parametrize("name, write, read", [
    ("edges.txt", lambda p: p.write_text("0 1\n1 2 3\n4\n"), read_edge_list),
    ("m.mtx", lambda p: p.write_text("%%MatrixMarket matrix coordinate pattern general\n"
                                    "5 5 3\n1 2\n2 3 4\n5\n"), read_matrix_market),
])
def test_readers_refuse_balanced_ragged_files(tmp_path, name, write, read):
    path = tmp_path / name
    write(path)
    with pytest.raises(DataFormatError, match=rf"{name}:\d+: expected 2 values per line, got 3"):
        read(path)


def test_tu_member_with_balanced_ragged_rows_is_refused(tmp_path):
    path = tmp_path / "TOY.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("TOY_A.txt", "1, 2\n2, 1, 3\n3\n")
        archive.writestr("TOY_graph_indicator.txt", "1\n1\n1\n")
        archive.writestr("TOY_graph_labels.txt", "0\n")
    with pytest.raises(DataFormatError, match=r"TOY_A\.txt\]:2: expected 2 values per line"):
        read_tu_zip(path, progress=False)


# ----------------------------------------------------------------------------- item 9


@pytest.mark.parametrize("text, line", [
    ("0 1\n99999999999999999999 2\n", 2),
    ("0 1\n3 -9223372036854775809\n", 2),
])
def test_ids_beyond_int64_are_refused_not_saturated(tmp_path, text, line):
    path = tmp_path / "big.txt"
    path.write_text(text)
    for relabel in (False, True):
        with pytest.raises(DataFormatError, match=rf"big\.txt:{line}: .*does not fit in int64"):
            read_edge_list(path, relabel=relabel)


def test_relabel_keeps_ids_at_the_int64_limit_distinct(tmp_path):
    path = tmp_path / "edge.txt"
    path.write_text("9223372036854775807 9223372036854775806\n0 9223372036854775807\n")
    graph, _ = read_edge_list(path, relabel=True)
    assert graph.num_nodes == 3
    assert graph.node_data["original_id"].tolist() == [0, 2**63 - 2, 2**63 - 1]


def test_weighted_ids_beyond_float_precision_are_refused(tmp_path):
    path = tmp_path / "w.txt"
    path.write_text("0 1 0.5\n9007199254740993 1 0.5\n")
    with pytest.raises(DataFormatError, match=r"w\.txt:2: node id .* reaches 2\*\*53"):
        read_edge_list(path)


def test_ligra_tokens_beyond_int64_are_refused(tmp_path):
    path = tmp_path / "g.adj"
    path.write_text("AdjacencyGraph\n2\n1\n0\n1\n99999999999999999999\n")
    with pytest.raises(DataFormatError, match=r"g\.adj:6: .*does not fit in int64"):
        read_ligra(path)


# ----------------------------------------------------------------------------- item 13


def _bomb(path, megabytes):
    with gzip.open(path, "wb", compresslevel=9) as handle:
        for _ in range(megabytes):
            handle.write(b"0 0\n" * (2**20 // 4))
    return path


def test_gzip_bomb_stops_at_the_limit_set_by_the_environment(tmp_path, monkeypatch):
    path = _bomb(tmp_path / "bomb.txt.gz", 8)
    assert path.stat().st_size < 64 * 2**10
    monkeypatch.setenv("GNNFORGE_MAX_DECOMPRESSED_MIB", "2")
    with pytest.raises(DataFormatError, match=r"bomb\.txt\.gz: decompresses to more than 2 MiB"
                                              r".*GNNFORGE_MAX_DECOMPRESSED_MIB"):
        read_edge_list(path)
    monkeypatch.setenv("GNNFORGE_MAX_DECOMPRESSED_MIB", "16")
    assert read_edge_list(path)[0].num_edges == 2 * 2**20


def test_gzip_limit_as_an_argument(tmp_path):
    path = _bomb(tmp_path / "bomb.gz", 3)
    with pytest.raises(DataFormatError, match="more than 1 MiB"):
        read_bytes(path, max_bytes=2**20)
    assert len(read_bytes(path, max_bytes=3 * 2**20)) == 3 * 2**20
    with pytest.raises(ValueError, match="GNNFORGE_MAX_DECOMPRESSED_MIB must be"):
        import os
        os.environ["GNNFORGE_MAX_DECOMPRESSED_MIB"] = "lots"
        try:
            read_bytes(path)
        finally:
            del os.environ["GNNFORGE_MAX_DECOMPRESSED_MIB"]


def test_zip_member_bomb_is_capped(tmp_path, monkeypatch):
    path = tmp_path / "TOY.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("TOY_A.txt", b"1, 1\n" * (3 * 2**20 // 5))
        archive.writestr("TOY_graph_indicator.txt", "1\n")
        archive.writestr("TOY_graph_labels.txt", "0\n")
    monkeypatch.setenv("GNNFORGE_MAX_DECOMPRESSED_MIB", "1")
    with pytest.raises(DataFormatError, match=r"TOY\.zip\[TOY_A\.txt\]: decompresses to more"):
        read_tu_zip(path, progress=False)


# ----------------------------------------------------------------------------- item 17


def _toy_tu(path):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("TOY_A.txt", "".join(f"{i}, {i + 1}\n" for i in range(1, 400)))
        archive.writestr("TOY_graph_indicator.txt", "1\n" * 400)
        archive.writestr("TOY_graph_labels.txt", "0\n")
    return path


def test_corrupt_tu_member_names_the_member(tmp_path):
    path = _toy_tu(tmp_path / "TOY.zip")
    data = bytearray(path.read_bytes())
    start = data.index(b"TOY_A.txt") + len(b"TOY_A.txt")
    for offset in range(start + 10, start + 60):  # inside the deflated bytes of TOY_A.txt
        data[offset] ^= 0x5A
    path.write_bytes(bytes(data))
    with pytest.raises(DataFormatError, match=r"TOY\.zip\[TOY_A\.txt\]: corrupt zip member"):
        read_tu_zip(path, progress=False)


@pytest.mark.parametrize("keep", [0, 30, 200])
def test_truncated_or_garbage_tu_zip_is_a_data_format_error(tmp_path, keep):
    path = _toy_tu(tmp_path / "TOY.zip")
    path.write_bytes(path.read_bytes()[:keep] + b"garbage")
    with pytest.raises(DataFormatError, match=r"TOY\.zip: not a zip file"):
        read_tu_zip(path, progress=False)


def test_corrupt_npz_member_names_the_member(tmp_path):
    path = tmp_path / "g.npz"
    np.savez_compressed(path, src=np.arange(500), dst=np.arange(500), num_nodes=np.array(500))
    data = bytearray(path.read_bytes())
    start = data.index(b"src.npy") + len(b"src.npy")
    for offset in range(start + 40, start + 90):
        data[offset] ^= 0x5A
    path.write_bytes(bytes(data))
    with pytest.raises(DataFormatError, match=r"g\.npz\[src\.npy\]: corrupt zip member"):
        read_graph_npz(path)


def test_planetoid_ragged_test_index(tmp_path):
    from tests.data.test_planetoid import _write_planetoid

    _write_planetoid(tmp_path)
    (tmp_path / "ind.toy.test.index").write_text("6 5\n\n")
    with pytest.raises(DataFormatError, match=r"ind\.toy\.test\.index:1: expected 1 values"):
        read_planetoid(tmp_path, "toy")
