"""PyG's gcn_norm for the planned layers (GCN, SGC, TAGCN): the prepared graph and its
degree factors, with edge weights, `improved` loops and `normalize=False`."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from gnnforge.graph import Graph
from gnnforge.nn._planned import loop_graph, prepared_structure, with_loop_values
from gnnforge.plan._execute import Structure, gcn_structure

__all__ = ["detached", "gcn_norm_structure"]


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
