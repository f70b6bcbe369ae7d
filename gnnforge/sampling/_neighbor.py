"""Uniform neighbour sampling (GraphSAGE's NS)."""

from __future__ import annotations

from collections.abc import Sequence

from gnnforge.graph import Graph
from gnnforge.sampling._common import LayerwiseSampler, check_fanouts
from gnnforge.sampling._kernels import neighbor_layer

__all__ = ["NeighborSampler"]


class NeighborSampler(LayerwiseSampler):
    """Multi-layer uniform neighbour sampling over in-edges (Hamilton et al., GraphSAGE).

    Each destination of a layer keeps min(fanout, d) distinct in-edges drawn uniformly
    (all of them when d <= fanout), or `fanout` draws with replacement.

    Args:
        fanouts: one fanout per layer, input layer first (-1: every in-neighbour).
        replace: draw with replacement.

    Example:
        >>> blocks = NeighborSampler([10, 10]).sample(graph, seeds, generator=g)
        >>> blocks[-1].dst_nodes  # == seeds
    """

    def __init__(self, fanouts: Sequence[int], replace: bool = False) -> None:
        self.fanouts = check_fanouts("NeighborSampler", fanouts)
        self.replace = bool(replace)

    @property
    def num_layers(self) -> int:
        return len(self.fanouts)

    def layer_fn(self, graph: Graph):
        """The per-layer kernel call `(in_edges, rows, frontier, layer, key) -> picks`."""
        del graph  # uniform picks need only the CSR
        fanouts = self.fanouts

        def layer(edges, rows, frontier, index, layer_key):
            counts, src, eid = neighbor_layer(
                edges.rowptr, edges.col, edges.eids, rows, frontier, fanouts[index], self.replace, layer_key.key_a,
                layer_key.key_b, layer_key.mix, layer_key.dependent)
            return counts, src, eid, None

        return layer

    def __repr__(self) -> str:
        return f"NeighborSampler(fanouts={self.fanouts}, replace={self.replace})"


