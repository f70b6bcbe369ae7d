"""Turn one disjoint-union graph (as graph-collection files store them) into a list."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from gnnforge.graph import Graph, GraphBatch

__all__ = ["split_union"]


def split_union(
    union: Graph, graph_ptr: np.ndarray, graph_data: Mapping[str, Tensor]
) -> list[Graph]:
    """Split `union` into its graphs; nodes of graph b are graph_ptr[b]:graph_ptr[b+1].

    Every edge must stay inside one graph (the caller checks that). Edges are regrouped
    per graph, keeping their order within each graph, and node ids become local.
    `graph_data` holds [B, ...] tensors, one row per graph.
    """
    ptr = torch.from_numpy(np.asarray(graph_ptr, dtype=np.int64))
    num_graphs = ptr.numel() - 1
    node_graph = torch.repeat_interleave(
        torch.arange(num_graphs), torch.diff(ptr), output_size=union.num_nodes
    )
    edge_graph = node_graph[union.src]
    order = torch.argsort(edge_graph, stable=True)
    edge_ptr = torch.zeros(num_graphs + 1, dtype=torch.int64)
    edge_ptr[1:] = torch.cumsum(torch.bincount(edge_graph, minlength=num_graphs), 0)
    grouped = Graph._trusted(
        union.src[order],
        union.dst[order],
        union.num_nodes,
        None if union.edge_type is None else union.edge_type[order],
        dict(union.node_data),
        {k: v[order] for k, v in union.edge_data.items()},
        dict(graph_data),
    )
    batch = GraphBatch._make(grouped, ptr, edge_ptr, torch.ones(num_graphs, dtype=torch.bool))
    return batch.unbatch()
