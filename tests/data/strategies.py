"""Hypothesis strategies for small graphs with loops, duplicates and isolated nodes."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from gnnforge.graph import Graph


@st.composite
def small_graphs(draw, max_nodes: int = 12, max_edges: int = 40, with_data: bool = False):
    num_nodes = draw(st.integers(0, max_nodes))
    if num_nodes == 0:
        pairs = []
    else:
        node = st.integers(0, num_nodes - 1)
        pairs = draw(st.lists(st.tuples(node, node), max_size=max_edges))
    src = torch.tensor([p[0] for p in pairs], dtype=torch.int64)
    dst = torch.tensor([p[1] for p in pairs], dtype=torch.int64)
    node_data = edge_data = None
    if with_data:
        node_data = {"x": torch.arange(num_nodes * 2, dtype=torch.float32).reshape(num_nodes, 2)}
        edge_data = {"w": torch.arange(len(pairs), dtype=torch.int64)}
    return Graph(src, dst, num_nodes, node_data=node_data, edge_data=edge_data)
