"""Simplified graph convolution (Wu et al., "Simplifying Graph Convolutional Networks",
ICML 2019), numerically equal to `torch_geometric.nn.SGConv`."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from gnnforge.nn._aggregate import edge_weight_of
from gnnforge.nn._graph_structure import gcn_norm_structure
from gnnforge.nn._planned import (AUTO, add_plan_bias, check_node_input, current_plan,
                                  require_square)
from gnnforge.plan._auto import run_plan
from gnnforge.plan._execute import evaluate
from gnnforge.plan._expressions import sgc_expression
from gnnforge.plan._ir import Node
from gnnforge.plan._primitives import Composition

__all__ = ["SGConv"]


class SGConv(nn.Module):
    r"""out = (Â^K X) W + b with Â = D^-1/2 (A + I) D^-1/2 (PyG's gcn_norm).

    Arguments, defaults and parameters are PyG's (`lin.weight`, `lin.bias`). Needs a
    square graph; edge types are ignored; edge weights as in `GCNConv`. `plan` (None for
    PyG's propagate-then-project) is set by `gnnforge.plan.optimize`.

    Args:
        in_channels: I. out_channels: O. K: number of hops.
        cached: keep Â^K X of the first call and reuse it for every later call on the same
            graph (PyG's transductive shortcut: x and the weights of later calls are not
            read; only the projection runs). As in PyG, the first call stays
            differentiable in x and the edge weights; later calls reuse a detached copy.
        add_self_loops: PyG's self-loop handling. bias: learn an additive bias.

    Shapes:
        x: [num_nodes, I] float; edge_weight: [E]. returns: [num_nodes, O].
    """

    def __init__(self, in_channels: int, out_channels: int, K: int = 1,  # noqa: N803 (PyG's name)
                 cached: bool = False, add_self_loops: bool = True, bias: bool = True) -> None:
        super().__init__()
        if K < 1:
            raise ValueError(f"SGConv: K must be >= 1, got {K}")
        self.in_channels, self.out_channels, self.K = in_channels, out_channels, K
        self.cached, self.add_self_loops = cached, add_self_loops
        self.lin = nn.Linear(in_channels, out_channels, bias=bias)
        self.plan: Composition | str | None = AUTO
        self._cached_x: tuple | None = None  # (graph, dtype, device, Â^K X)

    def reset_parameters(self) -> None:
        self.lin.reset_parameters()
        self._cached_x = None

    def plan_expression(self) -> Node:
        return sgc_expression(self.K)

    def plan_symbols(self) -> dict[str, int]:
        return {"I": self.in_channels, "O": self.out_channels, "H": 1, "D": self.out_channels}

    def forward(self, graph: Any, x: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        check_node_input("SGConv", graph, x, self.in_channels)
        require_square("SGConv", graph)
        cached = self._cached_x
        if self.cached and cached is not None and cached[0] is graph \
                and cached[1:3] == (x.dtype, x.device):
            return self.lin(cached[3])
        structure = gcn_norm_structure(self, graph, edge_weight_of("SGConv", graph, edge_weight),
                                       x, self_loops=self.add_self_loops, square=True)
        expression = sgc_expression(self.K)
        if self.cached:  # Â^K X is the plan's value with W = I; keep it for later calls
            eye = torch.eye(self.in_channels, dtype=x.dtype, device=x.device)[None]
            propagated = evaluate(current_plan(self, expression), structure, {"X": x, "W": eye})
            propagated = propagated.reshape(graph.num_dst_nodes, self.in_channels)
            # Later calls must not backpropagate into this call's graph (freed by then).
            self._cached_x = (graph, x.dtype, x.device, propagated.detach())
            return self.lin(propagated)
        leaves = {"X": x, "W": self.lin.weight.t().unsqueeze(0)}
        out = run_plan(self, expression, structure, leaves)
        out = out.reshape(graph.num_dst_nodes, self.out_channels)
        return add_plan_bias(out, self.lin.bias)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, K={self.K}"
