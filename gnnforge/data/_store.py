"""Save and load lists of graphs as one npz, and cache processed datasets on disk.

A dataset is stored as its GraphBatch (one array per field, offsets per graph), so loading
1.6M molecules is a handful of array reads, not 1.6M objects unpickled. No pickle is used.
The cache key is a hash of the source files (path, size, mtime) and the processing
options, so changing either rebuilds.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnforge.data._paths import cache_dir
from gnnforge.graph import Graph, GraphBatch

__all__ = ["cache_key", "cache_path", "cached_graphs", "cached_meta", "load_graphs", "load_meta",
           "save_graphs"]

_SECTIONS = ("node_data", "edge_data", "graph_data")


def save_graphs(path: str | Path, graphs: Sequence[Graph], meta: dict[str, Any] | None = None) -> None:
    """Write graphs (and a JSON-able `meta` dict) to `path` atomically."""
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
    path = Path(path)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "wb") as handle:
        np.savez(handle, **arrays)
    os.replace(tmp, path)


def load_graphs(path: str | Path) -> tuple[list[Graph], dict[str, Any]]:
    """Read graphs written by `save_graphs`; returns (graphs, meta)."""
    with np.load(path, allow_pickle=False) as arrays:
        fields = {name: torch.from_numpy(arrays[name]) for name in arrays.files if name != "meta"}
        meta = json.loads(arrays["meta"].tobytes().decode()) if "meta" in arrays.files else {}
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


def cache_key(sources: Sequence[str | Path], options: dict[str, Any]) -> str:
    """Hash of the source files' identity (path, size, mtime) and the processing options."""
    digest = hashlib.sha256()
    for source in sources:
        source = Path(source)
        stat = source.stat() if source.exists() else None
        digest.update(f"{source.resolve()}|{stat.st_size if stat else -1}|"
                      f"{stat.st_mtime_ns if stat else -1}".encode())
    digest.update(json.dumps(options, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def load_meta(path: str | Path) -> dict[str, Any]:
    """Only the `meta` dict of a file written by `save_graphs` (no graph arrays are read)."""
    with np.load(path, allow_pickle=False) as arrays:
        return json.loads(arrays["meta"].tobytes().decode()) if "meta" in arrays.files else {}


def cache_path(name: str, sources: Sequence[str | Path], options: dict[str, Any]) -> Path:
    """Where `cached_graphs` keeps `name` built from these sources with these options."""
    return cache_dir() / f"{name}-{cache_key(sources, options)}.npz"


def cached_meta(name: str, sources: Sequence[str | Path],
                options: dict[str, Any]) -> dict[str, Any] | None:
    """The cached meta of `name` when it is in the cache, else None (nothing is built)."""
    path = cache_path(name, sources, options)
    return load_meta(path) if path.exists() else None


def cached_graphs(name: str, sources: Sequence[str | Path], options: dict[str, Any],
                  build: Callable[[], tuple[list[Graph], dict[str, Any]]],
                  use_cache: bool = True) -> tuple[list[Graph], dict[str, Any]]:
    """Load `name` from the cache, or `build()` it (graphs, meta) and store it."""
    path = cache_path(name, sources, options)
    if use_cache and path.exists():
        return load_graphs(path)
    graphs, meta = build()
    if use_cache:
        save_graphs(path, graphs, meta)
    return graphs, meta
