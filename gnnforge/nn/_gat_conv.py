"""Graph attention (Veličković et al., "Graph Attention Networks", ICLR 2018),
numerically equal to `torch_geometric.nn.GATConv` (dropout 0, no edge features)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from gnnforge.nn._planned import (AUTO, check_node_input, evaluate_plan,
                                   prepared_structure)
from gnnforge.plan._execute import Structure
from gnnforge.plan._expressions import gat_expression
from gnnforge.plan._ir import Node
from gnnforge.plan._primitives import Composition

__all__ = ["GATConv"]


def finish_heads(out: Tensor, concat: bool, bias: Tensor | None) -> Tensor:
    """[N, H, D] -> [N, H*D] (concat) or [N, D] (mean over heads), plus the bias."""
    rows, heads, width = out.shape  # explicit sizes: a graph may have no nodes
    out = out.reshape(rows, heads * width) if concat else out.mean(dim=1)
    return out if bias is None else out + bias


class GATConv(nn.Module):
    r"""out_v = ||_h sum_{u -> v} alpha_uv,h (W_h x_u) + b,
    alpha = softmax_v(LeakyReLU(a_src,h . W_h x_u + a_dst,h . W_h x_v)).

    Parameters match PyG's (`lin.weight` [H*D, I], `att_src`/`att_dst` [1, H, D],
    `bias`). On a full Graph self-loops are replaced by one per node (PyG); on a block
    the destinations are the first num_dst_nodes sources (the sampler convention) and no
    loops are added. `plan` (None for the DGL/PyG plan that reuses X W for scores and
    aggregation) may instead score with X (W a) and aggregate the narrower input,
    (alpha X) W; `gnnforge.plan.optimize` sets it.

    Args:
        in_channels: I. out_channels: per-head width D. heads: H.
        concat: concatenate heads (else average). negative_slope: LeakyReLU slope.
        add_self_loops: PyG's self-loop handling on a full Graph. bias: learn a bias.

    Shapes:
        x: [num_src_nodes, I] float. returns: [num_dst_nodes, H*D] (concat) or [.., D].
    """

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1,
                 concat: bool = True, negative_slope: float = 0.2,
                 add_self_loops: bool = True, bias: bool = True) -> None:
        super().__init__()
        if heads < 1:
            raise ValueError(f"GATConv: heads must be >= 1, got {heads}")
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.negative_slope = concat, float(negative_slope)
        self.add_self_loops = add_self_loops
        self.lin = nn.Linear(in_channels, heads * out_channels, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
        width = heads * out_channels if concat else out_channels
        self.bias = nn.Parameter(torch.zeros(width)) if bias else None
        self.plan: Composition | str | None = AUTO
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for tensor in (self.lin.weight, self.att_src, self.att_dst):
            nn.init.xavier_uniform_(tensor)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def plan_expression(self) -> Node:
        return gat_expression(self.negative_slope)

    def plan_symbols(self) -> dict[str, int]:
        return {"I": self.in_channels, "O": self.heads * self.out_channels, "H": self.heads,
                "D": self.out_channels}

    def forward(self, graph: Any, x: Tensor) -> Tensor:
        check_node_input("GATConv", graph, x, self.in_channels)
        structure = prepared_structure(self, graph, self.add_self_loops, Structure,
                                       key="plain")
        heads, width = self.heads, self.out_channels
        leaves = {
            "X": x,
            "W": self.lin.weight.reshape(heads, width, self.in_channels).transpose(1, 2),
            "a_src": self.att_src[0].unsqueeze(-1),                            # [H, D, 1]
            "a_dst": self.att_dst[0].unsqueeze(-1),
        }
        out = evaluate_plan(self, self.plan_expression(), structure, leaves)
        return finish_heads(out, self.concat, self.bias)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, heads={self.heads}"
