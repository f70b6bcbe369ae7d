"""`OneHotDegree`: node features from degrees, for graphs without features (TU sets)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gnnforge.graph import Graph

__all__ = ["OneHotDegree"]


class OneHotDegree:
    """x = one_hot(degree, max_degree + 1), appended to an existing x when `cat`.

    Equal to `torch_geometric.transforms.OneHotDegree`: out-degree by default (the
    count of edges leaving each node), float one-hot rows, existing features first.

    Args:
        max_degree: the largest degree the one-hot encodes (columns 0..max_degree).
        in_degree: count edges arriving at each node instead.
        cat: append to an existing node_data["x"] (a 1-D x becomes one column); False
            replaces it.

    Raises:
        ValueError: when a node's degree exceeds max_degree (naming the node), since
            it has no column.
    """

    def __init__(self, max_degree: int, in_degree: bool = False, cat: bool = True) -> None:
        if max_degree < 0:
            raise ValueError(f"OneHotDegree: max_degree must be >= 0, got {max_degree}")
        self.max_degree, self.in_degree, self.cat = max_degree, in_degree, cat

    def __call__(self, graph: Graph) -> Graph:
        index = graph.dst if self.in_degree else graph.src
        degree = torch.bincount(index, minlength=graph.num_nodes)
        if degree.numel() and int(degree.max()) > self.max_degree:
            node = int(torch.argmax(degree))
            raise ValueError(f"OneHotDegree: node {node} has degree {int(degree[node])} > "
                             f"max_degree={self.max_degree}; raise max_degree (the dataset "
                             "maximum is what PyG users pass)")
        features = F.one_hot(degree, self.max_degree + 1).to(torch.get_default_dtype())
        x = graph.node_data.get("x")
        if x is not None and self.cat:
            x = x.reshape(-1, 1) if x.dim() == 1 else x
            features = torch.cat([x, features.to(x.dtype)], dim=-1)
        return graph.with_node_data(x=features)

    def __repr__(self) -> str:
        return f"OneHotDegree({self.max_degree})"
