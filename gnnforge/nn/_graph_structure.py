"""What a planned layer derives from a graph: the graph its kernels see (PyG's self-loop
handling), per-edge inputs in that graph's order, degrees and GCN's normalisation, and
the per-graph cache that computes each of these once.

A layer asks for its `Structure` here (`prepared_structure`, or `gcn_norm_structure` for
GCN, SGC and TAGCN) and hands it to the planner with its leaves; nothing here knows
which composition runs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import torch
from torch import Tensor, nn

from gnnforge._static_shapes import lazy_device
from gnnforge.graph import Graph
from gnnforge.plan._execute import Structure, gcn_structure
from gnnforge.plan._graph_cache import GRAPH_CACHE

__all__ = ["detached", "gcn_norm_structure", "loop_graph", "prepared_structure",
           "with_loop_values"]

_FILL_REDUCE = {"add": "sum", "sum": "sum", "mean": "mean", "min": "amin", "max": "amax",
                "mul": "prod"}


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


def gcn_norm_structure(layer: nn.Module, graph: Any, edge_weight: Tensor | None, x: Tensor, *,
                       self_loops: bool, improved: bool = False, normalize: bool = True,
                       square: bool = False) -> Structure:
    """The Structure for Â = D^-1/2 (A_w + fill I) D^-1/2 (or A_w when not `normalize`).

    On a full Graph with `self_loops`, existing loops are replaced by one per node of
    weight fill (2 if `improved` else 1), except that a node with loops keeps its last
    loop's weight (PyG's add_remaining_self_loops); D holds weighted in-degrees. On a block
    the source factor uses weighted out-degrees, unless `square` (SGC, TAGCN: in-degrees on
    both sides, as gcn_norm). Unweighted structures are cached per graph,
    dtype and device (`prepared_structure`); weighted ones are built per call, so
    gradients reach the weights.
    """
    if edge_weight is None and not (improved and self_loops):
        return prepared_structure(layer, graph, self_loops,
                                  lambda g: _build(g, None, x.dtype, normalize, square),
                                  key=("gcn", x.dtype, x.device, normalize,
                                       square or isinstance(graph, Graph)))
    if edge_weight is None:
        edge_weight = torch.ones(graph.num_edges, dtype=x.dtype, device=x.device)
    if self_loops and isinstance(graph, Graph):
        edge_weight = with_loop_values(graph, edge_weight, 2.0 if improved else 1.0,
                                       keep_existing=True)
    return _build(loop_graph(graph, self_loops), edge_weight, x.dtype, normalize, square)


def _build(graph: Any, edge_weight: Tensor | None, dtype: torch.dtype, normalize: bool,
           square: bool) -> Structure:
    if not normalize:
        return Structure(graph, edge_weight=None if edge_weight is None else edge_weight.to(dtype))
    return gcn_structure(graph, dtype, symmetric=square or isinstance(graph, Graph),
                         edge_weight=edge_weight)


def detached(structure: Structure) -> Structure:
    """The structure with its tensors detached (kept across calls by `cached=True`)."""
    def detach(tensor: Tensor | None) -> Tensor | None:
        return None if tensor is None else tensor.detach()

    return Structure(structure.graph, detach(structure.inv_sqrt_src),
                     detach(structure.inv_sqrt_dst), detach(structure.edge_weight))
