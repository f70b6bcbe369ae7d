"""A minimal mean-aggregation GraphSAGE over blocks, in plain torch.

Stand-in for the training and distributed checks of this package until
`gnnforge.nn.SAGEConv` lands; switch to it then. Aggregation is index_add_ over
`block.coo()`, so it is the obvious reference for what a block means.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from gnnforge.sampling._block import Block

__all__ = ["BlockSAGE", "mean_aggregate"]


def mean_aggregate(block: Block, x_src: Tensor) -> Tensor:
    """[num_dst, F] mean of in-neighbour rows (weighted by `edge_weight` when present)."""
    src, dst = block.coo()
    messages = x_src[src]  # [E, F]
    weight = torch.ones(block.num_edges, dtype=x_src.dtype)
    if block.edge_weight is not None:
        weight = block.edge_weight.to(x_src.dtype)
    total = x_src.new_zeros((block.num_dst_nodes, x_src.shape[1]))
    total.index_add_(0, dst, messages * weight[:, None])
    norm = x_src.new_zeros(block.num_dst_nodes).index_add_(0, dst, weight)
    return total / norm.clamp(min=1e-12)[:, None]


class BlockSAGE(nn.Module):
    """GraphSAGE-mean: h_dst' = W_self h_dst + W_neigh mean(h_src); ReLU between layers.

    Args:
        widths: [in, hidden..., out] feature widths; len(widths) - 1 layers.
    """

    def __init__(self, widths: Sequence[int]) -> None:
        super().__init__()
        if len(widths) < 2:
            raise ValueError(f"BlockSAGE: widths needs at least [in, out], got {list(widths)}")
        self.self_weights = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))
        self.neigh_weights = nn.ModuleList(nn.Linear(a, b, bias=False)
                                           for a, b in zip(widths, widths[1:]))

    def forward(self, blocks: Sequence[Block], x: Tensor,
                exchange: Sequence[Callable[[Tensor], Tensor]] | None = None) -> Tensor:
        """Embeddings of the last block's destinations.

        Args:
            blocks: one block per layer, input layer first.
            x: [blocks[0].num_src_nodes, in] input rows (single process), or with
                `exchange`, the rows this process owns before layer 0.
            exchange: per layer, a function that turns this process's rows into the rows
                of the block's sources (cooperative minibatching); None for one process.
        """
        if len(blocks) != len(self.self_weights):
            raise ValueError(f"BlockSAGE has {len(self.self_weights)} layers, "
                             f"got {len(blocks)} blocks")
        h = x
        for layer, block in enumerate(blocks):
            h_src = exchange[layer](h) if exchange is not None else h
            h = self.self_weights[layer](h_src[: block.num_dst_nodes]) + \
                self.neigh_weights[layer](mean_aggregate(block, h_src))
            if layer + 1 < len(blocks):
                h = torch.relu(h)
        return h
