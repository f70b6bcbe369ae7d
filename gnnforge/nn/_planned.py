"""What the planned layers (GCN, SGC, TAGCN, GAT, GATv2) share: input checks, the
prepared-graph cache and reading the layer's `plan` attribute."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor, nn

from gnnforge.graph import Graph
from gnnforge.plan._execute import Structure
from gnnforge.plan._candidates import default_composition, is_valid_plan
from gnnforge.plan._ir import Node
from gnnforge.plan._primitives import Composition

__all__ = ["check_node_input", "current_plan", "prepared_structure", "require_square"]


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


def prepared_structure(layer: nn.Module, graph: Any, self_loops: bool,
                       build: Callable[[Any], Structure]) -> Structure:
    """The graph as the layer's kernels see it, with `build`'s per-graph data (degrees).

    A full Graph gets PyG's self-loop handling when `self_loops` (drop existing loops, add
    one per node); a block is used as it is. Cached for the last graph object the layer
    saw, so repeated calls on one graph reuse loops, degrees and compressed formats.
    """
    cached = layer.__dict__.get("_prepared")
    if cached is not None and cached[0] is graph:
        return cached[1]
    prepared = graph
    if self_loops and isinstance(graph, Graph):
        # These layers are not relational: edge types are ignored, as in PyG.
        untyped = Graph._trusted(graph.src, graph.dst, graph.num_nodes)
        prepared = untyped.remove_self_loops().add_self_loops()
    structure = build(prepared)
    layer.__dict__["_prepared"] = (graph, structure)
    return structure


def current_plan(layer: nn.Module, expression: Node) -> Composition:
    """The layer's `plan` attribute, checked against its expression; the default if None."""
    plan = layer.plan
    if plan is None:
        return default_composition(expression)
    if not isinstance(plan, Composition) or not is_valid_plan(expression, plan):
        raise ValueError(f"{type(layer).__name__}.plan is not a composition of this layer's "
                         f"expression {expression!r}; got {plan!r}. Use gnnforge.plan.optimize "
                         "or gnnforge.plan.layer_candidates(layer)")
    return plan
