"""Simplified graph convolution (Wu et al., "Simplifying Graph Convolutional Networks",
ICML 2019), numerically equal to `torch_geometric.nn.SGConv` (cached=False)."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from gnnforge.nn._planned import (AUTO, check_node_input, evaluate_plan, prepared_structure,
                                  require_square)
from gnnforge.plan._execute import gcn_structure
from gnnforge.plan._expressions import sgc_expression
from gnnforge.plan._ir import Node
from gnnforge.plan._primitives import Composition

__all__ = ["SGConv"]


class SGConv(nn.Module):
    r"""out = (Â^K X) W + b with Â = D^-1/2 (A + I) D^-1/2 (PyG's gcn_norm).

    Parameters match PyG's (`lin.weight`, `lin.bias`). Needs a square graph. `plan`
    (None for PyG's propagate-then-project) is set by `gnnforge.plan.optimize`.

    Args:
        in_channels: I. out_channels: O. K: number of hops.
        add_self_loops: PyG's self-loop handling. bias: learn an additive bias.

    Shapes:
        x: [num_nodes, I] float. returns: [num_nodes, O].
    """

    def __init__(self, in_channels: int, out_channels: int, K: int = 1,  # noqa: N803 (PyG's name)
                 add_self_loops: bool = True, bias: bool = True) -> None:
        super().__init__()
        if K < 1:
            raise ValueError(f"SGConv: K must be >= 1, got {K}")
        self.in_channels, self.out_channels, self.K = in_channels, out_channels, K
        self.add_self_loops = add_self_loops
        self.lin = nn.Linear(in_channels, out_channels, bias=bias)
        self.plan: Composition | str | None = AUTO

    def reset_parameters(self) -> None:
        self.lin.reset_parameters()

    def plan_expression(self) -> Node:
        return sgc_expression(self.K)

    def plan_symbols(self) -> dict[str, int]:
        return {"I": self.in_channels, "O": self.out_channels, "H": 1, "D": self.out_channels}

    def forward(self, graph: Any, x: Tensor) -> Tensor:
        check_node_input("SGConv", graph, x, self.in_channels)
        require_square("SGConv", graph)
        structure = prepared_structure(self, graph, self.add_self_loops,
                                       lambda g: gcn_structure(g, x.dtype, symmetric=True),
                                       key=("gcn", x.dtype, True))
        expression = sgc_expression(self.K)
        leaves = {"X": x, "W": self.lin.weight.t().unsqueeze(0)}
        out = evaluate_plan(self, expression, structure, leaves)
        out = out.reshape(graph.num_dst_nodes, self.out_channels)
        return out if self.lin.bias is None else out + self.lin.bias

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, K={self.K}"
