"""Random test graphs (empty, isolated nodes, self-loops, multi-edges) and a block type."""

from __future__ import annotations

import torch

from gnnforge.graph import Graph


class TestBlock:
    """A bipartite sampler block: destinations are the first num_dst sources (kernel protocol)."""

    __test__ = False

    def __init__(self, src: torch.Tensor, dst: torch.Tensor, num_src: int, num_dst: int):
        self.src, self.dst = src, dst
        self.num_src_nodes, self.num_dst_nodes = num_src, num_dst
        self._graph = Graph(src, dst, max(num_src, num_dst))

    @property
    def num_edges(self) -> int:
        return int(self.src.numel())

    def coo(self):
        return self.src, self.dst

    def csr(self, index_dtype=torch.int64):
        rowptr, col, eids = self._graph.csr(index_dtype)
        return rowptr[: self.num_dst_nodes + 1], col, eids

    def csc(self, index_dtype=torch.int64):
        colptr, row, eids = self._graph.csc(index_dtype)
        return colptr[: self.num_src_nodes + 1], row, eids


def random_graphs(seed: int = 0) -> list[tuple[str, Graph]]:
    """Named graphs covering the edge cases every plan must handle."""
    g = torch.Generator().manual_seed(seed)
    n, e = 23, 70
    src = torch.randint(0, n - 3, (e,), generator=g)  # the last 3 nodes stay isolated
    dst = torch.randint(0, n - 3, (e,), generator=g)
    loops = torch.tensor([1, 1, 4])
    multi = torch.tensor([2, 2, 2])
    return [
        ("random+isolated+loops+multi", Graph(torch.cat([src, loops, multi]),
                                               torch.cat([dst, loops, multi + 1]), n)),
        ("empty-edges", Graph(torch.zeros(0, dtype=torch.long),
                              torch.zeros(0, dtype=torch.long), 5)),
        ("single-node-loop", Graph([0], [0], 1)),
        ("star", Graph(torch.arange(1, 12), torch.zeros(11, dtype=torch.long), 12)),
    ]


def random_block(seed: int = 0) -> TestBlock:
    g = torch.Generator().manual_seed(seed)
    num_src, num_dst, e = 19, 7, 50
    src = torch.randint(0, num_src, (e,), generator=g)
    dst = torch.randint(0, num_dst - 1, (e,), generator=g)  # the last destination has no edge
    return TestBlock(src, dst, num_src, num_dst)
