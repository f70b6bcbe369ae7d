"""A typed graph as RGCN's plans see it: one adjacency per relation, stacked as heads.

Every edge belongs to one relation, so the stacked adjacency A_r [R, Nd, Ns] is never
built: each product with it is one SpMM over a re-indexed view of the graph whose rows
are (node, relation) slots, node-major (slot = node x R + relation), so a view's output
is already the executor's `[rows, heads, cols]` layout:

    A_r @ Y, Y shared   sources u -> slots (v, r_e)              [Nd, R, F]
    A_r @ Y_r           slots (u, r_e) -> slots (v, r_e)          [Nd, R, F]
    sum_r A_r @ Y_r     slots (u, r_e) -> v, one SpMM summing relations as it
                        aggregates                               [Nd, 1, F]

For the mean (PyG's default aggregator) each relation is averaged on its own: an edge
of relation r into v weighs 1 / deg_r(v). Views and weights depend on the graph and
the edge types alone, so they are built once per (graph, edge types) and kept here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from gnnforge.graph import BipartiteGraph

__all__ = ["RelationalGraph"]


@dataclass(eq=False)
class RelationalGraph:
    """The graph, its edge types and how relations are reduced.

    Attributes:
        graph: any object with num_src_nodes/num_dst_nodes/coo/csr (kernel protocol).
        edge_type: [E] int64 relation of each edge, in [0, num_relations).
        num_relations: R.
        mean: average within each relation (else sum).
    """

    graph: Any
    edge_type: Tensor
    num_relations: int
    mean: bool
    _memo: dict = field(default_factory=dict, repr=False)

    def _cached(self, name: str, build) -> Any:
        if name not in self._memo:
            self._memo[name] = build()
        return self._memo[name]

    def edge_norm(self, dtype: torch.dtype) -> Tensor:
        """[E] weight of each edge: 1 / deg_{r_e}(v_e) for the mean, else 1."""
        def build() -> Tensor:
            src, dst = self.graph.coo()
            if not self.mean:
                return torch.ones(src.numel(), dtype=torch.float64, device=src.device)
            slot = dst * self.num_relations + self.edge_type
            counts = torch.bincount(slot, minlength=self.graph.num_dst_nodes * self.num_relations)
            # float64, so the cast to x's dtype rounds once (as RGCNConv's weights)
            return 1.0 / counts[slot].to(torch.float64)
        return self._cached("norm", build).to(dtype)

    def to_slots(self) -> BipartiteGraph:
        """Sources u -> destination slots (v, r_e): A_r @ Y with Y shared."""
        def build() -> BipartiteGraph:
            src, dst = self.graph.coo()
            return BipartiteGraph._trusted(src, dst * self.num_relations + self.edge_type,
                                           self.graph.num_src_nodes,
                                           self.graph.num_dst_nodes * self.num_relations)
        return self._cached("to_slots", build)

    def slots_to_slots(self) -> BipartiteGraph:
        """Source slots (u, r_e) -> destination slots (v, r_e): A_r @ Y_r."""
        def build() -> BipartiteGraph:
            src, dst = self.graph.coo()
            r = self.num_relations
            return BipartiteGraph._trusted(src * r + self.edge_type, dst * r + self.edge_type,
                                           self.graph.num_src_nodes * r,
                                           self.graph.num_dst_nodes * r)
        return self._cached("slots_to_slots", build)

    def slots_to_nodes(self) -> BipartiteGraph:
        """Source slots (u, r_e) -> destinations v: sum_r A_r @ Y_r in one SpMM."""
        def build() -> BipartiteGraph:
            src, dst = self.graph.coo()
            r = self.num_relations
            return BipartiteGraph._trusted(src * r + self.edge_type, dst,
                                           self.graph.num_src_nodes * r,
                                           self.graph.num_dst_nodes)
        return self._cached("slots_to_nodes", build)
