"""Relational GCN (Schlichtkrull et al., "Modeling Relational Data with Graph
Convolutional Networks", ESWC 2018) with basis or block-diagonal decomposition; equal to
PyG's RGCNConv, and planned (`gnnforge.plan`) for the mean and sum aggregators."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from gnnforge._static_shapes import bincount, static_shapes
from gnnforge.graph import BipartiteGraph
from gnnforge.nn._aggregate import check_aggr, check_node_input, dst_part, reduce_neighbors
from gnnforge.nn._aggregate import weighted_neighbor_sum
from gnnforge.nn._planned import AUTO, add_plan_bias
from gnnforge.plan._auto import run_plan
from gnnforge.plan._execute import Structure
from gnnforge.plan._expressions import rgcn_expression
from gnnforge.plan._ir import Node
from gnnforge.plan._primitives import Composition
from gnnforge.plan._relational import RelationalGraph

__all__ = ["RGCNConv"]


class RGCNConv(nn.Module):
    r"""out_v = W_root · x_v + b + sum_r W_r · aggr_{u -r-> v} x_u.

    With `num_bases=B`, W_r = sum_b comp[r, b] · V_b (basis decomposition); with
    `num_blocks=nb`, each W_r is block-diagonal with nb blocks of (F_in / nb) x
    (F_out / nb). Parameter names and shapes are PyG's (`weight`, `comp`, `root`, `bias`).

    For 'mean' and 'sum' the evaluation order is planned (`plan`: "auto", the default,
    chooses per graph and width; "default" or None is PyG's order; a composition from
    `gnnforge.plan.layer_candidates` fixes one): aggregate within each relation then
    transform by W_r (PyG), or transform x by every W_r and aggregate once, summing the
    relations as it goes; with bases also: aggregate, mix the R aggregates into B by
    comp, then B products; aggregate over B basis adjacencies (edge weights comp[r_e, b])
    then B products; or project x by the B bases and aggregate those. Every order gives
    PyG's values; none builds an [E, F] tensor. 'max' aggregates per relation then
    transforms (when F_in <= F_out) or transforms first, by the width rule.

    Args:
        in_channels, out_channels: F_in, F_out.
        num_relations: R; edge types must lie in [0, R).
        num_bases: B for the basis decomposition, or None.
        num_blocks: nb for the block-diagonal decomposition (dividing F_in and F_out),
            or None. At most one of num_bases and num_blocks.
        aggr: 'mean' (PyG's default), 'sum' (or 'add') or 'max' within each relation.
        root_weight: add W_root · x_v.
        is_sorted: PyG's promise that edges are sorted by edge type, which lets PyG skip a
            sort. Accepted for compatibility and ignored: no order here sorts edges by
            type (the relational views index (relation, node) slots directly), so the
            results are the same either way.
        bias: add a learnable bias.

    Shapes:
        x: [num_src_nodes, F_in] float; edge_type: [E] int64 (default: graph.edge_type);
        returns [num_dst_nodes, F_out].
    """

    def __init__(self, in_channels: int, out_channels: int, num_relations: int,
                 num_bases: int | None = None, num_blocks: int | None = None,
                 aggr: str = "mean", root_weight: bool = True, is_sorted: bool = False,
                 bias: bool = True) -> None:
        super().__init__()
        check_aggr("RGCNConv", aggr)
        if num_relations < 1:
            raise ValueError(f"RGCNConv: num_relations must be >= 1, got {num_relations}")
        if num_bases is not None and num_bases < 1:
            raise ValueError(f"RGCNConv: num_bases must be >= 1 or None, got {num_bases}")
        if num_bases is not None and num_blocks is not None:
            raise ValueError("RGCNConv: num_bases and num_blocks cannot both be set (one "
                             "decomposition per layer, as in PyG)")
        if num_blocks is not None and (num_blocks < 1 or in_channels % num_blocks
                                       or out_channels % num_blocks):
            raise ValueError(f"RGCNConv: num_blocks must be >= 1 and divide in_channels="
                             f"{in_channels} and out_channels={out_channels}, got {num_blocks}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.num_relations, self.num_bases, self.aggr = num_relations, num_bases, aggr
        self.num_blocks, self.is_sorted = num_blocks, is_sorted
        if num_blocks is not None:
            self.weight = nn.Parameter(torch.empty(num_relations, num_blocks,
                                                   in_channels // num_blocks,
                                                   out_channels // num_blocks))
        else:
            count = num_bases if num_bases is not None else num_relations
            self.weight = nn.Parameter(torch.empty(count, in_channels, out_channels))
        self.comp = nn.Parameter(torch.empty(num_relations, num_bases)) if num_bases else None
        self.root = nn.Parameter(torch.empty(in_channels, out_channels)) if root_weight else None
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        self._views: tuple | None = None  # (graph, edge_type, by_dst, view, edge weight)
        self.plan: Composition | str | None = AUTO
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for parameter in (self.weight, self.comp, self.root):
            if parameter is not None:
                _glorot(parameter)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def relation_weights(self) -> Tensor:
        """[R, F_in, F_out] W_r (composed from the bases, or the blocks laid on the
        diagonal)."""
        if self.num_blocks is not None:
            return torch.stack([torch.block_diag(*blocks) for blocks in self.weight])
        if self.comp is None:
            return self.weight
        bases = self.weight.reshape(self.num_bases, -1)
        return (self.comp @ bases).reshape(self.num_relations, self.in_channels, -1)

    def plan_expression(self) -> Node | None:
        """The layer's expression for the planner (None for 'max': one order only)."""
        if self.aggr == "max":
            return None
        decomposition = ("basis" if self.num_bases is not None
                         else "block" if self.num_blocks is not None else None)
        return rgcn_expression("sum" if self.aggr == "add" else self.aggr, decomposition,
                               self.root is not None, self.bias is not None)

    def plan_symbols(self) -> dict[str, int]:
        return {"I": self.in_channels, "O": self.out_channels, "H": 1, "D": self.out_channels,
                "R": self.num_relations, "B": self.num_bases or 1,
                "Ib": self.in_channels // (self.num_blocks or 1)}

    def forward(self, graph: Any, x: Tensor, edge_type: Tensor | None = None) -> Tensor:
        check_node_input("RGCNConv", graph, x)
        edge_type = self._edge_types(graph, edge_type)
        expression = self.plan_expression()
        # Traced (torch.compile): the relation-wise orders below; the planner's IR and
        # measurements are Python the tracer cannot see through.
        if expression is None or x.dim() != 2 or torch.compiler.is_compiling():
            return self._relation_wise(graph, x, edge_type)
        leaves = {"X": x}
        if self.num_bases is not None:
            leaves.update(V=self.weight, C=self.comp.unsqueeze(0))
        else:
            leaves["W"] = self.weight                    # [R, I, O] or [R, nb, I/nb, O/nb]
        if self.root is not None:
            leaves["Wroot"] = self.root.unsqueeze(0)
        if self.bias is not None:
            leaves["b"] = self.bias.reshape(1, 1, -1)
        out = run_plan(self, expression, self._structure(graph, edge_type), leaves)
        return out.reshape(graph.num_dst_nodes, self.out_channels)             # [Nd, O]

    def _structure(self, graph: Any, edge_type: Tensor) -> Structure:
        """The graph with its relational views, kept for the last (graph, edge types)."""
        cached = self.__dict__.get("_relational")
        if cached is not None and cached[0] is graph and cached[1] is edge_type:
            return cached[2]
        relations = RelationalGraph(graph, edge_type.to(torch.int64), self.num_relations,
                                    mean=self.aggr == "mean")
        structure = Structure(graph, memo={"relational": relations})
        self.__dict__["_relational"] = (graph, edge_type, structure)
        return structure

    def _relation_wise(self, graph: Any, x: Tensor, edge_type: Tensor) -> Tensor:
        weights = self.relation_weights()                              # [R, F_in, F_out]
        if self.aggr == "max" or self.in_channels <= self.out_channels:
            view, _ = self._view(graph, edge_type, by_dst=True)
            per_relation = reduce_neighbors(view, x, self.aggr)        # [R * N_dst, F_in]
            per_relation = per_relation.reshape(self.num_relations, graph.num_dst_nodes,
                                                x.shape[-1])
            out = torch.einsum("rnf,rfo->no", per_relation, weights)
        else:
            view, edge_weight = self._view(graph, edge_type, by_dst=False)
            transformed = torch.einsum("nf,rfo->rno", x, weights)      # [R, N_src, F_out]
            out = weighted_neighbor_sum(view, transformed.reshape(-1, self.out_channels),
                                        edge_weight.to(x.dtype))
        if self.root is not None:
            out = out + dst_part(graph, x) @ self.root
        return add_plan_bias(out, self.bias)

    def _edge_types(self, graph: Any, edge_type: Tensor | None) -> Tensor:
        if edge_type is None:
            edge_type = getattr(graph, "edge_type", None)
        if edge_type is None:
            raise ValueError("RGCNConv: the graph has no edge_type; pass edge_type=[E] int64")
        if edge_type.shape != (graph.num_edges,):
            raise ValueError(f"RGCNConv: edge_type must have shape [{graph.num_edges}], "
                             f"got {tuple(edge_type.shape)}")
        # With static shapes (XLA, torch.compile) the host is not read: check the relations
        # on the CPU side, before the batch moves.
        if (edge_type.numel() and not static_shapes(edge_type)
                and int(edge_type.max()) >= self.num_relations):
            position = int(torch.argmax(edge_type))
            raise ValueError(f"RGCNConv: edge_type[{position}] = {int(edge_type[position])} "
                             f"but num_relations={self.num_relations}")
        return edge_type

    def _view(self, graph: Any, edge_type: Tensor, by_dst: bool) -> tuple[BipartiteGraph, Tensor]:
        cached = self._views
        if (cached is not None and cached[0] is graph and cached[1] is edge_type
                and cached[2] == by_dst):
            return cached[3], cached[4]
        src, dst = graph.coo()
        num_src, num_dst, relations = graph.num_src_nodes, graph.num_dst_nodes, self.num_relations
        edge_type = edge_type.to(torch.int64)
        slot = edge_type * num_dst + dst                               # (relation, dst) id
        if by_dst:
            view = BipartiteGraph._trusted(src, slot, num_src, relations * num_dst)
            weight = torch.ones(0)
        else:
            view = BipartiteGraph._trusted(edge_type * num_src + src, dst, relations * num_src,
                                           num_dst)
            weight = torch.ones(src.numel(), dtype=torch.float64, device=src.device)
            if self.aggr == "mean":
                # float64 so that the cast to x's dtype is exact in float64 and rounded once
                # in float32 (a float32 reciprocal made float64 results float32-accurate).
                counts = bincount(slot, relations * num_dst)  # scatter-add on XLA
                weight = 1.0 / counts[slot].to(torch.float64)
        self._views = (graph, edge_type, by_dst, view, weight)
        return view, weight

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, num_relations={self.num_relations}, "
                f"num_bases={self.num_bases}, num_blocks={self.num_blocks}, aggr={self.aggr!r}")


def _glorot(parameter: Tensor) -> None:
    # PyG's glorot: uniform in +-sqrt(6 / (fan_in + fan_out)) over the last two dims.
    bound = math.sqrt(6.0 / (parameter.size(-2) + parameter.size(-1)))
    with torch.no_grad():
        parameter.uniform_(-bound, bound)
