"""Small graphs and a structural check shared by the sampling tests."""

from __future__ import annotations

import numpy as np
import torch

from gnnforge.graph import Graph


def star_in(num_leaves: int) -> Graph:
    """Node 0 receives an edge from each leaf 1..num_leaves."""
    leaves = torch.arange(1, num_leaves + 1)
    return Graph(leaves, torch.zeros(num_leaves, dtype=torch.int64), num_leaves + 1)


def random_multigraph(seed: int, num_nodes: int = 40, num_edges: int = 300) -> Graph:
    """Random directed multigraph with self-loops, duplicates and isolated nodes."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, max(num_nodes - 5, 1), num_edges)  # the last 5 nodes stay isolated
    dst = rng.integers(0, max(num_nodes - 5, 1), num_edges)
    src[:5] = dst[:5]  # self-loops
    src[5:10], dst[5:10] = src[10:15], dst[10:15]  # duplicates
    return Graph(src, dst, num_nodes)


def check_blocks(graph: Graph, seeds: torch.Tensor, blocks, parent_edges: bool = True) -> None:
    """Every block is a valid compacted bipartite subgraph chained to the next one."""
    assert torch.equal(blocks[-1].dst_nodes, seeds)
    for index, block in enumerate(blocks):
        src_nodes = block.src_nodes
        assert torch.unique(src_nodes).numel() == src_nodes.numel()
        src, dst = block.coo()
        assert int(block.rowptr[-1]) == block.num_edges == src.numel()
        if block.num_edges:
            assert int(src.max()) < block.num_src_nodes
        # every non-destination source is used by some edge (no dead vertices)
        used = torch.zeros(block.num_src_nodes, dtype=torch.bool)
        used[src] = True
        used[: block.num_dst_nodes] = True
        assert bool(used.all())
        if parent_edges:
            assert torch.equal(graph.src[block.edge_ids], src_nodes[src])
            assert torch.equal(graph.dst[block.edge_ids], block.dst_nodes[dst])
        if index + 1 < len(blocks):
            assert torch.equal(blocks[index + 1].src_nodes, block.dst_nodes)
