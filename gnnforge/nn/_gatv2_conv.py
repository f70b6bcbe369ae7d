"""GATv2 (Brody et al., "How Attentive are Graph Attention Networks?", ICLR 2022),
numerically equal to `torch_geometric.nn.GATv2Conv` with every option (attention
dropout, edge features, residual)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from gnnforge.nn._aggregate import dst_part
from gnnforge.nn._attention import check_attention_args, edge_features, finish_heads
from gnnforge.nn._graph_structure import prepared_structure
from gnnforge.nn._planned import AUTO, check_node_input
from gnnforge.plan._auto import run_plan
from gnnforge.plan._execute import Structure
from gnnforge.plan._expressions import gatv2_expression
from gnnforge.plan._ir import Node
from gnnforge.plan._primitives import Composition

__all__ = ["GATv2Conv"]


class GATv2Conv(nn.Module):
    r"""out_v = ||_h sum_{u -> v} alpha_uv,h (W_l x_u + b_l)_h + W_res x_v + b,
    alpha = dropout(softmax_v(a_h . LeakyReLU(W_l x_u + b_l + W_r x_v + b_r + W_e e_uv)_h)).

    Arguments, defaults and parameters are PyG's (`lin_l`, `lin_r` with biases, `att`
    [1, H, D], `lin_edge`, `res`, `bias`). Self-loops, `fill_value`, blocks and edge types
    as in `GATConv`. `plan` (None for aggregating W_l x_u + b_l) may aggregate the input
    instead, (alpha X) W_l + (alpha 1) b_l^T; set by `gnnforge.plan.optimize`.

    Args:
        in_channels: I. out_channels: per-head width D. heads: H.
        concat: concatenate heads (else average). negative_slope: LeakyReLU slope.
        dropout: dropout probability of the attention coefficients (in training mode).
        add_self_loops: PyG's self-loop handling on a full Graph.
        edge_dim: width of edge features added inside the LeakyReLU (None: none).
        fill_value: edge features of the added loops (see `GATConv`).
        bias: biases of lin_l, lin_r and the output (PyG's single switch).
        share_weights: lin_r is lin_l. residual: add a linear projection of the
            destination's input.

    Shapes:
        x: [num_src_nodes, I] float; edge_attr: [E, edge_dim]. returns: [num_dst_nodes,
        H*D] (concat) or [num_dst_nodes, D].
    """

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1,
                 concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0,
                 add_self_loops: bool = True, edge_dim: int | None = None,
                 fill_value: float | Tensor | str = "mean", bias: bool = True,
                 share_weights: bool = False, residual: bool = False) -> None:
        super().__init__()
        check_attention_args("GATv2Conv", heads, dropout, edge_dim)
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.negative_slope = concat, float(negative_slope)
        self.dropout, self.add_self_loops = float(dropout), add_self_loops
        self.edge_dim, self.fill_value, self.residual = edge_dim, fill_value, residual
        self.share_weights, self.has_bias = share_weights, bias
        self.lin_l = nn.Linear(in_channels, heads * out_channels, bias=bias)
        self.lin_r = self.lin_l if share_weights else nn.Linear(in_channels,
                                                                 heads * out_channels, bias=bias)
        self.att = nn.Parameter(torch.empty(1, heads, out_channels))
        self.lin_edge = (nn.Linear(edge_dim, heads * out_channels, bias=False)
                         if edge_dim is not None else None)
        width = heads * out_channels if concat else out_channels
        self.res = nn.Linear(in_channels, width, bias=False) if residual else None
        self.bias = nn.Parameter(torch.zeros(width)) if bias else None
        self.plan: Composition | str | None = AUTO
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.lin_l, self.lin_r, self.lin_edge, self.res):
            if lin is not None:
                lin.reset_parameters()
        nn.init.xavier_uniform_(self.att)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def plan_expression(self) -> Node:
        return gatv2_expression(self.share_weights, self.has_bias, self.negative_slope)

    def plan_symbols(self) -> dict[str, int]:
        return {"I": self.in_channels, "O": self.heads * self.out_channels, "H": self.heads,
                "D": self.out_channels}

    def _weight(self, lin: nn.Linear) -> Tensor:
        return lin.weight.reshape(self.heads, self.out_channels, self.in_channels).transpose(1, 2)

    def forward(self, graph: Any, x: Tensor, edge_attr: Tensor | None = None) -> Tensor:
        check_node_input("GATv2Conv", graph, x, self.in_channels)
        structure = prepared_structure(self, graph, self.add_self_loops, Structure,
                                       key="plain")
        leaves = {"X": x, "Wl": self._weight(self.lin_l), "Wr": self._weight(self.lin_r),
                  "a": self.att[0].unsqueeze(-1)}                                # [H, D, 1]
        if self.has_bias:
            leaves["bl"] = self.lin_l.bias.reshape(self.heads, 1, self.out_channels)
            leaves["br"] = self.lin_r.bias.reshape(self.heads, 1, self.out_channels)
        edges = edge_features("GATv2Conv", graph, edge_attr, self.lin_edge,
                              self.add_self_loops, self.fill_value)               # [E', H*D]
        if edges is not None:
            leaves["edge_features"] = edges.reshape(-1, self.heads, self.out_channels)
        dropout = self.dropout if self.training else 0.0
        out = run_plan(self, self.plan_expression(), structure, leaves, dropout)
        residual = None if self.res is None else self.res(dst_part(graph, x))
        return finish_heads(out, self.concat, self.bias, residual)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, heads={self.heads}"
