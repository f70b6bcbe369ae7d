"""1D vertex partitions: each vertex, with its in-edges, is owned by one process."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from gnnforge._compat import require
from gnnforge.graph import Graph

__all__ = ["edge_cut", "partition_nodes"]


def partition_nodes(graph: Graph, num_parts: int, method: str = "random", seed: int = 0) -> Tensor:
    """Assign every vertex to one of `num_parts` processes.

    Args:
        graph: the graph (edge direction is ignored for METIS).
        num_parts: P >= 1.
        method: "random" (balanced: a seeded permutation dealt round-robin) or "metis"
            (pymetis k-way on the symmetrised simple graph: fewer cross edges, so less
            communication in cooperative minibatching).
        seed: seed of the random permutation (METIS is deterministic).

    Returns:
        owner: [N] int64 in [0, num_parts).

    Raises:
        ValueError: on num_parts < 1 or an unknown method.
        ImportError: for "metis" without pymetis (extra `dist`).
    """
    if not isinstance(num_parts, int) or num_parts < 1:
        raise ValueError(f"num_parts must be an int >= 1, got {num_parts!r}")
    if method == "random":
        generator = torch.Generator().manual_seed(seed)
        owner = torch.empty(graph.num_nodes, dtype=torch.int64)
        owner[torch.randperm(graph.num_nodes, generator=generator)] = \
            torch.arange(graph.num_nodes) % num_parts
        return owner
    if method == "metis":
        return _metis(graph, num_parts)
    raise ValueError(f"method must be 'random' or 'metis', got {method!r}")


def _metis(graph: Graph, num_parts: int) -> Tensor:
    pymetis = require("pymetis", "dist")
    if num_parts == 1 or graph.num_nodes == 0:
        return torch.zeros(graph.num_nodes, dtype=torch.int64)
    simple = graph.to_undirected(dedup=True).remove_self_loops()
    rowptr, col, _ = simple.csr(torch.int64)
    adjacency = pymetis.CSRAdjacency(rowptr.numpy().astype(np.int64),
                                     col.numpy().astype(np.int64))
    _, membership = pymetis.part_graph(num_parts, adjacency=adjacency)
    return torch.as_tensor(np.asarray(membership), dtype=torch.int64)


def edge_cut(graph: Graph, owner: Tensor) -> int:
    """Number of edges whose endpoints have different owners."""
    if owner.shape != (graph.num_nodes,):
        raise ValueError(f"owner must have shape ({graph.num_nodes},), got {tuple(owner.shape)}")
    return int((owner[graph.src] != owner[graph.dst]).sum())
