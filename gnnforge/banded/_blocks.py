"""Block-banded adjacency tensors in the paper's Algorithm-1 layout.

A graph whose nodes sit in K*S slots (slot i = node i) is cut into K blocks of S slots.
An edge src -> dst of type p lands in the block row of its destination: the diagonal
block C_k when both ends are in block k, the upper block U_k when the source is in block
k+1, the lower block L_k when the source is in block k (destination in block k+1). Rows
are ordered (slot, type), i.e. row a*P + p of a block holds type-p edges into slot a, so
that ``C @ X`` of shape [K, S*P, H] reshapes to [K, S, P*H] with no transpose, ready for
one matmul with the concatenated per-type weights ("Fast Training of Sparse Graph Neural
Networks on Dense Hardware", ICLR 2020 submission, Algorithm 1). With bandwidth < S every
edge is representable; any other edge whose ends are more than one block apart is
dropped and counted (``kept`` marks the edges that made it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from gnnforge.graph import Graph

__all__ = ["BandedBlocks", "compile_blocks"]


@dataclass(frozen=True)
class BandedBlocks:
    """One supergraph as block-banded tensors (edge counts; duplicates add up).

    Attributes:
        C: [K, S*P, S] diagonal blocks; C[k, a*P + p, b] counts type-p edges kS+b -> kS+a.
        U: [K-1, S*P, S] upper blocks; U[k, a*P + p, b] counts edges (k+1)S+b -> kS+a.
        L: [K-1, S*P, S] lower blocks; L[k, a*P + p, b] counts edges kS+b -> (k+1)S+a.
        in_degree: [K*S, P] number of kept in-edges of each type per slot (for message biases).
        kept: [E] bool, True for the graph's edges that are represented.
        block_size: S.
        num_edge_types: P.
    """

    C: Tensor
    U: Tensor
    L: Tensor
    in_degree: Tensor
    kept: Tensor
    block_size: int
    num_edge_types: int

    @property
    def num_blocks(self) -> int:
        return int(self.C.shape[0])

    @property
    def num_slots(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def num_dropped(self) -> int:
        """Edges of the compiled graph that lie outside the band (not represented)."""
        return int((~self.kept).sum())

    def to(self, device: torch.device | str | None = None,
           dtype: torch.dtype | None = None) -> BandedBlocks:
        """Move the block tensors (and `in_degree`) to a device and/or float dtype."""
        move = lambda t: t.to(device=device, dtype=dtype)  # noqa: E731
        return replace(self, C=move(self.C), U=move(self.U), L=move(self.L),
                       in_degree=move(self.in_degree), kept=self.kept.to(device))


def compile_blocks(graph: Graph, block_size: int, num_edge_types: int | None = None,
                   num_blocks: int | None = None,
                   dtype: torch.dtype = torch.float32) -> BandedBlocks:
    """Block-banded tensors of `graph`, whose node i occupies slot i.

    Reorder first (``graph.reorder_nodes(rcm_order(graph))``) so that the bandwidth is
    small; nodes beyond ``graph.num_nodes`` up to K*S are empty padding slots.

    Args:
        graph: the (super)graph; ``edge_type`` gives each edge's relation (0 when absent).
        block_size: S, slots per block.
        num_edge_types: P; default ``graph.num_edge_types``.
        num_blocks: K; default ceil(N / S) (at least 1).
        dtype: float dtype of the block tensors.

    Returns:
        A `BandedBlocks`; ``kept`` marks edges inside the band, ``num_dropped`` counts the rest.

    Raises:
        ValueError: on S < 1, a graph with more nodes than K*S slots, or edge types >= P.
    """
    if not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"compile_blocks: block_size must be a positive int, got {block_size!r}")
    size = block_size
    types = graph.num_edge_types if num_edge_types is None else int(num_edge_types)
    if graph.edge_type is not None and graph.num_edges and int(graph.edge_type.max()) >= types:
        raise ValueError(f"compile_blocks: edge_type goes up to {int(graph.edge_type.max())} "
                         f"but num_edge_types={types}")
    blocks = max(1, -(-graph.num_nodes // size)) if num_blocks is None else int(num_blocks)
    if graph.num_nodes > blocks * size:
        raise ValueError(f"compile_blocks: graph has {graph.num_nodes} nodes but "
                         f"num_blocks*block_size = {blocks}*{size} = {blocks * size} slots")
    device = graph.device
    src, dst = graph.src, graph.dst
    etype = graph.edge_type if graph.edge_type is not None else torch.zeros_like(src)
    src_block, dst_block = src // size, dst // size
    row = (dst % size) * types + etype  # [E] row within a block: (slot a, type p)
    col = src % size
    shift = src_block - dst_block
    kept = shift.abs() <= 1
    tensors = []
    for offset, count, block_of in ((0, blocks, dst_block), (1, blocks - 1, dst_block),
                                    (-1, blocks - 1, src_block)):
        chosen = shift == offset
        # U_k holds edges into block k from k+1; L_k edges into k+1 from k: both indexed by
        # the lower of the two blocks, so index L by its source block.
        dense = torch.zeros(max(count, 0), size * types, size, dtype=dtype, device=device)
        dense.index_put_((block_of[chosen], row[chosen], col[chosen]),
                         torch.ones(int(chosen.sum()), dtype=dtype, device=device), accumulate=True)
        tensors.append(dense)
    in_degree = torch.zeros(blocks * size * types, dtype=dtype, device=device)
    in_degree.index_add_(0, (dst * types + etype)[kept],
                         torch.ones(int(kept.sum()), dtype=dtype, device=device))
    return BandedBlocks(tensors[0], tensors[1], tensors[2], in_degree.view(blocks * size, types),
                        kept, size, types)
