"""How the layers of this package reach `gnnforge.ops`: neighbour reductions and inputs.

Every layer aggregates through these few functions so that one place knows the kernel
protocol (`num_src_nodes`, `num_dst_nodes`, `coo()`, `csr()`) shared by a full `Graph`, a
packed `GraphBatch` and a sampler's bipartite block, and the DGL convention that the
destination nodes of a block are its first `num_dst_nodes` source nodes.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from gnnforge import ops

__all__ = ["check_node_input", "dst_part", "reduce_edges", "reduce_neighbors",
           "weighted_neighbor_sum"]

_REDUCE = {"sum": ops.copy_u_sum, "add": ops.copy_u_sum, "mean": ops.copy_u_mean,
           "max": ops.copy_u_max}


def check_node_input(layer: str, graph: Any, x: Tensor) -> None:
    """Raise ValueError unless `x` has one row per source node of `graph`."""
    if not hasattr(graph, "num_src_nodes") or not hasattr(graph, "csr"):
        raise TypeError(f"{layer}: graph must be a gnnforge Graph, GraphBatch or sampler block, "
                        f"got {type(graph).__name__}")
    if not isinstance(x, Tensor) or x.dim() < 2:
        shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"{layer}: x must be a [num_src_nodes, F] tensor, got {shape}")
    if x.shape[0] != graph.num_src_nodes:
        raise ValueError(f"{layer}: x has {x.shape[0]} rows but the graph has "
                         f"{graph.num_src_nodes} source nodes")


def dst_part(graph: Any, x: Tensor) -> Tensor:
    """[num_dst, F] rows of the destination nodes (the first num_dst source nodes)."""
    num_dst = graph.num_dst_nodes
    return x if num_dst == x.shape[0] else x[:num_dst]


def reduce_neighbors(graph: Any, x: Tensor, reduce: str) -> Tensor:
    """[num_dst, F] reduce over in-edges (u, v) of x[u]; 0 for nodes without in-edges."""
    return _REDUCE[reduce](graph, x)


def reduce_edges(graph: Any, messages: Tensor) -> Tensor:
    """[num_dst, F] sum over in-edges e of messages[e] (edge-id order)."""
    return ops.copy_e_sum(graph, messages)


def weighted_neighbor_sum(graph: Any, x: Tensor, weight: Tensor) -> Tensor:
    """[num_dst, F] sum over in-edges e = (u, v) of weight[e] * x[u]; weight [E] or [E, 1]."""
    return ops.u_mul_e_sum(graph, x, weight.reshape(-1, 1) if weight.dim() == 1 else weight)
