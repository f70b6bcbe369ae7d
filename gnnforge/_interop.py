"""Conversion to and from PyTorch Geometric (optional `pyg` extra).

PyG attribute names are kept as data keys: node-level attributes (`x`, `pos`, node `y`)
go to node_data, edge-level ones (`edge_attr`) to edge_data, the rest to graph_data;
`edge_type` becomes the graph's edge types. The round trip restores every tensor.
"""

from __future__ import annotations

from typing import Any

import torch

from gnnforge._compat import require
from gnnforge.graph import Graph

_STRUCTURE_KEYS = {"edge_index", "num_nodes", "edge_type"}


def graph_from_pyg(data: Any, levels: dict[str, str] | None = None) -> Graph:
    """Build a Graph from a torch_geometric Data object.

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
    return Graph(edge_index[0], edge_index[1], data.num_nodes, edge_type=edge_type,
                 node_data=node_data, edge_data=edge_data, graph_data=graph_data)


def graph_to_pyg(graph: Graph) -> Any:
    """Convert a Graph to a torch_geometric Data object."""
    require("torch_geometric", extra="pyg")
    from torch_geometric.data import Data

    data = Data(edge_index=torch.stack([graph.src, graph.dst]), num_nodes=graph.num_nodes)
    if graph.edge_type is not None:
        data.edge_type = graph.edge_type
    for mapping in (graph.node_data, graph.edge_data, graph.graph_data):
        for key, value in mapping.items():
            data[key] = value
    return data


def batch_to_pyg(graphs: list[Graph]) -> Any:
    """Convert graphs to one torch_geometric Batch."""
    require("torch_geometric", extra="pyg")
    from torch_geometric.data import Batch

    return Batch.from_data_list([graph_to_pyg(g) for g in graphs])
