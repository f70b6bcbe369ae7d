"""npz graph files: gnn-benchmark (Shchur et al.), GraphGallery, and plain edge arrays.

Members are read one by one from the zip. Plain arrays go through numpy with
`allow_pickle=False`; an object-array member (GraphGallery stores scipy matrices that
way) is unpickled by the restricted unpickler, never by numpy's pickle path.

Features: `features="dense"` (default) stores x [N, F] float32 as PyG does;
`features="none"` skips them (the feature width is still reported in meta). Masks are
not stored in these files; none are invented.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnforge.data._clean import CleanOptions, clean_graph
from gnnforge.data._errors import DataFormatError, names_the_file
from gnnforge.data._limits import (check_dense_size, declared_npy_bytes, open_zip,
                                   read_zip_member)
from gnnforge.data._npy_header import NPY_HEADER_ERRORS, read_npy_header
from gnnforge.data._safe_pickle import safe_loads
from gnnforge.data._sparse import checked_compressed, checked_matrix
from gnnforge.graph import Graph

__all__ = ["npz_kind", "read_graph_npz", "read_npz_members"]

_FEATURE_CHOICES = ("dense", "none")


def read_npz_members(path: str | Path) -> dict[str, Any]:
    """Every member of an npz file; object arrays are unpickled with the restricted unpickler."""
    archive = open_zip(path, "an npz (zip) file")
    members = {}
    with archive:
        for name in archive.namelist():
            key = name.removesuffix(".npy")
            where = f"{path}[{name}]"
            members[key] = _read_member(read_zip_member(archive, name, where), where)
    return members


def _read_member(raw: bytes, where: str) -> Any:
    handle = io.BytesIO(raw)
    try:
        shape, fortran, dtype = read_npy_header(handle)
    except NPY_HEADER_ERRORS as error:
        raise DataFormatError(where, f"not an .npy array ({type(error).__name__}: {error})") \
            from error
    if dtype.hasobject:
        value = safe_loads(raw[handle.tell() :], where)
        return value.item() if isinstance(value, np.ndarray) and value.shape == () else value
    _check_data_size(shape, dtype, len(raw) - handle.tell(), where)
    handle.seek(0)
    try:
        return np.lib.format.read_array(handle, allow_pickle=False)
    except (ValueError, EOFError, OverflowError) as error:
        raise DataFormatError(where, f"unreadable array ({error})") from error


def _check_data_size(shape: tuple[int, ...], dtype: np.dtype, present: int, where: str) -> None:
    """A header must not declare more data than the member holds (`declared_npy_bytes`)."""
    declared = declared_npy_bytes(shape, dtype, where)
    if declared > present:
        raise DataFormatError(where, f"the array header declares shape {shape} of {dtype} "
                                     f"({declared:,} bytes) but the member holds {present:,}")


def npz_kind(members: dict[str, Any]) -> str | None:
    """'gnn-benchmark', 'graphgallery', 'edge-arrays' or None, from the member names."""
    if {"adj_data", "adj_indices", "adj_indptr", "adj_shape"} <= members.keys():
        return "gnn-benchmark"
    if {"adj_matrix", "node_label"} <= members.keys():
        return "graphgallery"
    if {"src", "dst", "num_nodes"} <= members.keys():
        return "edge-arrays"
    return None


@names_the_file
def read_graph_npz(
    path: str | Path, *, clean: CleanOptions = CleanOptions(), features: str = "dense"
) -> tuple[Graph, dict[str, Any]]:
    """Read a gnn-benchmark, GraphGallery or edge-array npz (kind sniffed from members).

    Node data: x [N, F] float32 (features="dense"), y [N] int64 labels. The adjacency
    entry (i, j) is the edge i -> j, as stored (not symmetrised unless asked).

    Raises:
        DataFormatError: unknown member layout, malformed matrices, mismatched lengths,
            or a pickle member that asks for anything but numpy/scipy types.
    """
    if features not in _FEATURE_CHOICES:
        raise ValueError(f"features must be one of {_FEATURE_CHOICES}, got {features!r}")
    members = read_npz_members(path)
    kind = npz_kind(members)
    if kind is None:
        raise DataFormatError(
            path,
            f"unknown npz layout with members {sorted(members)}; expected "
            "gnn-benchmark (adj_data, ...), GraphGallery (adj_matrix, "
            "node_label) or edge arrays (src, dst, num_nodes)",
        )
    meta: dict[str, Any] = {"format": f"npz ({kind})", "files": [str(path)]}
    if kind == "edge-arrays":
        graph = Graph(members["src"], members["dst"], int(members["num_nodes"]))
    else:
        adj, attr, labels = _parts(path, kind, members)
        if adj.shape[0] != adj.shape[1]:
            raise DataFormatError(path, f"adjacency must be square, got {adj.shape}")
        node_data = {}
        if labels is not None:
            if labels.shape != (adj.shape[0],):
                raise DataFormatError(
                    path, f"labels have shape {labels.shape} for {adj.shape[0]} nodes"
                )
            node_data["y"] = torch.from_numpy(labels.astype(np.int64))
            meta["num_classes"] = int(labels.max()) + 1 if labels.size else 0
        if attr is not None:
            if attr.shape[0] != adj.shape[0]:
                raise DataFormatError(
                    path, f"features have {attr.shape[0]} rows for {adj.shape[0]} nodes"
                )
            meta["feature_dim"] = int(attr.shape[1])
            meta["feature_nnz"] = int(attr.nnz)
            if features == "dense":
                check_dense_size(path, "features", attr.shape, np.float32)
                node_data["x"] = torch.from_numpy(attr.toarray().astype(np.float32))
        coo = adj.tocoo()
        graph = Graph(
            torch.from_numpy(coo.row.astype(np.int64)),
            torch.from_numpy(coo.col.astype(np.int64)),
            adj.shape[0],
            node_data=node_data,
        )
    graph, meta["drops"] = clean_graph(graph, clean)
    return graph, meta


def _parts(path, kind, members):
    if kind == "gnn-benchmark":
        adj = checked_compressed(path, "adjacency", members["adj_data"], members["adj_indices"],
                                 members["adj_indptr"], members["adj_shape"])
        attr = None
        if "attr_data" in members:
            attr = checked_compressed(path, "features", members["attr_data"],
                                      members["attr_indices"], members["attr_indptr"],
                                      members.get("attr_shape"))
        return adj, attr, members.get("labels")
    adj = checked_matrix(path, "adj_matrix", members["adj_matrix"])
    attr = (
        checked_matrix(path, "node_attr", members["node_attr"])
        if members.get("node_attr") is not None
        else None
    )
    return adj, attr, np.asarray(members["node_label"])
