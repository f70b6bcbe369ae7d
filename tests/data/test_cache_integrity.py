"""Dataset cache entries are verified on every hit; a bad one is rebuilt with one warning.

From the audit: an out-of-range id in a cached npz reached the native kernel, a tampered
size silently gave a 1,000,000-node graph, and truncated, empty or garbage files raised
raw zip/EOF errors naming no file and were never rebuilt.
"""

from __future__ import annotations

import warnings
import zipfile

import numpy as np
import pytest
import torch

from gnnforge.data import (CacheWarning, DataFormatError, cached_graphs, cached_meta,
                           load_graphs, save_graphs)
from gnnforge.data._store import cache_path
from gnnforge.graph import Graph


def _graphs():
    return [Graph([0, 1, 2], [1, 2, 0], 3, node_data={"x": torch.arange(3.0)},
                  graph_data={"y": torch.tensor(1)}),
            Graph([0, 1], [1, 1], 4, node_data={"x": torch.zeros(4)},
                  graph_data={"y": torch.tensor(0)})]


class Builder:
    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return _graphs(), {"built": self.calls}


def _entry(tmp_path):
    source = tmp_path / "source.txt"
    source.write_text("toy")
    builder = Builder()
    cached_graphs("toy", [source], {"k": 1}, builder)
    return source, builder, cache_path("toy", [source], {"k": 1})


def _rewrite(path, **changes):
    """Re-save the npz with some members changed, keeping every other member as it was."""
    with np.load(path, allow_pickle=False) as stored:
        members = {name: stored[name] for name in stored.files}
    for name, change in changes.items():
        members[name] = change(members[name].copy())
    with open(path, "wb") as handle:
        np.savez(handle, **members)


def _set(position, value):
    def change(array):
        array[position] = value
        return array
    return change


def _reload_warns_and_rebuilds(source, builder, path):
    with pytest.warns(CacheWarning) as caught:
        graphs, meta = cached_graphs("toy", [source], {"k": 1}, builder)
    assert len(caught) == 1 and str(path) in str(caught[0].message)
    assert "rebuilding" in str(caught[0].message)
    assert builder.calls == 2 and meta == {"built": 2}
    assert all(a == b for a, b in zip(graphs, _graphs())) and len(graphs) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rebuilt entry is good: no second warning
        cached_graphs("toy", [source], {"k": 1}, builder)
    assert builder.calls == 2


@pytest.mark.parametrize("changes", [
    {"src": _set(0, 10**6)},                     # out-of-range id (crashed the kernel)
    {"graph_ptr": _set(-1, 1_000_000)},          # tampered size
    {"dst": _set(1, -4)},
    {"edge_ptr": _set(1, 4)},                    # an edge moved into the other graph
    {"node_data/x": lambda a: a[:-1]},
], ids=["id-out-of-range", "size", "negative-id", "edge-across-graphs", "short-features"])
def test_tampered_entry_is_rebuilt_with_one_warning(tmp_path, changes):
    source, builder, path = _entry(tmp_path)
    _rewrite(path, **changes)
    _reload_warns_and_rebuilds(source, builder, path)


@pytest.mark.parametrize("content", [b"", b"garbage, not a zip", None],
                         ids=["empty", "garbage", "truncated"])
def test_unreadable_entry_is_rebuilt_with_one_warning(tmp_path, content):
    source, builder, path = _entry(tmp_path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2] if content is None
                     else content)
    _reload_warns_and_rebuilds(source, builder, path)


def test_flipped_bytes_in_an_entry_are_caught(tmp_path):
    source, builder, path = _entry(tmp_path)
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("node_data/x.npy")
    data = bytearray(path.read_bytes())
    # local header (30 bytes + name), the 128-byte .npy header, then the array's bytes
    data[info.header_offset + 30 + len(info.filename) + 128 + 5] ^= 0xFF
    path.write_bytes(bytes(data))
    _reload_warns_and_rebuilds(source, builder, path)


def test_load_graphs_names_the_file_and_the_problem(tmp_path):
    path = tmp_path / "g.npz"
    save_graphs(path, _graphs(), {"a": 1})
    assert load_graphs(path)[1] == {"a": 1}
    _rewrite(path, src=_set(0, 10**6))
    with pytest.raises(DataFormatError, match=r"g\.npz: .*checksum"):
        load_graphs(path)
    (tmp_path / "junk.npz").write_bytes(b"PK\x03\x04junk")
    with pytest.raises(DataFormatError, match=r"junk\.npz: "):
        load_graphs(tmp_path / "junk.npz")


def test_structure_is_checked_even_with_a_matching_checksum(tmp_path):
    """A file written by save_graphs's own code path with a bad id (e.g. by a buggy
    writer) still cannot hand out a graph with an out-of-range id."""
    from gnnforge.data._store import _write_npz

    path = tmp_path / "g.npz"
    save_graphs(path, _graphs())
    with np.load(path, allow_pickle=False) as stored:
        members = {name: stored[name] for name in stored.files if name != "checksum"}
    members["src"][0] = 99
    _write_npz(path, members)
    with pytest.raises(DataFormatError, match=r"g\.npz: src\[0\] = 99 is outside graph 0"):
        load_graphs(path)


def test_cached_meta_of_a_garbage_entry_is_none_with_a_warning(tmp_path):
    source, builder, path = _entry(tmp_path)
    assert cached_meta("toy", [source], {"k": 1}) == {"built": 1}
    path.write_bytes(b"garbage")
    with pytest.warns(CacheWarning, match="garbage|not a zip"):
        assert cached_meta("toy", [source], {"k": 1}) is None


def test_a_member_header_with_an_overflowing_dimension_is_a_data_format_error(tmp_path):
    """Shape (0, 2^70) declares no bytes, so the size check alone passes, and numpy's
    int64 element count overflows (OverflowError) unless the header is refused first."""
    import io

    path = tmp_path / "g.npz"
    save_graphs(path, _graphs(), {"a": 1})
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.zeros((0, 1), dtype=np.int64))
    raw = buffer.getvalue()
    end = raw.index(b"\n")
    forged = raw[:end].replace(b"(0, 1)", b"(0, 1180591620717411303424)")[:end].ljust(end)
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members["checksum.npy"] = forged + raw[end:]
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    with pytest.raises(DataFormatError, match=r"g\.npz\[checksum\.npy\].*beyond 2\^62"):
        load_graphs(path)
