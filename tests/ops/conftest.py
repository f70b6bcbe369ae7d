"""Fixtures for the kernel tests: random graphs of both kinds the ops accept."""

from __future__ import annotations

import pytest
import torch

from gnnforge.graph import Graph


class BipartiteBlock:
    """A minimal object with the kernel protocol and num_src_nodes != num_dst_nodes."""

    def __init__(self, src, dst, num_src_nodes, num_dst_nodes):
        self.src, self.dst = src, dst
        self.num_src_nodes, self.num_dst_nodes = num_src_nodes, num_dst_nodes

    @property
    def num_edges(self):
        return int(self.src.numel())

    def coo(self):
        return self.src, self.dst

    def _compress(self, major, minor, rows, index_dtype):
        order = torch.argsort(major * max(self.num_src_nodes, self.num_dst_nodes, 1) + minor,
                              stable=True)
        ptr = torch.zeros(rows + 1, dtype=torch.int64)
        ptr[1:] = torch.cumsum(torch.bincount(major, minlength=rows), 0)
        return ptr.to(index_dtype), minor[order].to(index_dtype), order.to(index_dtype)

    def csr(self, index_dtype=torch.int64):
        return self._compress(self.dst, self.src, self.num_dst_nodes, index_dtype)

    def csc(self, index_dtype=torch.int64):
        return self._compress(self.src, self.dst, self.num_src_nodes, index_dtype)


def random_graph(kind: str, seed: int, num_edges: int = 120):
    """'square' Graph or 'bipartite' block, with self-loops, duplicates and isolated nodes."""
    generator = torch.Generator().manual_seed(seed)
    num_src, num_dst = (25, 25) if kind == "square" else (31, 17)
    src = torch.randint(0, num_src - 3, (num_edges,), generator=generator)  # isolated tail
    dst = torch.randint(0, num_dst - 2, (num_edges,), generator=generator)
    src = torch.cat([src, src[:10]])                   # multi-edges
    dst = torch.cat([dst, dst[:10]])
    if kind == "square":
        loops = torch.arange(5)
        return Graph(torch.cat([src, loops]), torch.cat([dst, loops]), num_src)
    return BipartiteBlock(src, dst, num_src, num_dst)


@pytest.fixture(params=["square", "bipartite"])
def graph(request):
    return random_graph(request.param, seed=7)


@pytest.fixture
def empty_graph():
    return Graph(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), 6)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A private cache folder and a kernel-selection view that has read no record yet."""
    from gnnforge.ops import _auto_kernels

    monkeypatch.setenv("GNNFORGE_CACHE", str(tmp_path))
    _auto_kernels.forget()
    yield tmp_path
    _auto_kernels.forget()
