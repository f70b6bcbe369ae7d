"""Save and load lists of graphs as one npz, and cache processed datasets on disk.

A dataset is stored as its GraphBatch (one array per field, offsets per graph), so loading
1.6M molecules is a handful of array reads, not 1.6M objects unpickled. No pickle is used.
The cache key is a hash of the source files (path, size, mtime) and the processing
options, so changing either rebuilds.

Integrity. Every file carries a `checksum` member: a SHA-256 over each other member's
name, size and CRC-32. zipfile checks each member's CRC-32 against its data on every full
read, so the chain covers every byte at no extra pass over the data (a SHA-256 of the
arrays themselves would cost seconds per GB on a loaded machine). On top of it the
structure is checked once per load (ids inside their graph, monotone offsets, data
lengths), so not even a consistent forgery reaches a kernel with a bad id. A cache entry
that fails either check, or cannot be read at all, is rebuilt with one `CacheWarning`.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tokenize
import warnings
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnforge.data._errors import DataFormatError
from gnnforge.data._limits import (LIMIT_VARIABLE, declared_npy_bytes, decompressed_limit,
                                   open_zip)
from gnnforge.data._npy_header import read_npy_header
from gnnforge.data._paths import cache_dir
from gnnforge.graph import Graph, GraphBatch

__all__ = ["CacheWarning", "cache_key", "cache_path", "cached_graphs", "cached_meta",
           "load_graphs", "load_meta", "save_graphs"]

_SECTIONS = ("node_data", "edge_data", "graph_data")
_CHECKSUM = "checksum"
# Part of every cache key; 2: entries carry a checksum member.
STORE_VERSION = 2
# What a damaged file can raise while numpy and zipfile read it (beyond DataFormatError).
_READ_ERRORS = (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile,
                NotImplementedError, UnicodeDecodeError, SyntaxError, tokenize.TokenError,
                RecursionError, TypeError)


class CacheWarning(UserWarning):
    """A cache entry failed its integrity check or could not be read; it is rebuilt."""


def save_graphs(path: str | Path, graphs: Sequence[Graph], meta: dict[str, Any] | None = None) -> None:
    """Write graphs (and a JSON-able `meta` dict) to `path` atomically, with a checksum."""
    batch = GraphBatch.from_graphs(graphs)
    arrays = {
        "src": batch.src.numpy(), "dst": batch.dst.numpy(),
        "graph_ptr": batch.graph_ptr.numpy(), "edge_ptr": batch.edge_ptr.numpy(),
        "meta": np.frombuffer(json.dumps(meta or {}).encode(), dtype=np.uint8),
    }
    if batch.edge_type is not None:
        arrays["edge_type"] = batch.edge_type.numpy()
    for section in _SECTIONS:
        for key, value in getattr(batch, section).items():
            arrays[f"{section}/{key}"] = value.numpy()
    _write_npz(path, arrays)


def _write_npz(path: str | Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez to a temporary file, append the checksum member, then rename into place."""
    path = Path(path)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as handle:
            np.savez(handle, **arrays)
        with zipfile.ZipFile(tmp, "a") as archive:
            digest = np.frombuffer(_digest(archive.infolist()).encode(), dtype=np.uint8)
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, digest, allow_pickle=False)
            archive.writestr(f"{_CHECKSUM}.npy", buffer.getvalue())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _digest(infos: list[zipfile.ZipInfo]) -> str:
    digest = hashlib.sha256()
    for info in sorted(infos, key=lambda info: info.filename):
        if info.filename != f"{_CHECKSUM}.npy":
            digest.update(f"{info.filename}|{info.file_size}|{info.CRC:08x}\n".encode())
    return digest.hexdigest()


