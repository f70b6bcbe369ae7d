"""`Block`: one sampled layer, a bipartite graph from source to destination vertices."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from gnnforge import _device

__all__ = ["Block"]


@dataclass(frozen=True, eq=False)
class Block:
    """One layer of a sampled minibatch: messages flow from `src_nodes` to `dst_nodes`.

    It implements the kernel protocol of `gnnforge.graph` (`num_src_nodes`,
    `num_dst_nodes`, `num_edges`, `coo()`, `csr()`, `csc()`), so ops and layers aggregate
    over it directly. Edge order is by destination (the order the sampler produces), so
    `csr()` is stored and `csc()` is derived on first use and cached.

    Attributes:
        src_nodes: [num_src] int64 original ids; the first num_dst are `dst_nodes`
            (DGL's convention: a layer takes x_dst = x_src[:num_dst]).
        rowptr: [num_dst + 1] int64; destination i's edges are rowptr[i]:rowptr[i+1].
        col: [E] int64 local source id of each edge.
        edge_ids: [E] int64 id in the parent graph of each edge, to fetch edge features
            (-1 for edges that are not parent edges, such as random-walk neighbours).
        edge_weight: [E] float or None; importance weights (LABOR-*: inverse inclusion
            probabilities normalised per destination to mean 1; random walks: visit counts).
    """

    src_nodes: Tensor
    rowptr: Tensor
    col: Tensor
    edge_ids: Tensor
    edge_weight: Tensor | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def num_dst_nodes(self) -> int:
        return int(self.rowptr.numel()) - 1

    @property
    def num_src_nodes(self) -> int:
        return int(self.src_nodes.numel())

    @property
    def num_edges(self) -> int:
        return int(self.col.numel())

    @property
    def dst_nodes(self) -> Tensor:
        """[num_dst] int64 original ids of the destinations (a view of src_nodes)."""
        return self.src_nodes[: self.num_dst_nodes]

    def coo(self) -> tuple[Tensor, Tensor]:
        """Return (src, dst) local ids, each [E] int64, in edge order (grouped by dst)."""
        if "dst" not in self._cache:
            counts = self.rowptr[1:] - self.rowptr[:-1]
            self._cache["dst"] = torch.repeat_interleave(
                torch.arange(self.num_dst_nodes, dtype=torch.int64, device=self.rowptr.device),
                counts)
        return self.col, self._cache["dst"]

    def csr(self, index_dtype: torch.dtype = torch.int64) -> tuple[Tensor, Tensor, Tensor]:
        """CSR by destination: (rowptr [num_dst+1], col [E] local src ids, edge order [E])."""
        _check_dtype(index_dtype)
        key = ("csr", index_dtype)
        if key not in self._cache:
            order = torch.arange(self.num_edges, dtype=torch.int64, device=self.col.device)
            self._cache[key] = (self.rowptr.to(index_dtype), self.col.to(index_dtype),
                                order.to(index_dtype))
        return self._cache[key]

    def csc(self, index_dtype: torch.dtype = torch.int64) -> tuple[Tensor, Tensor, Tensor]:
        """CSC by source: (colptr [num_src+1], row [E] local dst ids, edge order [E])."""
        _check_dtype(index_dtype)
        key = ("csc", index_dtype)
        if key not in self._cache:
            src, dst = self.coo()
            order = torch.argsort(src, stable=True)  # stable keeps dst ascending per source
            colptr = torch.zeros(self.num_src_nodes + 1, dtype=torch.int64,
                                 device=self.col.device)
            colptr[1:] = torch.cumsum(torch.bincount(src, minlength=self.num_src_nodes), 0)
            self._cache[key] = (colptr.to(index_dtype), dst[order].to(index_dtype),
                                order.to(index_dtype))
        return self._cache[key]

    def to(self, device: torch.device | str) -> Block:
        """The same block on `device` (samplers build blocks on the CPU); CPU to GPU through
        pinned memory, non-blocking. Cached formats are rebuilt there on first use."""
        device = torch.device(device)
        # Looked up at call time, so tests can observe every handover (`_device.to_device`).
        return self._map(lambda t: _device.to_device(t, device))

    def pin(self, device: torch.device | str) -> Block:
        """The same block in page-locked memory when `device` is a GPU (else itself): `to`'s
        staging copy, done ahead, e.g. in a prefetching thread."""
        device = torch.device(device)
        return self if device.type != "cuda" else self._map(lambda t: _device.pin(t, device))

    def pin_memory(self) -> Block:
        """Every tensor in page-locked memory; torch's DataLoader calls it (for blocks a
        worker produced) when `pin_memory=True`."""
        return self._map(lambda t: t.pin_memory())

    def _map(self, move) -> Block:
        """A new block of move(tensor) for every tensor field (the cache is not carried)."""
        def apply(tensor: Tensor | None) -> Tensor | None:
            return None if tensor is None else move(tensor)

        return Block(apply(self.src_nodes), apply(self.rowptr), apply(self.col),
                     apply(self.edge_ids), apply(self.edge_weight))

    def __repr__(self) -> str:
        weighted = "" if self.edge_weight is None else ", weighted"
        return (f"Block(num_src_nodes={self.num_src_nodes}, num_dst_nodes={self.num_dst_nodes}, "
                f"num_edges={self.num_edges}{weighted})")


def _check_dtype(index_dtype: torch.dtype) -> None:
    if index_dtype not in (torch.int32, torch.int64):
        raise TypeError(f"index_dtype must be torch.int32 or torch.int64, got {index_dtype}")
