"""What the planned layers (GCN, SGC, TAGCN, GAT, GATv2, SAGE) share: input checks, the
prepared-graph cache, PyG's self-loop handling of per-edge inputs and running the
composition the layer's `plan` names ("auto" by default: `gnnforge.plan._auto`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import torch
from torch import Tensor, nn

from gnnforge._static_shapes import lazy_device
from gnnforge.graph import Graph
from gnnforge.plan._auto import AUTO, _fixed_plan, run_plan
from gnnforge.plan._candidates import default_composition
from gnnforge.plan._execute import Structure, evaluate
from gnnforge.plan._graph_cache import GRAPH_CACHE
from gnnforge.plan._ir import Node
from gnnforge.plan._primitives import Composition

__all__ = ["AUTO", "check_node_input", "current_plan", "evaluate_plan", "loop_graph",
           "prepared_structure", "require_square", "with_loop_values"]

_FILL_REDUCE = {"add": "sum", "sum": "sum", "mean": "mean", "min": "amin", "max": "amax",
                "mul": "prod"}


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


def loop_graph(graph: Any, self_loops: bool) -> Any:
    """The graph the kernels see: for a full Graph with `self_loops`, PyG's handling (drop
    existing loops, append one per node); otherwise the graph as it is. Edge types and
    edge data are dropped: these layers are not relational (PyG ignores edge types)."""
    if not (self_loops and isinstance(graph, Graph)):
        return graph
    if lazy_device(graph.src):
        # XLA: how many loops there are comes from the data (a `nonzero`, which XLA runs on
        # the CPU): build the loop graph on the CPU instead, once per graph (the callers
        # cache it), and copy it over.
        return loop_graph(graph.to("cpu"), self_loops).to(graph.src.device)
    untyped = Graph._trusted(graph.src, graph.dst, graph.num_nodes)
    return untyped.remove_self_loops().add_self_loops()


def with_loop_values(graph: Graph, values: Tensor, fill_value: Any,
                     keep_existing: bool = False) -> Tensor:
    """Per-edge `values` [E, ...] in `loop_graph(graph, True)`'s edge order: those of the
    kept (non-loop) edges, then one row per node for its new loop.

    A loop's row is `fill_value`: a number, a tensor broadcast to one row, or a reduction
    of the node's kept in-edge values ('add'/'sum', 'mean', 'min', 'max', 'mul'; 0 for a
    node without in-edges), as PyG's add_self_loops. With `keep_existing` a node that had
    self-loops keeps the value of its last one instead (PyG's add_remaining_self_loops,
    which GCN's normalisation uses).
    """
    src, dst = graph.src, graph.dst
    kept = src != dst
    rows = (graph.num_nodes, *values.shape[1:])
    if isinstance(fill_value, str):
        if fill_value not in _FILL_REDUCE:
            raise ValueError(f"fill_value must be a number, a tensor or one of "
                             f"{tuple(_FILL_REDUCE)}, got {fill_value!r}")
        index = dst[kept].reshape(-1, *[1] * (values.dim() - 1)).expand_as(values[kept])
        loops = values.new_zeros(rows).scatter_reduce(
            0, index, values[kept], _FILL_REDUCE[fill_value], include_self=False)
    else:
        loops = torch.as_tensor(fill_value, dtype=values.dtype,
                                device=values.device).expand(rows).clone()
    if keep_existing:
        loops[src[~kept]] = values[~kept]
    return torch.cat([values[kept], loops])


def prepared_structure(layer: nn.Module, graph: Any, self_loops: bool,
                       build: Callable[[Any], Structure], key: Hashable = None) -> Structure:
    """The graph as the layer's kernels see it (`loop_graph`), with `build`'s data.

    With a `key` naming what `build` computes and everything it depends on besides the
    graph (e.g. ("gcn", dtype, device): a layer used in float64 and then in float32 on one
    graph must not mix dtypes), the result is shared by every layer and call on this graph
    object (`gnnforge.plan._graph_cache`): loops, degrees, compressed formats and GCN's
    edge normalisation are computed once per graph. Without one (a build that depends
    on more than the graph), it is cached for the last graph this layer saw.
    """
    def make() -> Structure:
        return build(loop_graph(graph, self_loops))

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
                  leaves: dict[str, Tensor], attention_dropout: float = 0.0) -> Tensor:
    """The layer's value under the composition its `plan` names ("auto": planned for this
    call's graph, dtype, width, device and mode; measured first when in doubt)."""
    return run_plan(layer, expression, structure, leaves,
                    lambda plan, inputs: evaluate(plan, structure, inputs, attention_dropout))