def _read_members(path: Path, names: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """Members of a `save_graphs` file (all, or `names`), checksum and CRCs verified.

    Raises:
        DataFormatError: naming the file: no checksum, a checksum mismatch, a member whose
            declared array size disagrees with its length, or bad member data.
    """
    with open_zip(path, "a graph store (zip) file") as archive:
        infos = {info.filename: info for info in archive.infolist()}
        if f"{_CHECKSUM}.npy" not in infos:
            raise DataFormatError(path, "no checksum member (not written by save_graphs)")
        stored = _read_array(archive, infos[f"{_CHECKSUM}.npy"], path)
        if stored.tobytes().decode("ascii", "replace") != _digest(list(infos.values())):
            raise DataFormatError(path, "checksum mismatch: a member was changed, added or "
                                  "removed after the file was written")
        wanted = [n for n in infos if n != f"{_CHECKSUM}.npy" and n.endswith(".npy")]
        if names is not None:
            wanted = [n for n in wanted if n.removesuffix(".npy") in names]
        return {name.removesuffix(".npy"): _read_array(archive, infos[name], path)
                for name in wanted}


def _read_array(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path) -> np.ndarray:
    where = f"{path}[{info.filename}]"
    if info.compress_type != zipfile.ZIP_STORED \
            and info.file_size > decompressed_limit(info.compress_size):
        raise DataFormatError(where, f"declares {info.file_size / 2**20:.0f} MiB from "
                              f"{info.compress_size} compressed bytes, more than the limit of "
                              f"{decompressed_limit(info.compress_size) / 2**20:.0f} MiB "
                              f"({LIMIT_VARIABLE}=<MiB> raises it)")
    with archive.open(info) as handle:
        shape, _, dtype = read_npy_header(handle)
        if dtype.hasobject:
            raise DataFormatError(where, "object arrays are not allowed")
        # A header declaring fewer bytes than the member holds would stop reading before
        # zipfile's CRC check at the end of the member.
        if handle.tell() + declared_npy_bytes(shape, dtype, where) != info.file_size:
            raise DataFormatError(where, f"header declares {shape} {dtype} but the member "
                                  f"holds {info.file_size} bytes")
    with archive.open(info) as handle:
        array = np.lib.format.read_array(handle, allow_pickle=False)
        handle.read()  # at the end: zipfile compares the CRC-32 now, if it has not yet
    return array


def load_graphs(path: str | Path) -> tuple[list[Graph], dict[str, Any]]:
    """Read graphs written by `save_graphs`; returns (graphs, meta).

    Raises:
        DataFormatError: naming the file, when it is not a readable graph store, its
            checksum does not match, or its structure is invalid (see `_check_structure`).
    """
    path = Path(path)
    try:
        arrays = _read_members(path)
        meta = json.loads(arrays.pop("meta").tobytes().decode()) if "meta" in arrays else {}
    except DataFormatError:
        raise
    except _READ_ERRORS as error:
        raise DataFormatError(path, f"unreadable graph store ({type(error).__name__}: "
                              f"{error})") from error
    _check_structure(path, arrays)
    fields = {name: torch.from_numpy(value) for name, value in arrays.items()}
    data = {section: {} for section in _SECTIONS}
    for name, value in fields.items():
        if "/" in name:
            section, key = name.split("/", 1)
            data[section][key] = value
    union = Graph._trusted(fields["src"], fields["dst"], int(fields["graph_ptr"][-1]),
                           fields.get("edge_type"), data["node_data"], data["edge_data"],
                           data["graph_data"])
    mask = torch.ones(fields["graph_ptr"].numel() - 1, dtype=torch.bool)
    batch = GraphBatch._make(union, fields["graph_ptr"], fields["edge_ptr"], mask)
    return batch.unbatch(), meta


def _offsets(path: Path, name: str, ptr: np.ndarray | None, end: int | None) -> np.ndarray:
    if ptr is None or ptr.dtype != np.int64 or ptr.ndim != 1 or ptr.size == 0:
        raise DataFormatError(path, f"{name}: expected a non-empty 1-D int64 array")
    if ptr[0] != 0 or (ptr.size > 1 and np.diff(ptr).min() < 0):
        raise DataFormatError(path, f"{name}: offsets must start at 0 and never decrease")
    if end is not None and ptr[-1] != end:
        raise DataFormatError(path, f"{name} ends at {ptr[-1]}, expected {end}")
    return ptr


def _check_structure(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Every id inside its own graph, offsets monotone, every data field the right length.

    One vectorised pass over the edges: what `GraphBatch.unbatch` and the kernels trust.
    """
    src, dst = arrays.get("src"), arrays.get("dst")
    for name, ids in (("src", src), ("dst", dst)):
        if ids is None or ids.dtype != np.int64 or ids.ndim != 1:
            raise DataFormatError(path, f"{name}: expected a 1-D int64 array")
    if src.size != dst.size:
        raise DataFormatError(path, f"src has {src.size} entries but dst {dst.size}")
    graph_ptr = _offsets(path, "graph_ptr", arrays.get("graph_ptr"), None)
    edge_ptr = _offsets(path, "edge_ptr", arrays.get("edge_ptr"), src.size)
    if edge_ptr.size != graph_ptr.size:
        raise DataFormatError(path, f"edge_ptr has {edge_ptr.size} entries, graph_ptr "
                              f"{graph_ptr.size}")
    edge_graph = np.repeat(np.arange(graph_ptr.size - 1), np.diff(edge_ptr))
    low, high = graph_ptr[:-1][edge_graph], graph_ptr[1:][edge_graph]
    for name, ids in (("src", src), ("dst", dst)):
        bad = (ids < low) | (ids >= high)
        if bad.any():
            position = int(np.argmax(bad))
            graph = int(edge_graph[position])
            raise DataFormatError(
                path, f"{name}[{position}] = {ids[position]} is outside graph {graph}'s nodes "
                f"[{graph_ptr[graph]}, {graph_ptr[graph + 1]})")
    edge_type = arrays.get("edge_type")
    if edge_type is not None and (edge_type.dtype.kind not in "iu" or edge_type.shape != src.shape
                                  or (edge_type.size and edge_type.min() < 0)):
        raise DataFormatError(path, "edge_type: expected one non-negative integer per edge")
    lengths = {"node_data": int(graph_ptr[-1]), "edge_data": int(src.size),
               "graph_data": int(graph_ptr.size - 1)}
    for name, value in arrays.items():
        section = name.split("/", 1)[0]
        if section in lengths and (value.ndim == 0 or value.shape[0] != lengths[section]):
            raise DataFormatError(path, f"{name}: first dimension must be {lengths[section]}, "
                                  f"got shape {value.shape}")


def cache_key(sources: Sequence[str | Path], options: dict[str, Any]) -> str:
    """Hash of the source files' identity (path, size, mtime), the processing options and
    the store format (entries of an older format are then never looked at)."""
    digest = hashlib.sha256(f"store-v{STORE_VERSION}|".encode())
    for source in sources:
        source = Path(source)
        stat = source.stat() if source.exists() else None
        digest.update(f"{source.resolve()}|{stat.st_size if stat else -1}|"
                      f"{stat.st_mtime_ns if stat else -1}".encode())
    digest.update(json.dumps(options, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def load_meta(path: str | Path) -> dict[str, Any]:
    """Only the `meta` dict of a file written by `save_graphs` (no graph arrays are read).

    Raises:
        DataFormatError: naming the file, when it is unreadable or its checksum fails.
    """
    path = Path(path)
    try:
        arrays = _read_members(path, ["meta"])
        return json.loads(arrays["meta"].tobytes().decode()) if "meta" in arrays else {}
    except DataFormatError:
        raise
    except _READ_ERRORS as error:
        raise DataFormatError(path, f"unreadable graph store ({type(error).__name__}: "
                              f"{error})") from error


def cache_path(name: str, sources: Sequence[str | Path], options: dict[str, Any]) -> Path:
    """Where `cached_graphs` keeps `name` built from these sources with these options."""
    return cache_dir() / f"{name}-{cache_key(sources, options)}.npz"


def cached_meta(name: str, sources: Sequence[str | Path],
                options: dict[str, Any]) -> dict[str, Any] | None:
    """The cached meta of `name` when it is in the cache, else None (nothing is built).

    A damaged entry counts as absent (with a `CacheWarning`); the next load rebuilds it.
    """
    path = cache_path(name, sources, options)
    if not path.exists():
        return None
    try:
        return load_meta(path)
    except DataFormatError as error:
        _warn_bad_entry(path, error)
        return None


def cached_graphs(name: str, sources: Sequence[str | Path], options: dict[str, Any],
                  build: Callable[[], tuple[list[Graph], dict[str, Any]]],
                  use_cache: bool = True) -> tuple[list[Graph], dict[str, Any]]:
    """Load `name` from the cache, or `build()` it (graphs, meta) and store it.

    A cache entry that is unreadable or fails its checksum or structure check is rebuilt,
    with one `CacheWarning` naming the file.
    """
    path = cache_path(name, sources, options)
    if use_cache and path.exists():
        try:
            return load_graphs(path)
        except DataFormatError as error:
            _warn_bad_entry(path, error)
            path.unlink(missing_ok=True)
    graphs, meta = build()
    if use_cache:
        save_graphs(path, graphs, meta)
    return graphs, meta


def _warn_bad_entry(path: Path, error: DataFormatError) -> None:
    problem = str(error).removeprefix(f"{path}: ")
    warnings.warn(f"{path}: damaged dataset cache entry ({problem}); rebuilding it",
                  CacheWarning, stacklevel=3)
