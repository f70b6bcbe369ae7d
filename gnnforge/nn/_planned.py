"""What the planned layers (GCN, SGC, TAGCN, GAT, GATv2, SAGE) share: input checks, the
prepared-graph cache and running the composition the layer's `plan` names ("auto" by
default: `gnnforge.plan._auto`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from torch import Tensor, nn

from gnnforge.graph import Graph
from gnnforge.plan._auto import AUTO, _fixed_plan, run_plan
from gnnforge.plan._candidates import default_composition
from gnnforge.plan._execute import Structure, evaluate
from gnnforge.plan._graph_cache import GRAPH_CACHE
from gnnforge.plan._ir import Node
from gnnforge.plan._primitives import Composition

__all__ = ["AUTO", "check_node_input", "current_plan", "evaluate_plan", "prepared_structure",
           "require_square"]


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
                       build: Callable[[Any], Structure], key: Hashable = None) -> Structure:
    """The graph as the layer's kernels see it, with `build`'s per-graph data (degrees).

    A full Graph gets PyG's self-loop handling when `self_loops` (drop existing loops, add
    one per node); a block is used as it is. With a `key` naming what `build` computes
    (e.g. ("gcn", dtype)), the result is shared by every layer and call on this graph
    object (`gnnforge.plan._graph_cache`): loops, degrees, compressed formats and GCN's
    edge normalisation are computed once per graph. Without one (a build that depends
    on more than the graph), it is cached for the last graph this layer saw.
    """
    def make() -> Structure:
        prepared = graph
        if self_loops and isinstance(graph, Graph):
            prepared = graph.remove_self_loops().add_self_loops()
        return build(prepared)

    if key is not None:
        return GRAPH_CACHE.get(graph, ("structure", bool(self_loops), key), make)
    cached = layer.__dict__.get("_prepared")
    if cached is not None and cached[0] is graph:
        return cached[1]
    structure = make()
    layer.__dict__["_prepared"] = (graph, structure)
    return structure


def current_plan(layer: nn.Module, expression: Node) -> Composition:
    """The composition the layer's `plan` names: PyG's order for "default" (or None), the
    given composition, or for "auto" the default (use `evaluate_plan` to plan)."""
    return _fixed_plan(layer, expression) or default_composition(expression)


def evaluate_plan(layer: nn.Module, expression: Node, structure: Structure,
                  leaves: dict[str, Tensor]) -> Tensor:
    """The layer's value under the composition its `plan` names ("auto": planned for this
    call's graph, dtype, width, device and mode; measured first when in doubt)."""
    return run_plan(layer, expression, structure, leaves,
                    lambda plan, inputs: evaluate(plan, structure, inputs))
