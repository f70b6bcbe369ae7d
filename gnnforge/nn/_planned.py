"""What the planned layers (GCN, SGC, TAGCN, GAT, GATv2, SAGE, GIN, R-GCN) share around
their plan: the input checks and the composition a fixed `plan` names.

A planned layer's forward reads: check the input (`check_node_input`), get the structure
(what the layer derives from the graph: `_graph_structure`), run the plan
(`gnnforge.plan._auto.run_plan`, the planner's one entry: expression, structure and leaves
in, the layer's value out)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from gnnforge import ops
from gnnforge.plan._auto import AUTO, _fixed_plan
from gnnforge.plan._candidates import default_composition
from gnnforge.plan._ir import Node
from gnnforge.plan._primitives import Composition

__all__ = ["AUTO", "add_plan_bias", "check_node_input", "current_plan", "require_square"]


def check_node_input(layer: str, graph: Any, x: Tensor, width: int) -> None:
    """Raise ValueError/TypeError unless x is [graph.num_src_nodes, width] floating."""
    for name in ("num_src_nodes", "num_dst_nodes", "coo", "csr"):
        if not hasattr(graph, name):
            raise TypeError(f"{layer}: graph must be a gnnforge Graph or a sampler block "
                            f"(kernel protocol), got {type(graph).__name__} without {name}")
    if not isinstance(x, Tensor) or not x.is_floating_point() or x.dim() != 2:
        got = (f"{x.dtype} tensor of shape {tuple(x.shape)}" if isinstance(x, Tensor)
               else type(x).__name__)
        raise TypeError(f"{layer}: x must be a 2-D floating tensor, got {got}")
    if x.shape[0] != graph.num_src_nodes or x.shape[1] != width:
        raise ValueError(f"{layer}: x must have shape [num_src_nodes={graph.num_src_nodes}, "
                         f"in_channels={width}], got {tuple(x.shape)}")


def require_square(layer: str, graph: Any) -> None:
    if graph.num_src_nodes != graph.num_dst_nodes:
        raise ValueError(f"{layer} propagates several hops, so it needs a square graph; got a "
                         f"block with {graph.num_src_nodes} sources and {graph.num_dst_nodes} "
                         "destinations (use GCNConv per block instead)")


def current_plan(layer: nn.Module, expression: Node) -> Composition:
    """The composition the layer's `plan` names: PyG's order for "default" (or None), the
    given composition, or for "auto" the default (`run_plan` plans)."""
    return _fixed_plan(layer, expression) or default_composition(expression)


def add_plan_bias(out: Tensor, bias: Tensor | None) -> Tensor:
    """The layer's output `out` (fresh from its plan) plus `bias` [O], or `out` without one.

    Without autograd `out` takes the bias in place: one [Nd, O] buffer fewer at the peak
    (2.3 GiB for hidden 256 on the products-sized graph). With it, or while traced, into a
    reused buffer with the bias's gradient as a GEMV (`ops.add_bias`; a fresh output
    page-faults every page)."""
    if bias is None:
        return out
    if torch.is_grad_enabled() or torch.compiler.is_compiling():
        return ops.add_bias(out, bias)
    return out.add_(bias)
