"""Conversion to and from PyTorch Geometric (optional `pyg` extra).

PyG attribute names are kept as data keys: node-level attributes (`x`, `pos`, node `y`)
go to node_data, edge-level ones (`edge_attr`) to edge_data, the rest to graph_data;
`edge_type` becomes the graph's edge types. The round trip restores every tensor.

The conversion works on a graph's parts (`GraphParts`: the `Graph` constructor's
arguments), not on `Graph` itself, so the dependency points one way: `gnnforge.graph`
imports this module (`Graph.from_pyg`, `Graph.to_pyg`) and this module imports no graph.
"""

from __future__ import annotations

from typing import Any, TypedDict

import torch
from torch import Tensor

from gnnforge._compat import require

__all__ = ["GraphParts", "data_list_to_pyg", "parts_from_pyg", "parts_to_pyg"]

_STRUCTURE_KEYS = {"edge_index", "num_nodes", "edge_type"}


class GraphParts(TypedDict):
    """A graph as the `Graph` constructor's keyword arguments."""

    src: Tensor                      # [E] int64
    dst: Tensor                      # [E] int64
    num_nodes: int
    edge_type: Tensor | None         # [E] or None
    node_data: dict[str, Tensor]     # [N, ...] each
    edge_data: dict[str, Tensor]     # [E, ...] each
    graph_data: dict[str, Tensor]


def parts_from_pyg(data: Any, levels: dict[str, str] | None = None) -> GraphParts:
    """The parts of a graph from a torch_geometric Data object (`Graph(**parts)` builds it).

    Args:
        data: the PyG Data.
        levels: optional {key: 'node' | 'edge' | 'graph'} for keys whose level PyG's
            size-based guess gets wrong (e.g. a graph label of a one-node graph).
    """
    levels = levels or {}
    for key, level in levels.items():
        if level not in ("node", "edge", "graph"):
            raise ValueError(f"levels[{key!r}] must be 'node', 'edge' or 'graph', got {level!r}")
    require("torch_geometric", extra="pyg")
    edge_index = data.edge_index if data.edge_index is not None else torch.zeros(2, 0, dtype=torch.long)
    node_data, edge_data, graph_data = {}, {}, {}
    for key in data.keys():
        if key in _STRUCTURE_KEYS:
            continue
        value = data[key]
        if not isinstance(value, torch.Tensor):
            continue
        level = levels.get(key)
        if level == "edge" or (level is None and data.is_edge_attr(key)):
            edge_data[key] = value
        elif level == "node" or (level is None and data.is_node_attr(key)):
            node_data[key] = value
        else:
            graph_data[key] = value
    edge_type = data["edge_type"] if "edge_type" in data else None
    return GraphParts(src=edge_index[0], dst=edge_index[1], num_nodes=data.num_nodes,
                      edge_type=edge_type, node_data=node_data, edge_data=edge_data,
                      graph_data=graph_data)


def parts_to_pyg(parts: GraphParts) -> Any:
    """A torch_geometric Data object holding a graph's parts."""
    require("torch_geometric", extra="pyg")
    from torch_geometric.data import Data

    data = Data(edge_index=torch.stack([parts["src"], parts["dst"]]),
                num_nodes=parts["num_nodes"])
    if parts["edge_type"] is not None:
        data.edge_type = parts["edge_type"]
    for key in ("node_data", "edge_data", "graph_data"):
        for name, value in parts[key].items():
            data[name] = value
    return data


def data_list_to_pyg(data_list: list[Any]) -> Any:
    """One torch_geometric Batch of Data objects (`parts_to_pyg`'s)."""
    require("torch_geometric", extra="pyg")
    from torch_geometric.data import Batch

    return Batch.from_data_list(data_list)
