"""SNAP-style edge lists and two-column CSV edge files (txt, csv, gz).

One edge `u v` (or `u,v`, optionally a third weight column) per line. Lines starting with
`#` or `%` are comments; a `# Nodes: N ...` comment declares the node count. A first line
of column names only (a CSV header such as `id_1,id_2`, no number in it) is skipped and
kept in meta["header"]. A first line `N M`
(N >= 1) followed by exactly M edge lines is read as a size header (the email-Enron copy in
shared/datasets has one in place of SNAP's comments).

Node ids: kept as they are by default, with num_nodes = max id + 1 (or the declared N
when larger; unused ids become isolated nodes and the stats count them). With
`relabel=True` the distinct ids are mapped to 0..n-1 in ascending order and the original
id of each node is kept in node_data["original_id"].
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnforge.data._clean import CleanOptions, clean_graph
from gnnforge.data._errors import DataFormatError, names_the_file
from gnnforge.data._text import line_of_row, parse_table, read_bytes
from gnnforge.graph import Graph

__all__ = ["read_edge_list"]

_DECLARED_NODES = re.compile(rb"(?m)^[ \t]*#.*?\bNodes:\s*(\d+)")
_NUMBER = re.compile(rb"^[+-]?\d+(\.\d*)?([eE][+-]?\d+)?$")


@names_the_file
def read_edge_list(
    path: str | Path, *, clean: CleanOptions = CleanOptions(), relabel: bool = False
) -> tuple[Graph, dict[str, Any]]:
    """Read an edge list into a Graph (edge u -> v per line).

    Args:
        path: text or gzip file.
        clean: symmetrize / dedup / self-loop handling (see `CleanOptions`).
        relabel: map the distinct ids to 0..n-1 (see the module docstring).

    Returns:
        (graph, meta). A third column becomes edge_data["weight"] [E] float32. meta holds
        the format, the header seen, the declared node count and the cleaning counts.

    Raises:
        DataFormatError: naming the file and line of the first malformed row, a negative
            id, or ids beyond a declared node count.
    """
    data = read_bytes(path)
    first_line, start, header = _skip_header(data, path)
    body = data[start:]
    delimiter = b"," if b"," in _first_data_line(body) else None
    columns = len(_split(_first_data_line(body), delimiter)) or 2
    if columns not in (2, 3):
        raise DataFormatError(
            path, f"expected 2 or 3 columns (src, dst[, weight]), got {columns}", first_line
        )
    table = parse_table(
        body,
        path,
        columns,
        dtype=np.int64 if columns == 2 else np.float64,
        delimiter=delimiter,
        first_line=first_line,
    )
    ends = table[:, :2]
    if columns == 3:
        if not np.all(ends == np.round(ends)):
            row = int(np.nonzero((ends != np.round(ends)).any(1))[0][0])
            raise DataFormatError(
                path, "node ids must be integers", line_of_row(body, row, first_line)
            )
        if ends.size and np.abs(ends).max() >= 2**53:
            row = int(np.nonzero((np.abs(ends) >= 2**53).any(1))[0][0])
            raise DataFormatError(
                path, f"node id {np.abs(ends[row]).max():.17g} reaches 2**53: a weighted "
                "list is parsed as floats, which cannot hold such ids exactly",
                line_of_row(body, row, first_line),
            )
        ends = ends.astype(np.int64)
        weights = table[:, 2].astype(np.float32)
        if not np.isfinite(weights).all():
            row = int(np.nonzero(~np.isfinite(weights))[0][0])
            raise DataFormatError(
                path, f"non-finite weight {table[row, 2]} (as float32)",
                line_of_row(body, row, first_line)
            )
    declared = _declared_nodes(data, header, table.shape[0])
    if declared is not None and declared > np.iinfo(np.int64).max:
        raise DataFormatError(path, f"the file declares {declared} nodes, more than an int64 "
                                    f"count holds (2**63 - 1)")
    src, dst = np.ascontiguousarray(ends[:, 0]), np.ascontiguousarray(ends[:, 1])
    if src.size and min(src.min(), dst.min()) < 0:
        row = int(np.nonzero((src < 0) | (dst < 0))[0][0])
        raise DataFormatError(
            path, f"negative node id: {src[row]} {dst[row]}", line_of_row(body, row, first_line)
        )
    node_data = {}
    if relabel:
        ids, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
        src, dst = inverse[: src.size], inverse[src.size :]
        node_data["original_id"] = torch.from_numpy(ids)
        num_nodes = int(ids.size)
    else:
        num_nodes = int(max(src.max(), dst.max())) + 1 if src.size else 0
        if num_nodes > np.iinfo(np.int64).max:  # max id + 1 must still be an int64 count
            row = int(np.nonzero((src == num_nodes - 1) | (dst == num_nodes - 1))[0][0])
            raise DataFormatError(
                path, f"node id {num_nodes - 1} leaves no int64 room for num_nodes = id + 1; "
                "pass relabel=True to compact ids", line_of_row(body, row, first_line))
        if declared is not None:
            if declared < num_nodes:
                raise DataFormatError(
                    path,
                    f"the file declares {declared} nodes but uses id "
                    f"{num_nodes - 1}; pass relabel=True to compact ids",
                )
            num_nodes = declared
    edge_data = (
        {"weight": torch.from_numpy(weights)} if columns == 3 else None
    )
    # Ids were checked above (integers, >= 0, < num_nodes), so skip Graph's second pass.
    graph = Graph._trusted(
        torch.from_numpy(src),
        torch.from_numpy(dst),
        num_nodes,
        node_data=node_data,
        edge_data=edge_data,
    )
    graph, drops = clean_graph(graph, clean)
    meta = {
        "format": "edge list",
        "files": [str(path)],
        "header": header,
        "declared_nodes": declared,
        "relabel": relabel,
        "drops": drops,
        "weighted": columns == 3,
    }
    return graph, meta


def _split(line: bytes, delimiter: bytes | None) -> list[bytes]:
    return (line.replace(delimiter, b" ") if delimiter else line).split()


def _lines(data: bytes, limit: int):
    """Yield (line number, start offset, line) for the first `limit` lines."""
    start = 0
    for number in range(1, limit + 1):
        if start >= len(data):
            return
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        yield number, start, data[start:end]
        start = end + 1


def _is_comment(line: bytes) -> bool:
    stripped = line.strip()
    return not stripped or stripped[:1] in (b"#", b"%")


def _first_data_line(data: bytes) -> bytes:
    for _, _, line in _lines(data, 10_000):
        if not _is_comment(line):
            return line
    return b""


def _skip_header(data: bytes, path: str | Path) -> tuple[int, int, str | None]:
    """(line number and offset where edges start, the header line kept for meta)."""
    for number, start, line in _lines(data, 10_000):
        if _is_comment(line):
            continue
        tokens = _split(line, b"," if b"," in line else None)
        if tokens and not any(_NUMBER.match(token) for token in tokens):
            return number + 1, start + len(line) + 1, line.decode("utf-8", "replace").strip()
        if len(tokens) == 2 and _is_size_header(data, start + len(line) + 1, tokens):
            return number + 1, start + len(line) + 1, line.decode().strip()
        return number, start, None
    return 1, 0, None


def _is_size_header(data: bytes, rest: int, tokens: list[bytes]) -> bool:
    if not (tokens[0].isdigit() and tokens[1].isdigit()) or int(tokens[0]) < 1:
        return False
    declared_edges = int(tokens[1])
    body = data[rest:]
    count = body.count(b"\n") + (1 if body and not body.endswith(b"\n") else 0)
    return count == declared_edges


def _declared_nodes(data: bytes, header: str | None, rows: int) -> int | None:
    match = _DECLARED_NODES.search(data[:65536])
    if match:
        return int(match.group(1))
    if header is not None and re.fullmatch(r"\d+\s+\d+", header):
        return int(header.split()[0])
    return None
