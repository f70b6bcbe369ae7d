"""TU Dortmund graph-classification sets, read straight from their zip.

Members `NAME_A.txt` (lines `u, v`, 1-based global node ids), `NAME_graph_indicator.txt`
(1-based graph id per node, non-decreasing), `NAME_graph_labels.txt` (one per graph),
and optionally `NAME_node_labels.txt`, `NAME_edge_labels.txt` (one per `_A` line) and
`NAME_node_attributes.txt` (comma-separated floats). Member paths may carry a folder
(`NAME//NAME_A.txt` in the original zips).

Per graph: node_data["node_label"] [n] int64 (or [n, k]) and node_data["x"] [n, d]
float32 from the attributes; edge_data["edge_label"]; graph_data["y"] the class index,
i.e. the position of the raw label in the sorted distinct labels (MUTAG's -1/1 become
0/1; meta["label_values"] keeps the raw values).
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnforge.data._clean import CleanOptions, clean_graph
from gnnforge.data._collection import split_union
from gnnforge.data._errors import DataFormatError, names_the_file
from gnnforge.data._limits import open_zip, read_zip_member
from gnnforge.data._progress import progress_bar
from gnnforge.data._text import line_of_row, parse_table
from gnnforge.graph import Graph

__all__ = ["read_tu_zip", "tu_name"]

_OPTIONAL = ("node_labels", "edge_labels", "node_attributes")


def tu_name(path: str | Path) -> str | None:
    """The dataset name inside a TU zip (from its `_A.txt` member), or None if not TU."""
    try:
        with open_zip(path) as archive:
            return _name_in(archive)
    except DataFormatError:
        return None


def _name_in(archive: zipfile.ZipFile) -> str | None:
    for member in archive.namelist():
        if member.endswith("_A.txt"):
            return member.rsplit("/", 1)[-1][: -len("_A.txt")]
    return None


def _member_table(archive, members, prefix, part, path, dtype=np.int64):
    name = members.get(part)
    if name is None:
        return None
    where = f"{path}[{name}]"
    data = read_zip_member(archive, name, where)
    first = data.split(b"\n", 1)[0]
    columns = first.count(b",") + 1 if first.strip() else 1
    return parse_table(data, where, columns, dtype=dtype, comments=b"", delimiter=b","), where, data


@names_the_file
def read_tu_zip(
    path: str | Path, *, clean: CleanOptions = CleanOptions(), progress: bool | None = None
) -> tuple[list[Graph], dict[str, Any]]:
    """Read a TU Dortmund zip into a list of graphs (see the module docstring).

    Raises:
        DataFormatError: a required member is missing, lengths disagree, ids are out of
            range, graph ids are not contiguous, or an edge joins two graphs (naming the
            member and line).
    """
    archive = open_zip(path)
    with archive:
        name = _name_in(archive)
        if name is None:
            raise DataFormatError(path, "no NAME_A.txt member: not a TU Dortmund dataset zip")
        members = {}
        for member in archive.namelist():
            base = member.rsplit("/", 1)[-1]
            if base.startswith(name + "_") and base.endswith(".txt"):
                members[base[len(name) + 1 : -4]] = member
        for part in ("A", "graph_indicator", "graph_labels"):
            if part not in members:
                raise DataFormatError(path, f"missing member {name}_{part}.txt")
        steps = progress_bar(total=3 + len(_OPTIONAL), desc=f"TU {name}", progress=progress)
        edges, edges_where, edges_data = _member_table(archive, members, name, "A", path)
        steps.update()
        indicator, indicator_where, indicator_data = _member_table(
            archive, members, name, "graph_indicator", path
        )
        labels, labels_where, _ = _member_table(archive, members, name, "graph_labels", path)
        steps.update(2)
        extras = {}
        for part in _OPTIONAL:
            dtype = np.float64 if part == "node_attributes" else np.int64
            extras[part] = _member_table(archive, members, name, part, path, dtype)
            steps.update()
        steps.close()
    if edges.shape[1] != 2:
        raise DataFormatError(edges_where, f"expected 2 columns 'u, v', got {edges.shape[1]}", 1)
    graph_of = indicator[:, 0]
    num_nodes = graph_of.size
    graph_ptr = _graph_ptr(graph_of, indicator_where, indicator_data)
    num_graphs = graph_ptr.size - 1
    if labels.shape[0] != num_graphs:
        raise DataFormatError(
            labels_where, f"{labels.shape[0]} graph labels for {num_graphs} graphs"
        )
    src, dst = edges[:, 0] - 1, edges[:, 1] - 1
    bad = (src < 0) | (src >= num_nodes) | (dst < 0) | (dst >= num_nodes)
    if bad.any():
        row = int(np.nonzero(bad)[0][0])
        raise DataFormatError(
            edges_where,
            f"node id {edges[row].tolist()} outside 1..{num_nodes}",
            line_of_row(edges_data, row, comments=b""),
        )
    crossing = graph_of[src] != graph_of[dst]
    if crossing.any():
        row = int(np.nonzero(crossing)[0][0])
        raise DataFormatError(
            edges_where,
            f"edge {edges[row].tolist()} joins graphs "
            f"{graph_of[src[row]]} and {graph_of[dst[row]]}",
            line_of_row(edges_data, row, comments=b""),
        )
    node_data, edge_data = _extras(extras, num_nodes, src.size)
    union = Graph(
        torch.from_numpy(src),
        torch.from_numpy(dst),
        num_nodes,
        node_data=node_data,
        edge_data=edge_data,
    )
    union, drops = clean_graph(union, clean)
    label_values, classes = np.unique(labels[:, 0], return_inverse=True)
    graphs = split_union(union, graph_ptr, {"y": torch.from_numpy(classes.astype(np.int64))})
    meta = {
        "format": "TU Dortmund zip",
        "files": [str(path)],
        "name": name,
        "label_values": label_values.tolist(),
        "num_classes": int(label_values.size),
        "members": sorted(members),
        "drops": drops,
    }
    return graphs, meta


def _graph_ptr(graph_of: np.ndarray, where: str, data: bytes) -> np.ndarray:
    if graph_of.size == 0:
        return np.zeros(1, dtype=np.int64)
    steps = np.diff(graph_of)
    if graph_of[0] != 1 or (steps < 0).any() or (steps > 1).any():
        row = 0 if graph_of[0] != 1 else int(np.nonzero((steps < 0) | (steps > 1))[0][0]) + 1
        raise DataFormatError(
            where,
            f"graph ids must start at 1 and rise by 0 or 1 from line to line, got {graph_of[row]}",
            line_of_row(data, row, comments=b""),
        )
    counts = np.bincount(graph_of - 1)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def _extras(extras, num_nodes, num_edges):
    node_data, edge_data = {}, {}
    for part, key, length, target in (
        ("node_labels", "node_label", num_nodes, node_data),
        ("node_attributes", "x", num_nodes, node_data),
        ("edge_labels", "edge_label", num_edges, edge_data),
    ):
        if extras[part] is None:
            continue
        table, where, _ = extras[part]
        if table.shape[0] != length:
            raise DataFormatError(where, f"{table.shape[0]} rows, expected {length}")
        values = table[:, 0] if table.shape[1] == 1 else table
        values = values.astype(np.float32) if part == "node_attributes" else values
        if part == "node_attributes" and values.ndim == 1:
            values = values[:, None]
        target[key] = torch.from_numpy(np.ascontiguousarray(values))
    return node_data, edge_data
