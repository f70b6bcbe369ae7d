"""Graph convolution (Kipf & Welling, "Semi-Supervised Classification with Graph
Convolutional Networks", ICLR 2017), numerically equal to `torch_geometric.nn.GCNConv`,
executing whichever composition `plan` names (SENSEi, Lenadora et al.)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from gnnforge.graph import Graph
from gnnforge.nn._planned import (AUTO, check_node_input, evaluate_plan,
                                   prepared_structure)
from gnnforge.nn._sparse_features import SparseFeatures
from gnnforge.plan._execute import gcn_structure
from gnnforge.plan._expressions import gcn_expression
from gnnforge.plan._ir import Node
from gnnforge.plan._primitives import Composition

__all__ = ["GCNConv"]


class GCNConv(nn.Module):
    r"""out = D^-1/2 Â D^-1/2 X W + b, Â the adjacency with one self-loop per node.

    Parameters match PyG's (`lin.weight` [O, I], `bias` [O]) so `load_state_dict` works
    both ways. On a full `Graph` the normalisation is PyG's gcn_norm (in-degrees, self
    loops replaced by one per node); on a sampler block (no loops added) a source is
    scaled by its out-degree and a destination by its in-degree within the block.

    `plan` (a `gnnforge.plan` composition, None for PyG's Â (X W)) picks the association
    and whether Â's edge weights are precomputed (SDDMM + weighted SpMM) or applied as
    row scalings around an unweighted SpMM; `gnnforge.plan.optimize` sets it.

    x may also be `SparseFeatures` (mostly-zero inputs such as bag-of-words): the layer
    then projects X W over the non-zeros with the aggregation kernels and propagates the
    [N, O] result, the same math as the dense path with I/O fewer multiplications.

    Args:
        in_channels: input width I. out_channels: output width O.
        add_self_loops: PyG's self-loop handling on a full Graph.
        bias: learn an additive bias.

    Shapes:
        x: [num_src_nodes, I] float. returns: [num_dst_nodes, O].
    """

    def __init__(self, in_channels: int, out_channels: int, add_self_loops: bool = True,
                 bias: bool = True) -> None:
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.add_self_loops = add_self_loops
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        self.plan: Composition | str | None = AUTO
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.lin.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def plan_expression(self) -> Node:
        return gcn_expression()

    def plan_symbols(self) -> dict[str, int]:
        return {"I": self.in_channels, "O": self.out_channels, "H": 1, "D": self.out_channels}

    def forward(self, graph: Any, x: Tensor | SparseFeatures) -> Tensor:
        weight = self.lin.weight.t().unsqueeze(0)                               # [1, I, O]
        if isinstance(x, SparseFeatures):
            if x.shape[1] != self.in_channels:
                raise ValueError(f"GCNConv: x must have {self.in_channels} columns, got "
                                 f"SparseFeatures of shape {x.shape}")
            x = x.matmul(self.lin.weight.t())                                   # [Ns, O]
            # X W is done; the plan's projection becomes the identity (an O x O GEMM).
            weight = torch.eye(self.out_channels, dtype=x.dtype, device=x.device)[None]
        check_node_input("GCNConv", graph, x, weight.shape[1])
        structure = prepared_structure(
            self, graph, self.add_self_loops,
            lambda g: gcn_structure(g, x.dtype, symmetric=isinstance(g, Graph)),
            key=("gcn", x.dtype, isinstance(graph, Graph)))
        leaves = {"X": x, "W": weight}
        out = evaluate_plan(self, gcn_expression(), structure, leaves)  # [Nd, 1, O]
        out = out.reshape(graph.num_dst_nodes, self.out_channels)
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}"
