"""What GATConv and GATv2Conv share beyond the planned evaluation: PyG's edge features
(`edge_dim`, self-loop `fill_value`), the residual projection and the head combination."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from gnnforge.nn._graph_structure import with_loop_values
from gnnforge.graph import Graph

__all__ = ["EDGE_ATTR_KEY", "check_attention_args", "edge_features", "finish_heads"]

EDGE_ATTR_KEY = "edge_attr"  # PyG's attribute name; Graph.from_pyg keeps it


def check_attention_args(layer: str, heads: int, dropout: float, edge_dim: int | None) -> None:
    if heads < 1:
        raise ValueError(f"{layer}: heads must be >= 1, got {heads}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"{layer}: dropout must be in [0, 1), got {dropout}")
    if edge_dim is not None and edge_dim < 1:
        raise ValueError(f"{layer}: edge_dim must be >= 1 or None, got {edge_dim}")


def edge_features(layer: str, graph: Any, edge_attr: Tensor | None, lin_edge: nn.Linear | None,
                  self_loops: bool, fill_value: Any) -> Tensor | None:
    """[E', H*D] lin_edge(edge_attr) in the order of the graph the kernels see.

    `edge_attr` defaults to the graph's `edge_data["edge_attr"]` (PyG's `data.edge_attr`)
    when the layer has `edge_dim`. On a full Graph with `self_loops` the loops' rows come
    from `fill_value` (PyG's add_self_loops, before the projection, as in PyG).

    Raises:
        ValueError: edge_attr passed to a layer without edge_dim, or of the wrong shape.
    """
    if lin_edge is None:
        if edge_attr is not None:
            raise ValueError(f"{layer}: edge_attr was passed but the layer has no edge_dim; "
                             "construct it with edge_dim=edge_attr.shape[1]")
        return None
    if edge_attr is None:
        edge_attr = getattr(graph, "edge_data", {}).get(EDGE_ATTR_KEY)
        if edge_attr is None:
            return None
    if edge_attr.dim() == 1:
        edge_attr = edge_attr.reshape(-1, 1)
    if edge_attr.shape != (graph.num_edges, lin_edge.in_features):
        raise ValueError(f"{layer}: edge_attr must have shape [num_edges={graph.num_edges}, "
                         f"edge_dim={lin_edge.in_features}], got {tuple(edge_attr.shape)}")
    edge_attr = edge_attr.to(lin_edge.weight.dtype)
    if self_loops and isinstance(graph, Graph):
        edge_attr = with_loop_values(graph, edge_attr, fill_value)
    return lin_edge(edge_attr)


def finish_heads(out: Tensor, concat: bool, bias: Tensor | None,
                 residual: Tensor | None = None) -> Tensor:
    """[N, H, D] -> [N, H*D] (concat) or [N, D] (mean over heads), plus residual and bias."""
    rows, heads, width = out.shape  # explicit sizes: a graph may have no nodes
    out = out.reshape(rows, heads * width) if concat else out.mean(dim=1)
    if residual is not None:
        out = out + residual
    return out if bias is None else out + bias
