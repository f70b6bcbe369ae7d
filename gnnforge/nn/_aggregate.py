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

__all__ = ["check_aggr", "check_graph_input", "check_node_input", "dst_part", "edge_weight_of",
           "reduce_edges", "reduce_neighbors", "weighted_neighbor_sum"]

EDGE_WEIGHT_KEY = "edge_weight"  # PyG's attribute name; Graph.from_pyg keeps it

_REDUCE = {"sum": ops.copy_u_sum, "add": ops.copy_u_sum, "mean": ops.copy_u_mean,
           "max": ops.copy_u_max}


def check_aggr(layer: str, aggr: str, allowed: tuple[str, ...] = ("sum", "mean", "max")) -> str:
    """`aggr` as given, after checking it is one of `allowed` or 'add' (PyG's name for sum)."""
    names = allowed + ("add",) if "sum" in allowed else allowed
    if aggr not in names:
        raise ValueError(f"{layer}: aggr must be one of {names}, got {aggr!r}")
    return aggr


def check_graph_input(layer: str, graph: Any) -> None:
    """Raise TypeError unless `graph` is a Graph, GraphBatch or block (the kernel protocol)."""
    if not hasattr(graph, "num_src_nodes") or not hasattr(graph, "csr"):
        raise TypeError(f"{layer}: graph must be a gnnforge Graph, GraphBatch or sampler block, "
                        f"got {type(graph).__name__}")


def check_node_input(layer: str, graph: Any, x: Tensor) -> None:
    """Raise ValueError unless `x` has one row per source node of `graph`."""
    check_graph_input(layer, graph)
    if not isinstance(x, Tensor) or x.dim() < 2:
        shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"{layer}: x must be a [num_src_nodes, F] tensor, got {shape}")
    if x.shape[0] != graph.num_src_nodes:
        raise ValueError(f"{layer}: x has {x.shape[0]} rows but the graph has "
                         f"{graph.num_src_nodes} source nodes")


def edge_weight_of(layer: str, graph: Any, edge_weight: Tensor | None) -> Tensor | None:
    """The [E] edge weights a layer uses: `edge_weight` if given, else the graph's
    `edge_data["edge_weight"]` (what `Graph.from_pyg` makes of PyG's `data.edge_weight`),
    else None (every edge weighs 1).

    Raises:
        ValueError: when the weights are not one floating value per edge.
    """
    if edge_weight is None:
        edge_weight = getattr(graph, "edge_data", {}).get(EDGE_WEIGHT_KEY)
        if edge_weight is None:
            return None
    if not isinstance(edge_weight, Tensor) or not edge_weight.is_floating_point():
        got = edge_weight.dtype if isinstance(edge_weight, Tensor) else type(edge_weight).__name__
        raise ValueError(f"{layer}: edge_weight must be a floating tensor, got {got}")
    if edge_weight.dim() == 2 and edge_weight.shape[1] == 1:
        edge_weight = edge_weight[:, 0]
    if edge_weight.shape != (graph.num_edges,):
        raise ValueError(f"{layer}: edge_weight must have shape [num_edges={graph.num_edges}], "
                         f"got {tuple(edge_weight.shape)}")
    return edge_weight


def dst_part(graph: Any, x: Tensor) -> Tensor:
    """[num_dst, F] rows of the destination nodes (the first num_dst source nodes)."""
    num_dst = graph.num_dst_nodes
    return ops.leading_rows(x, num_dst)


def reduce_neighbors(graph: Any, x: Tensor, reduce: str) -> Tensor:
    """[num_dst, F] reduce over in-edges (u, v) of x[u]; 0 for nodes without in-edges."""
    return _REDUCE[reduce](graph, x)


def reduce_edges(graph: Any, messages: Tensor) -> Tensor:
    """[num_dst, F] sum over in-edges e of messages[e] (edge-id order)."""
    return ops.copy_e_sum(graph, messages)


def weighted_neighbor_sum(graph: Any, x: Tensor, weight: Tensor) -> Tensor:
    """[num_dst, F] sum over in-edges e = (u, v) of weight[e] * x[u]; weight [E] or [E, 1]."""
    return ops.u_mul_e_sum(graph, x, weight.reshape(-1, 1) if weight.dim() == 1 else weight)
