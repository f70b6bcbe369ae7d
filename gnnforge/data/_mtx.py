"""MatrixMarket files (.mtx, .mtx.gz): sparse `coordinate` graphs and dense `array` data.

Header `%%MatrixMarket matrix <coordinate|array> <real|integer|pattern> <general|symmetric|
skew-symmetric>`. Entry (i, j) (1-based) is the edge i-1 -> j-1. For symmetric and
skew-symmetric matrices only one triangle is stored, so each off-diagonal entry becomes
both directions and a diagonal entry one self-loop. Values are dropped unless
`weights=True` (then edge_data["weight"] float32; a skew-symmetric mirror is negated).
Complex and hermitian matrices are refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnforge.data._clean import CleanOptions, clean_graph
from gnnforge.data._errors import DataFormatError, names_the_file
from gnnforge.data._text import parse_flat, parse_table, read_bytes
from gnnforge.graph import Graph

__all__ = ["read_matrix_market", "read_matrix_market_array"]

_FIELDS = ("real", "integer", "pattern", "double")
_SYMMETRIES = ("general", "symmetric", "skew-symmetric")


def _header(data: bytes, path: str | Path, layout: str) -> tuple[str, str, int, list[int], int]:
    """(field, symmetry, line number after the size line, size numbers, byte offset there)."""
    first_end = data.find(b"\n")
    banner = data[: first_end if first_end >= 0 else len(data)].decode("ascii", "replace").split()
    if len(banner) != 5 or banner[0].lower() != "%%matrixmarket" or banner[1].lower() != "matrix":
        raise DataFormatError(
            path,
            "not a MatrixMarket file: the first line must be "
            f"'%%MatrixMarket matrix <layout> <field> <symmetry>', got "
            f"{' '.join(banner)!r}",
            1,
        )
    found_layout, field, symmetry = (word.lower() for word in banner[2:])
    if found_layout != layout:
        raise DataFormatError(
            path, f"expected a MatrixMarket '{layout}' file, got '{found_layout}'", 1
        )
    if field not in _FIELDS:
        raise DataFormatError(
            path, f"field '{field}' is not supported (expected one of {_FIELDS})", 1
        )
    if symmetry not in _SYMMETRIES:
        raise DataFormatError(
            path, f"symmetry '{symmetry}' is not supported (expected one of {_SYMMETRIES})", 1
        )
    number, start = 1, first_end + 1
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        line = data[start:end].strip()
        number += 1
        start = end + 1
        if line and not line.startswith(b"%"):
            try:
                sizes = [int(token) for token in line.split()]
            except ValueError:
                raise DataFormatError(path, f"bad size line {line!r}", number) from None
            expected = 3 if layout == "coordinate" else 2
            if len(sizes) != expected or min(sizes) < 0:
                raise DataFormatError(
                    path,
                    f"size line must hold {expected} non-negative integers, got {line!r}",
                    number,
                )
            return field, symmetry, number + 1, sizes, start
    raise DataFormatError(path, "missing the size line")


@names_the_file
def read_matrix_market(
    path: str | Path, *, clean: CleanOptions = CleanOptions(), weights: bool = False
) -> tuple[Graph, dict[str, Any]]:
    """Read a square `coordinate` MatrixMarket matrix as a graph (entry (i, j): edge i -> j).

    Raises:
        DataFormatError: on a bad header, a non-square matrix, an entry count that
            disagrees with the size line, or an index out of range (naming the line).
    """
    data = read_bytes(path)
    field, symmetry, first_line, (rows, cols, nnz), start = _header(data, path, "coordinate")
    if rows != cols:
        raise DataFormatError(path, f"a graph needs a square matrix, got {rows} x {cols}")
    columns = 2 if field == "pattern" else 3
    table = parse_table(
        data[start:],
        path,
        columns,
        dtype=np.int64 if field == "pattern" else np.float64,
        comments=b"%",
        first_line=first_line,
    )
    if table.shape[0] != nnz:
        raise DataFormatError(
            path, f"the size line declares {nnz} entries but {table.shape[0]} follow"
        )
    index = table[:, :2]
    if columns == 3 and not (np.isfinite(index).all() and np.array_equal(index, np.round(index))
                             and (np.abs(index) < 2**53).all()):
        raise DataFormatError(path, "row/column indices must be integers below 2**53")
    index = index.astype(np.int64) - 1
    bad = (index < 0) | (index >= rows)
    if bad.any():
        entry = int(np.nonzero(bad.any(1))[0][0])
        raise DataFormatError(
            path,
            f"index {tuple((index[entry] + 1).tolist())} outside 1..{rows}",
            first_line + entry,
        )
    src, dst = index[:, 0], index[:, 1]
    values = table[:, 2] if columns == 3 else None
    mirrored = 0
    if symmetry != "general":
        off = src != dst
        mirrored = int(off.sum())
        src, dst = np.concatenate([src, dst[off]]), np.concatenate([dst, src[off]])
        if values is not None:
            sign = -1.0 if symmetry == "skew-symmetric" else 1.0
            values = np.concatenate([values, sign * values[off]])
    edge_data = None
    if weights and values is not None:
        edge_data = {"weight": torch.from_numpy(values.astype(np.float32))}
    # Indices were range-checked above; skip Graph's second pass over them.
    graph = Graph._trusted(torch.from_numpy(src), torch.from_numpy(dst), rows, edge_data=edge_data)
    graph, drops = clean_graph(graph, clean)
    meta = {
        "format": "MatrixMarket",
        "files": [str(path)],
        "field": field,
        "symmetry": symmetry,
        "stored_entries": nnz,
        "mirrored_entries": mirrored,
        "values": "kept as edge_data['weight']"
        if edge_data
        else ("none (pattern)" if values is None else "dropped (weights=False)"),
        "drops": drops,
    }
    return graph, meta


def read_matrix_market_array(path: str | Path) -> np.ndarray:
    """Read a dense `array` MatrixMarket file (column-major) as a [rows, cols] float64 array."""
    data = read_bytes(path)
    field, symmetry, first_line, (rows, cols), start = _header(data, path, "array")
    if symmetry != "general":
        raise DataFormatError(path, f"only general dense arrays are supported, got {symmetry}")
    body = data[start:]
    values = parse_flat(body, path, dtype=np.float64, first_line=first_line)
    if values.size != rows * cols:
        raise DataFormatError(
            path,
            f"the size line declares {rows} x {cols} = {rows * cols} "
            f"values but {values.size} follow",
        )
    return values.reshape(cols, rows).T.copy()
