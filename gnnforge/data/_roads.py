"""Road networks with node coordinates: SuiteSparse MATLAB `.mat` and MatrixMarket pairs.

`.mat` (SuiteSparse layout): `Problem.A` is the sparse adjacency (entry (i, j): edge
i -> j; the usroads matrix is symmetric, so both directions are stored) and, when present,
`Problem.aux.coord` [N, 2] the coordinates, kept as node_data["pos"] float64 (lon/lat
need more than float32's 7 digits to stay metre-exact). Read with scipy.io.loadmat,
which builds arrays only and runs no code from the file.

MatrixMarket pair: `NAME.mtx` plus `NAME_coord.mtx` (a dense array), as DIMACS10 ships.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.io
import scipy.sparse
import torch

from gnnforge.data._clean import CleanOptions, clean_graph
from gnnforge.data._errors import DataFormatError
from gnnforge.data._mtx import read_matrix_market, read_matrix_market_array
from gnnforge.data._sparse import checked_matrix
from gnnforge.graph import Graph

__all__ = ["read_mat_graph", "read_mtx_with_coordinates"]


def _field(struct: np.ndarray, name: str, path: Path) -> Any:
    if struct.dtype.names is None or name not in struct.dtype.names:
        raise DataFormatError(path, f"missing field {name!r} (fields: {struct.dtype.names})")
    return struct[name][0, 0] if struct.ndim == 2 else struct[name]


def read_mat_graph(
    path: str | Path, *, clean: CleanOptions = CleanOptions()
) -> tuple[Graph, dict[str, Any]]:
    """Read a SuiteSparse `.mat` graph (Problem.A, optional Problem.aux.coord).

    Raises:
        DataFormatError: not a MATLAB file, no `Problem` struct, a non-square or dense
            `A`, or coordinates with the wrong number of rows.
    """
    path = Path(path)
    try:
        contents = scipy.io.loadmat(path)
    except (ValueError, TypeError, OSError, NotImplementedError) as error:
        raise DataFormatError(path, f"not a readable MATLAB file ({error})") from error
    if "Problem" not in contents:
        variables = sorted(k for k in contents if not k.startswith("__"))
        raise DataFormatError(path, f"no 'Problem' struct (variables: {variables})")
    problem = contents["Problem"]
    matrix = _field(problem, "A", path)
    if not scipy.sparse.issparse(matrix):
        raise DataFormatError(path, f"Problem.A must be a sparse matrix, got "
                              f"{type(matrix).__name__}")
    matrix = checked_matrix(path, "Problem.A", matrix)
    if matrix.shape[0] != matrix.shape[1]:
        raise DataFormatError(path, f"Problem.A must be square, got shape {matrix.shape}")
    coo = matrix.tocoo()
    node_data = {}
    meta: dict[str, Any] = {"format": "SuiteSparse .mat", "files": [str(path)]}
    for text_field in ("name", "kind"):
        if problem.dtype.names and text_field in problem.dtype.names:
            meta[text_field] = str(np.squeeze(_field(problem, text_field, path)))
    if problem.dtype.names and "aux" in problem.dtype.names:
        aux = _field(problem, "aux", path)
        if aux.dtype.names and "coord" in aux.dtype.names:
            coord = np.asarray(_field(aux, "coord", path), dtype=np.float64)
            if coord.shape[0] != matrix.shape[0]:
                raise DataFormatError(
                    path, f"aux.coord has {coord.shape[0]} rows for {matrix.shape[0]} nodes"
                )
            node_data["pos"] = torch.from_numpy(np.ascontiguousarray(coord))
    graph = Graph(
        torch.from_numpy(coo.row.astype(np.int64)),
        torch.from_numpy(coo.col.astype(np.int64)),
        matrix.shape[0],
        node_data=node_data,
    )
    graph, meta["drops"] = clean_graph(graph, clean)
    return graph, meta


def read_mtx_with_coordinates(
    path: str | Path, coordinates: str | Path | None, *, clean: CleanOptions = CleanOptions()
) -> tuple[Graph, dict[str, Any]]:
    """A MatrixMarket graph plus, when given, its coordinate array as node_data["pos"]."""
    graph, meta = read_matrix_market(path, clean=clean)
    if coordinates is not None:
        coord = read_matrix_market_array(coordinates)
        if coord.shape[0] != graph.num_nodes:
            raise DataFormatError(
                coordinates, f"{coord.shape[0]} coordinate rows for {graph.num_nodes} nodes"
            )
        graph = graph.with_node_data(pos=torch.from_numpy(coord))
        meta["files"].append(str(coordinates))
    return graph, meta
