"""Topology adaptive graph convolution (Du et al., "Topology Adaptive Graph
Convolutional Networks", 2017), numerically equal to `torch_geometric.nn.TAGConv`."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from gnnforge.nn._aggregate import edge_weight_of
from gnnforge.nn._graph_structure import gcn_norm_structure
from gnnforge.nn._planned import AUTO, add_plan_bias, check_node_input, require_square
from gnnforge.plan._auto import run_plan
from gnnforge.plan._expressions import tag_expression
from gnnforge.plan._ir import Node
from gnnforge.plan._primitives import Composition

__all__ = ["TAGConv"]


class TAGConv(nn.Module):
    r"""out = sum_{k=0..K} (Â^k X) W_k + b, Â = D^-1/2 A_w D^-1/2 without added self-loops
    (A_w itself when not `normalize`).

    Arguments, defaults and parameters are PyG's (`lins.k.weight`, `bias`). Needs a square
    graph; edge types are ignored; edge weights as in `GCNConv`. `plan`
    (None for PyG's propagate-the-input order) can instead run Horner's
    X W_0 + Â (X W_1 + Â (...)), aggregating the output width; set by
    `gnnforge.plan.optimize`.

    Args:
        in_channels: I. out_channels: O. K: number of hops. bias: learn an additive bias.
        normalize: apply D^-1/2 . D^-1/2 (PyG's default True).

    Shapes:
        x: [num_nodes, I] float; edge_weight: [E]. returns: [num_nodes, O].
    """

    def __init__(self, in_channels: int, out_channels: int, K: int = 3,  # noqa: N803 (PyG's name)
                 bias: bool = True, normalize: bool = True) -> None:
        super().__init__()
        if K < 0:
            raise ValueError(f"TAGConv: K must be >= 0, got {K}")
        self.in_channels, self.out_channels, self.K = in_channels, out_channels, K
        self.normalize = normalize
        self.lins = nn.ModuleList(nn.Linear(in_channels, out_channels, bias=False)
                                  for _ in range(K + 1))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        self.plan: Composition | str | None = AUTO

    def reset_parameters(self) -> None:
        for lin in self.lins:
            lin.reset_parameters()
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def plan_expression(self) -> Node:
        return tag_expression(self.K)

    def plan_symbols(self) -> dict[str, int]:
        return {"I": self.in_channels, "O": self.out_channels, "H": 1, "D": self.out_channels}

    def forward(self, graph: Any, x: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        check_node_input("TAGConv", graph, x, self.in_channels)
        require_square("TAGConv", graph)
        structure = gcn_norm_structure(self, graph, edge_weight_of("TAGConv", graph, edge_weight),
                                       x, self_loops=False, normalize=self.normalize,
                                       square=True)
        expression = tag_expression(self.K)
        leaves = {"X": x, **{f"W{k}": lin.weight.t().unsqueeze(0)
                             for k, lin in enumerate(self.lins)}}
        out = run_plan(self, expression, structure, leaves)
        out = out.reshape(graph.num_dst_nodes, self.out_channels)
        return add_plan_bias(out, self.bias)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, K={self.K}"
