"""Graph attention (Veličković et al., "Graph Attention Networks", ICLR 2018),
numerically equal to `torch_geometric.nn.GATConv` with every option (attention dropout,
edge features, residual)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from gnnforge.nn._aggregate import dst_part
from gnnforge.nn._attention import check_attention_args, edge_features, finish_heads
from gnnforge.nn._graph_structure import prepared_structure
from gnnforge.nn._planned import AUTO, check_node_input
from gnnforge.nn._sparse_features import SparseFeatures
from gnnforge.plan._auto import run_plan
from gnnforge.plan._execute import Structure
from gnnforge.plan._expressions import gat_expression
from gnnforge.plan._ir import Node
from gnnforge.plan._primitives import Composition

__all__ = ["GATConv"]


class GATConv(nn.Module):
    r"""out_v = ||_h sum_{u -> v} alpha_uv,h (W_h x_u) + W_res x_v + b,
    alpha = dropout(softmax_v(LeakyReLU(a_src,h . W_h x_u + a_dst,h . W_h x_v
                                        + a_edge,h . W_edge,h e_uv))).

    Arguments, defaults and parameters are PyG's (`lin.weight` [H*D, I], `att_src`/
    `att_dst`/`att_edge` [1, H, D], `lin_edge`, `res`, `bias`), so `load_state_dict` works
    both ways. On a full Graph self-loops are replaced by one per node (PyG), their edge
    features given by `fill_value`; on a block the destinations are the first
    num_dst_nodes sources (the sampler convention) and no loops are added. Edge types are
    ignored. `plan` (None for the DGL/PyG plan that reuses X W for scores and
    aggregation) may instead score with X (W a) and aggregate the narrower input,
    (alpha X) W; `gnnforge.plan.optimize` sets it.

    Args:
        in_channels: I. out_channels: per-head width D. heads: H.
        concat: concatenate heads (else average). negative_slope: LeakyReLU slope.
        dropout: dropout probability of the attention coefficients (in training mode).
        add_self_loops: PyG's self-loop handling on a full Graph.
        edge_dim: width of edge features entering the attention logits (None: none).
        fill_value: edge features of the added loops: a number, a tensor, or 'mean'
            (PyG's default), 'add', 'min', 'max', 'mul' of the node's in-edge features.
        bias: learn a bias. residual: add a linear projection of the destination's input.

    x may also be `SparseFeatures` (mostly-zero inputs such as bag-of-words): X W is then
    projected over the non-zeros first and the plan runs on the [N, H*D] projection with
    W a per-head selection of its columns (exact: products with 1 and sums of zeros).

    Shapes:
        x: [num_src_nodes, I] float; edge_attr: [E, edge_dim] (default: the graph's
        edge_data["edge_attr"] when edge_dim is set). returns: [num_dst_nodes, H*D]
        (concat) or [num_dst_nodes, D].
    """

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1,
                 concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0,
                 add_self_loops: bool = True, edge_dim: int | None = None,
                 fill_value: float | Tensor | str = "mean", bias: bool = True,
                 residual: bool = False) -> None:
        super().__init__()
        check_attention_args("GATConv", heads, dropout, edge_dim)
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.negative_slope = concat, float(negative_slope)
        self.dropout, self.add_self_loops = float(dropout), add_self_loops
        self.edge_dim, self.fill_value, self.residual = edge_dim, fill_value, residual
        self.lin = nn.Linear(in_channels, heads * out_channels, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
        if edge_dim is not None:
            self.lin_edge = nn.Linear(edge_dim, heads * out_channels, bias=False)
            self.att_edge = nn.Parameter(torch.empty(1, heads, out_channels))
        else:
            self.lin_edge, self.att_edge = None, None
        width = heads * out_channels if concat else out_channels
        self.res = nn.Linear(in_channels, width, bias=False) if residual else None
        self.bias = nn.Parameter(torch.zeros(width)) if bias else None
        self.plan: Composition | str | None = AUTO
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for tensor in (self.lin.weight, self.att_src, self.att_dst, self.att_edge,
                       None if self.lin_edge is None else self.lin_edge.weight,
                       None if self.res is None else self.res.weight):
            if tensor is not None:
                nn.init.xavier_uniform_(tensor)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def plan_expression(self) -> Node:
        return gat_expression(self.negative_slope)

    def plan_symbols(self) -> dict[str, int]:
        return {"I": self.in_channels, "O": self.heads * self.out_channels, "H": self.heads,
                "D": self.out_channels}

    def forward(self, graph: Any, x: Tensor | SparseFeatures,
                edge_attr: Tensor | None = None) -> Tensor:
        heads, width = self.heads, self.out_channels
        residual_input = x
        if isinstance(x, SparseFeatures):
            x, weight = self._project_sparse(x)
        else:
            weight = self.lin.weight.reshape(heads, width, self.in_channels).transpose(1, 2)
        check_node_input("GATConv", graph, x, weight.shape[1])
        structure = prepared_structure(self, graph, self.add_self_loops, Structure,
                                       key="plain")
        leaves = {
            "X": x,
            "W": weight,                                                        # [H, I, D]
            "a_src": self.att_src[0].unsqueeze(-1),                            # [H, D, 1]
            "a_dst": self.att_dst[0].unsqueeze(-1),
        }
        edges = edge_features("GATConv", graph, edge_attr, self.lin_edge,
                              self.add_self_loops, self.fill_value)               # [E', H*D]
        if edges is not None:
            edges = edges.reshape(-1, heads, width)
            leaves["edge_logits"] = (edges * self.att_edge).sum(-1, keepdim=True)  # [E', H, 1]
        dropout = self.dropout if self.training else 0.0
        out = run_plan(self, self.plan_expression(), structure, leaves, dropout)
        residual = None if self.res is None else self._residual(graph, residual_input)
        return finish_heads(out, self.concat, self.bias, residual)

    def _project_sparse(self, x: SparseFeatures) -> tuple[Tensor, Tensor]:
        """(X W [Ns, H*D] over the non-zeros, [H, H*D, D] selecting head h's columns)."""
        if x.shape[1] != self.in_channels:
            raise ValueError(f"GATConv: x must have {self.in_channels} columns, got "
                             f"SparseFeatures of shape {x.shape}")
        projected = x.matmul(self.lin.weight.t())                               # [Ns, H*D]
        heads, width = self.heads, self.out_channels
        eye = torch.eye(heads * width, dtype=projected.dtype, device=projected.device)
        return projected, eye.reshape(heads * width, heads, width).transpose(0, 1)

    def _residual(self, graph: Any, x: Tensor | SparseFeatures) -> Tensor:
        if isinstance(x, SparseFeatures):
            return x.head(graph.num_dst_nodes).matmul(self.res.weight.t())
        return self.res(dst_part(graph, x))

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, heads={self.heads}"
