"""MUSAE social graphs (edges CSV, target CSV, features JSON) and karateclub graph sets.

MUSAE (Rozemberczki et al.): `*_edges.csv` with header `id_1,id_2`, one undirected edge
per row stored once (kept as one directed edge u -> v unless `symmetrize`);
`*_target.csv` with an `id` column and a label column (the last one unless named);
`*.json` mapping a node id to its list of active binary feature ids.

Features: `features="ids"` (default) gives node_data["feature_ids"] [N, K] int64, the
active ids padded with -1 to the longest list (facebook: dense would be 22,470 x 4,714
floats = 424 MB); "dense" gives x [N, F] float32 0/1; "none" skips them.

karateclub graph-level sets (reddit10k): a JSON object mapping graph id "0".."G-1" to an
edge list [[u, v], ...] with local ids, plus a target CSV `id,target`. A graph's node
count is its largest id + 1 (an edge list cannot name isolated nodes).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnforge.data._arrays import sorted_unique
from gnnforge.data._clean import CleanOptions, clean_graph
from gnnforge.data._collection import split_union
from gnnforge.data._edgelist import read_edge_list
from gnnforge.data._errors import DataFormatError, names_the_file
from gnnforge.data._limits import check_dense_size
from gnnforge.data._progress import progress_bar
from gnnforge.data._text import read_bytes
from gnnforge.graph import Graph

__all__ = ["read_graph_json", "read_musae", "read_target_csv"]

_FEATURE_CHOICES = ("ids", "dense", "none")


def read_target_csv(
    path: str | Path, column: str | None = None
) -> tuple[np.ndarray, np.ndarray, list]:
    """(ids, class index per row, class values) from a CSV with an `id` column.

    The label column is `column`, else the last one. Integer labels keep their values as
    classes; other labels become indices into their sorted distinct values.
    """
    try:
        text = read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataFormatError(path, f"not UTF-8 text ({error})") from error
    try:
        return _read_target_rows(path, csv.reader(io.StringIO(text)), column)
    except csv.Error as error:
        raise DataFormatError(path, f"malformed CSV ({error})") from error


def _read_target_rows(
    path: str | Path, reader: Any, column: str | None
) -> tuple[np.ndarray, np.ndarray, list]:
    header = next(reader, None)
    if not header or "id" not in header:
        raise DataFormatError(path, f"expected a header with an 'id' column, got {header}", 1)
    label_column = (
        header.index(column) if column is not None and column in header else len(header) - 1
    )
    if column is not None and column not in header:
        raise DataFormatError(path, f"no column {column!r} in header {header}", 1)
    id_column = header.index("id")
    ids, raw = [], []
    for number, row in enumerate(reader, start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise DataFormatError(path, f"{len(row)} fields, header has {len(header)}", number)
        try:
            ids.append(int(row[id_column]))
        except ValueError:
            raise DataFormatError(
                path, f"id {row[id_column]!r} is not an integer", number
            ) from None
        if not 0 <= ids[-1] < 2**63:
            raise DataFormatError(path, f"id {ids[-1]} outside 0..2**63-1", number)
        raw.append(row[label_column])
    try:
        values = np.asarray([int(v) for v in raw], dtype=np.int64)
        return np.asarray(ids, dtype=np.int64), values, sorted(set(values.tolist()))
    except (ValueError, OverflowError):  # not all int64 labels: classes by sorted value
        classes, index = np.unique(np.asarray(raw), return_inverse=True)
        return np.asarray(ids, dtype=np.int64), index.astype(np.int64), classes.tolist()


def _scatter_labels(path, ids, labels, num_nodes) -> np.ndarray:
    if ids.size != num_nodes or np.any(np.sort(ids) != np.arange(num_nodes)):
        raise DataFormatError(
            path,
            f"expected each id 0..{num_nodes - 1} exactly once, got "
            f"{ids.size} rows with ids {ids.min() if ids.size else None}.."
            f"{ids.max() if ids.size else None}",
        )
    out = np.empty(num_nodes, dtype=np.int64)
    out[ids] = labels
    return out


def _read_feature_json(path, num_nodes, features):
    try:
        table = json.loads(read_bytes(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DataFormatError(path, f"invalid JSON ({error})") from error
    if not isinstance(table, dict):
        raise DataFormatError(path, "expected an object mapping node id -> feature id list")
    try:
        nodes = np.asarray([int(key) for key in table], dtype=np.int64)
        lists = [np.asarray(value, dtype=np.int64) for value in table.values()]
    except (TypeError, ValueError, OverflowError) as error:
        raise DataFormatError(
            path, f"node ids and feature ids must be integers within int64 ({error})"
        ) from error
    if nodes.size and (nodes.min() < 0 or nodes.max() >= num_nodes):
        raise DataFormatError(path, f"node id outside 0..{num_nodes - 1}")
    counts = np.asarray([v.size for v in lists], dtype=np.int64)
    flat = np.concatenate(lists) if lists else np.zeros(0, np.int64)
    if flat.size and flat.min() < 0:
        raise DataFormatError(path, f"negative feature id {flat.min()}")
    width = int(flat.max()) + 1 if flat.size else 0
    rows = np.repeat(nodes, counts)
    info = {
        "feature_dim": width,
        "feature_nnz": int(flat.size),
        "nodes_without_features": int(num_nodes - sorted_unique(rows).size),
    }
    if features == "none":
        return {}, info
    if features == "dense":
        check_dense_size(path, "features", (num_nodes, width), np.float32)
        x = np.zeros((num_nodes, width), dtype=np.float32)
        x[rows, flat] = 1.0
        return {"x": torch.from_numpy(x)}, info
    longest = int(counts.max()) if counts.size else 0
    padded = np.full((num_nodes, longest), -1, dtype=np.int64)
    slot = np.arange(flat.size) - np.repeat(np.cumsum(counts) - counts, counts)
    padded[rows, slot] = flat
    return {"feature_ids": torch.from_numpy(padded)}, info


@names_the_file
def read_musae(
    edges: str | Path,
    target: str | Path | None = None,
    features_json: str | Path | None = None,
    *,
    clean: CleanOptions = CleanOptions(),
    features: str = "ids",
    target_column: str | None = None,
) -> tuple[Graph, dict[str, Any]]:
    """Read a MUSAE graph: edges, optional labels (node_data["y"]) and features.

    Raises:
        DataFormatError: malformed rows (file and line), ids that do not cover 0..N-1
            exactly once in the target file, or bad feature JSON.
    """
    if features not in _FEATURE_CHOICES:
        raise ValueError(f"features must be one of {_FEATURE_CHOICES}, got {features!r}")
    graph, edge_meta = read_edge_list(edges)
    meta: dict[str, Any] = {"edges_header": edge_meta["header"]}
    num_nodes = graph.num_nodes
    node_data: dict[str, torch.Tensor] = {}
    files = [str(edges)]
    if target is not None:
        ids, labels, classes = read_target_csv(target, target_column)
        num_nodes = max(num_nodes, int(ids.max()) + 1 if ids.size else 0)
        node_data["y"] = torch.from_numpy(_scatter_labels(target, ids, labels, num_nodes))
        meta["classes"], meta["num_classes"] = classes, len(classes)
        files.append(str(target))
    if features_json is not None:
        # Read even for features="none": the feature width and counts go into meta.
        data, info = _read_feature_json(features_json, num_nodes, features)
        if features != "none":
            node_data.update(data)
        meta.update(info)
        files.append(str(features_json))
    graph = Graph(graph.src, graph.dst, num_nodes, node_data=node_data)
    graph, meta["drops"] = clean_graph(graph, clean)
    meta.update(format="MUSAE", files=files)
    return graph, meta


@names_the_file
def read_graph_json(
    graphs: str | Path,
    target: str | Path | None = None,
    *,
    clean: CleanOptions = CleanOptions(),
    progress: bool | None = None,
) -> tuple[list[Graph], dict[str, Any]]:
    """Read a karateclub graph-level set (graph_data["y"] from the target CSV).

    Raises:
        DataFormatError: invalid JSON, graph ids that are not 0..G-1, negative node ids,
            edges that are not pairs, or target ids that do not match the graphs.
    """
    try:
        table = json.loads(read_bytes(graphs))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DataFormatError(graphs, f"invalid JSON ({error})") from error
    if not isinstance(table, dict):
        raise DataFormatError(graphs, "expected an object mapping graph id -> edge list")
    try:
        order = sorted(table, key=int)
    except ValueError as error:
        raise DataFormatError(graphs, f"graph ids must be integers ({error})") from error
    if [int(key) for key in order] != list(range(len(order))):
        raise DataFormatError(graphs, f"graph ids must be 0..{len(order) - 1}")
    sizes, pieces = [], []
    for key in progress_bar(order, desc="graphs", progress=progress):
        edges = np.asarray(table[key], dtype=np.int64)
        if edges.size == 0:
            edges = edges.reshape(0, 2)
        if edges.ndim != 2 or edges.shape[1] != 2:
            raise DataFormatError(graphs, f"graph {key}: edges must be [u, v] pairs")
        if edges.size and edges.min() < 0:
            raise DataFormatError(graphs, f"graph {key}: negative node id {edges.min()}")
        sizes.append(int(edges.max()) + 1 if edges.size else 0)
        pieces.append(edges)
    graph_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    shift = np.repeat(graph_ptr[:-1], [p.shape[0] for p in pieces])
    edges = np.concatenate(pieces) if pieces else np.zeros((0, 2), np.int64)
    union = Graph(
        torch.from_numpy(edges[:, 0] + shift),
        torch.from_numpy(edges[:, 1] + shift),
        int(graph_ptr[-1]),
    )
    union, drops = clean_graph(union, clean)
    graph_data, meta = (
        {},
        {"format": "karateclub graph JSON", "files": [str(graphs)], "drops": drops},
    )
    if target is not None:
        ids, labels, classes = read_target_csv(target)
        graph_data["y"] = torch.from_numpy(_scatter_labels(target, ids, labels, len(order)))
        meta.update(classes=classes, num_classes=len(classes))
        meta["files"].append(str(target))
    return split_union(union, graph_ptr, graph_data), meta
