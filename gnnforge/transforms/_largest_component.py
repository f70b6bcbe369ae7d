"""`LargestConnectedComponents`: keep the nodes of the largest components (Shchur et al.'s
protocol for the Amazon and Coauthor sets)."""

from __future__ import annotations

import numpy as np
import torch

from gnnforge.graph import Graph

__all__ = ["LargestConnectedComponents"]

CONNECTIONS = ("weak", "strong")


class LargestConnectedComponents:
    """The subgraph induced by the nodes of the `num_components` largest connected
    components, as `torch_geometric.transforms.LargestConnectedComponents`: node order kept,
    node and edge data carried, edges between kept nodes only.

    Args:
        num_components: how many components to keep (largest first; among components of
            equal size, the one holding the lowest node id first).
        connection: 'weak' (edge direction ignored) or 'strong'.

    Attributes (after a call):
        dropped_nodes, dropped_edges: what the last call left out, so that nothing is
            dropped silently (the training CLI prints them).
    """

    def __init__(self, num_components: int = 1, connection: str = "weak") -> None:
        if num_components < 1:
            raise ValueError(f"LargestConnectedComponents: num_components must be >= 1, got "
                             f"{num_components}")
        if connection not in CONNECTIONS:
            raise ValueError(f"LargestConnectedComponents: connection must be one of "
                             f"{CONNECTIONS}, got {connection!r}")
        self.num_components, self.connection = num_components, connection
        self.dropped_nodes = self.dropped_edges = 0

    def __call__(self, graph: Graph) -> Graph:
        labels = component_labels(graph, self.connection)
        if labels.size == 0:
            self.dropped_nodes = self.dropped_edges = 0
            return graph
        sizes = np.bincount(labels)
        first_node = np.full(sizes.size, labels.size)
        np.minimum.at(first_node, labels, np.arange(labels.size))
        order = np.lexsort((first_node, -sizes))             # largest, then earliest
        keep = np.isin(labels, order[: self.num_components])
        nodes = torch.from_numpy(np.flatnonzero(keep))
        sub = graph.subgraph(nodes).graph
        self.dropped_nodes = graph.num_nodes - sub.num_nodes
        self.dropped_edges = graph.num_edges - sub.num_edges
        return sub

    def __repr__(self) -> str:
        return f"LargestConnectedComponents({self.num_components}, connection={self.connection!r})"


def component_labels(graph: Graph, connection: str = "weak") -> np.ndarray:
    """[N] component id of every node (scipy.sparse.csgraph.connected_components)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    n = graph.num_nodes
    src, dst = graph.src.cpu().numpy(), graph.dst.cpu().numpy()
    matrix = csr_matrix((np.ones(src.size, dtype=np.int8), (src, dst)), shape=(n, n))
    _, labels = connected_components(matrix, directed=True, connection=connection)
    return labels
