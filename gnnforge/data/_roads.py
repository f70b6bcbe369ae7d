"""Road networks with node coordinates: SuiteSparse MATLAB `.mat` and MatrixMarket pairs.

`.mat` (SuiteSparse layout): `Problem.A` is the sparse adjacency (entry (i, j): edge
i -> j; the usroads matrix is symmetric, so both directions are stored) and, when present,
`Problem.aux.coord` [N, 2] the coordinates, kept as node_data["pos"] float64 (lon/lat
need more than float32's 7 digits to stay metre-exact). Read with scipy.io.loadmat,
which builds arrays only and runs no code from the file, in a child process because it
can crash on a malformed one (`_mat_isolated`).

MatrixMarket pair: `NAME.mtx` plus `NAME_coord.mtx` (a dense array), as DIMACS10 ships.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnforge.data._clean import CleanOptions, clean_graph
from gnnforge.data._errors import DataFormatError, names_the_file
from gnnforge.data._mat_isolated import load_mat_problem
from gnnforge.data._mtx import read_matrix_market, read_matrix_market_array
from gnnforge.data._sparse import checked_compressed
from gnnforge.graph import Graph

__all__ = ["read_mat_graph", "read_mtx_with_coordinates"]


@names_the_file
def read_mat_graph(
    path: str | Path, *, clean: CleanOptions = CleanOptions()
) -> tuple[Graph, dict[str, Any]]:
    """Read a SuiteSparse `.mat` graph (Problem.A, optional Problem.aux.coord).

    scipy parses the file in a child process (see `_mat_isolated`: its parser can crash
    on a malformed file); the arrays it returns are checked here.

    Raises:
        DataFormatError: not a MATLAB file (or one that crashes the parser), no `Problem`
            struct, a non-square or invalid `A`, or coordinates with the wrong shape.
    """
    path = Path(path)
    parts = load_mat_problem(path)
    matrix = checked_compressed(path, "Problem.A", parts["A_data"], parts["A_indices"],
                                parts["A_indptr"], parts["A_shape"], kind="csc").tocsr()
    if matrix.shape[0] != matrix.shape[1]:
        raise DataFormatError(path, f"Problem.A must be square, got shape {matrix.shape}")
    coo = matrix.tocoo()
    node_data = {}
    meta: dict[str, Any] = {"format": "SuiteSparse .mat", "files": [str(path)]}
    meta.update({text: parts[text] for text in ("name", "kind") if text in parts})
    if "coord" in parts:
        coord = parts["coord"]
        if coord.ndim != 2 or coord.shape[0] != matrix.shape[0]:
            raise DataFormatError(path, f"aux.coord has shape {coord.shape} for "
                                  f"{matrix.shape[0]} nodes")
        node_data["pos"] = torch.from_numpy(np.ascontiguousarray(coord))
    graph = Graph(
        torch.from_numpy(coo.row.astype(np.int64)),
        torch.from_numpy(coo.col.astype(np.int64)),
        matrix.shape[0],
        node_data=node_data,
    )
    graph, meta["drops"] = clean_graph(graph, clean)
    return graph, meta


@names_the_file
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
        if not np.isfinite(coord).all():
            row = int(np.nonzero(~np.isfinite(coord).all(1))[0][0])
            raise DataFormatError(coordinates, f"non-finite coordinate in row {row}: "
                                  f"{coord[row].tolist()}")
        graph = graph.with_node_data(pos=torch.from_numpy(coord))
        meta["files"].append(str(coordinates))
    return graph, meta
