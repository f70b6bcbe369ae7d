"""Graph-level readouts: sum, mean and max of node features per graph, padding ignored.

They take plain tensors (node -> graph slot index, masks) so a compiled model sees only
tensors of fixed shape; `pool` is the convenience form over a GraphBatch.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnforge.graph import GraphBatch

__all__ = ["max_pool", "mean_pool", "pool", "sum_pool"]


def _masked(x: Tensor, node_mask: Tensor | None) -> Tensor:
    if node_mask is None:
        return x
    return x * node_mask.to(x.dtype).view(-1, *([1] * (x.dim() - 1)))


def _zero_graphs(out: Tensor, graph_mask: Tensor | None) -> Tensor:
    if graph_mask is None:
        return out
    return out * graph_mask.to(out.dtype).view(-1, *([1] * (out.dim() - 1)))


def sum_pool(x: Tensor, node_graph: Tensor, num_graphs: int, node_mask: Tensor | None = None,
             graph_mask: Tensor | None = None) -> Tensor:
    """out[b] = sum of x[v] over real nodes v of graph slot b.

    Args:
        x: [N, ...] node features.
        node_graph: [N] int64 graph slot of each node.
        num_graphs: B, the number of slots (padding included).
        node_mask: [N] bool, False on padding nodes (their rows are ignored), or None.
        graph_mask: [B] bool, False on padding slots (their output is 0), or None.

    Returns:
        [B, ...] with x's dtype.
    """
    out = x.new_zeros((num_graphs, *x.shape[1:]))
    out = out.index_add(0, node_graph, _masked(x, node_mask))
    return _zero_graphs(out, graph_mask)


def mean_pool(x: Tensor, node_graph: Tensor, num_graphs: int, node_mask: Tensor | None = None,
              graph_mask: Tensor | None = None) -> Tensor:
    """out[b] = mean of x[v] over real nodes of slot b (0 for a slot without real nodes)."""
    total = sum_pool(x, node_graph, num_graphs, node_mask, graph_mask)
    ones = x.new_ones(x.shape[0]) if node_mask is None else node_mask.to(x.dtype)
    count = x.new_zeros(num_graphs).index_add(0, node_graph, ones)
    return total / count.clamp(min=1).view(-1, *([1] * (x.dim() - 1)))


def max_pool(x: Tensor, node_graph: Tensor, num_graphs: int, node_mask: Tensor | None = None,
             graph_mask: Tensor | None = None) -> Tensor:
    """out[b] = element-wise max of x[v] over real nodes of slot b (0 when it has none)."""
    lowest = torch.finfo(x.dtype).min if x.is_floating_point() else torch.iinfo(x.dtype).min
    values = x
    if node_mask is not None:
        keep = node_mask.view(-1, *([1] * (x.dim() - 1)))
        values = torch.where(keep, x, torch.full_like(x, lowest))
    out = torch.full((num_graphs, *x.shape[1:]), lowest, dtype=x.dtype, device=x.device)
    index = node_graph.view(-1, *([1] * (x.dim() - 1))).expand_as(values)
    out = out.scatter_reduce(0, index, values, reduce="amax", include_self=True)
    out = torch.where(out == lowest, torch.zeros_like(out), out)
    return _zero_graphs(out, graph_mask)


_POOLS = {"sum": sum_pool, "mean": mean_pool, "max": max_pool}


def pool(x: Tensor, batch: GraphBatch, reduce: str = "sum") -> Tensor:
    """Readout over a (possibly padded) GraphBatch: [num_graphs, ...], zero on padding slots.

    Raises:
        ValueError: on an unknown `reduce` or x with the wrong number of rows.
    """
    if reduce not in _POOLS:
        raise ValueError(f"pool: reduce must be one of {sorted(_POOLS)}, got {reduce!r}")
    if x.shape[0] != batch.num_nodes:
        raise ValueError(f"pool: x has {x.shape[0]} rows for a batch of {batch.num_nodes} nodes")
    return _POOLS[reduce](x, batch.node_graph, batch.num_graphs, batch.node_mask, batch.graph_mask)
