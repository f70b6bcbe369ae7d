"""Graph convolution (Kipf & Welling, "Semi-Supervised Classification with Graph
Convolutional Networks", ICLR 2017), numerically equal to `torch_geometric.nn.GCNConv`,
executing whichever composition `plan` names (SENSEi, Lenadora et al.)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from gnnforge import ops
from gnnforge.nn._aggregate import edge_weight_of
from gnnforge.nn._graph_structure import detached, gcn_norm_structure
from gnnforge.nn._planned import AUTO, add_plan_bias, check_node_input
from gnnforge.nn._sparse_features import SparseFeatures
from gnnforge.plan._auto import run_plan
from gnnforge.plan._execute import Structure
from gnnforge.plan._expressions import gcn_expression
from gnnforge.plan._ir import Node
from gnnforge.plan._primitives import Composition

__all__ = ["GCNConv"]


class GCNConv(nn.Module):
    r"""out = D^-1/2 Â D^-1/2 X W + b, Â = A + fill · I (fill 2 when `improved`, else 1).

    Arguments, defaults and parameters are PyG's (`lin.weight` [O, I], `bias` [O]), so
    `load_state_dict` works both ways. On a full `Graph` the normalisation is PyG's
    gcn_norm: existing self-loops are replaced by one per node (a node that had loops
    keeps its last loop's weight), D holds weighted in-degrees. On a sampler block (no
    loops added) a source is scaled by its weighted out-degree and a destination by its
    weighted in-degree within the block. Edge types are ignored.

    Edge weights: `edge_weight=` in forward, else the graph's `edge_data["edge_weight"]`
    (where `Graph.from_pyg` puts PyG's `data.edge_weight`), else 1; gradients flow to them.

    `plan` (a `gnnforge.plan` composition, None for PyG's Â (X W)) picks the association
    and whether Â's edge weights are precomputed (SDDMM + weighted SpMM) or applied as
    row scalings around an unweighted SpMM; `gnnforge.plan.optimize` sets it.

    x may also be `SparseFeatures` (mostly-zero inputs such as bag-of-words): the layer
    then projects X W over the non-zeros with the aggregation kernels and propagates the
    [N, O] result, the same math as the dense path with I/O fewer multiplications.

    Args:
        in_channels: input width I. out_channels: output width O.
        improved: Â = A + 2I (PyG's option; PyG 2.8 applies it only when edge weights are
            passed, gnnforge always).
        cached: keep the normalisation of the first call and reuse it on later calls with
            the same graph, even when their edge weights differ (PyG's transductive
            shortcut; a call on another graph normalises that graph instead of reusing
            the first one's). Without it the normalisation of an unweighted graph is still
            computed once per graph, dtype and device.
        add_self_loops: PyG's self-loop handling on a full Graph (default: `normalize`).
        normalize: apply D^-1/2 . D^-1/2 (False: out = A_w X W + b, no loops added).
        bias: learn an additive bias.

    Shapes:
        x: [num_src_nodes, I] float; edge_weight: [E]. returns: [num_dst_nodes, O].
    """

    def __init__(self, in_channels: int, out_channels: int, improved: bool = False,
                 cached: bool = False, add_self_loops: bool | None = None,
                 normalize: bool = True, bias: bool = True) -> None:
        super().__init__()
        if add_self_loops is None:
            add_self_loops = normalize
        if add_self_loops and not normalize:
            raise ValueError("GCNConv: add_self_loops=True needs normalize=True (PyG raises "
                             "the same); pass add_self_loops=False")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.improved, self.cached = improved, cached
        self.add_self_loops, self.normalize = add_self_loops, normalize
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        self.plan: Composition | str | None = AUTO
        self._cached_structure: tuple | None = None  # (graph, dtype, device, Structure)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.lin.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)
        self._cached_structure = None

    def plan_expression(self) -> Node:
        return gcn_expression()

    def plan_symbols(self) -> dict[str, int]:
        return {"I": self.in_channels, "O": self.out_channels, "H": 1, "D": self.out_channels}

    def forward(self, graph: Any, x: Tensor | SparseFeatures,
                edge_weight: Tensor | None = None) -> Tensor:
        weight = self.lin.weight.t().unsqueeze(0)                               # [1, I, O]
        if isinstance(x, SparseFeatures):
            if x.shape[1] != self.in_channels:
                raise ValueError(f"GCNConv: x must have {self.in_channels} columns, got "
                                 f"SparseFeatures of shape {x.shape}")
            x = x.matmul(self.lin.weight.t())                                   # [Ns, O]
            # X W is done; the plan's projection becomes the identity (an O x O GEMM).
            weight = torch.eye(self.out_channels, dtype=x.dtype, device=x.device)[None]
        check_node_input("GCNConv", graph, x, weight.shape[1])
        structure = self._structure(graph, edge_weight_of("GCNConv", graph, edge_weight), x)
        if torch.compiler.is_compiling() and structure.inv_sqrt_dst is not None:
            out = _traced_gcn(structure, x, weight[0])                          # [Nd, O]
            return add_plan_bias(out, self.bias)
        leaves = {"X": x, "W": weight}
        out = run_plan(self, gcn_expression(), structure, leaves)  # [Nd, 1, O]
        out = out.reshape(graph.num_dst_nodes, self.out_channels)
        return add_plan_bias(out, self.bias)

    def _structure(self, graph: Any, edge_weight: Tensor | None, x: Tensor) -> Structure:
        key = (graph, x.dtype, x.device)
        cached = self._cached_structure
        if self.cached and cached is not None and cached[0] is graph and cached[1:3] == key[1:]:
            return cached[3]
        structure = gcn_norm_structure(self, graph, edge_weight, x,
                                       self_loops=self.add_self_loops, improved=self.improved,
                                       normalize=self.normalize)
        if self.cached:
            self._cached_structure = (*key, detached(structure))
        return structure

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}"


def _traced_gcn(structure: Structure, x: Tensor, weight: Tensor) -> Tensor:
    """Â (X W) with the precomputed edge norms, for torch.compile: the planner's IR and its
    measurements are Python the tracer cannot see through, so a traced call takes PyG's
    association (one weighted g-SpMM after the projection, through the custom op)."""
    if "edge_norm" in structure.memo:
        norm = structure.memo["edge_norm"]          # the eager warm-up's constant, [E, 1]
    else:                                           # a weighted graph: norms carry autograd
        norm = ops.gsddmm(structure.graph, "mul", structure.inv_sqrt_src,
                          structure.inv_sqrt_dst, "u", "v")
        if structure.edge_weight is not None:
            norm = norm * structure.edge_weight.reshape(norm.shape)
    return ops.u_mul_e_sum(structure.graph, x @ weight, norm.reshape(-1, 1))
