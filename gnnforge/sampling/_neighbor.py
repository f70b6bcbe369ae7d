"""Uniform neighbour sampling (GraphSAGE's NS)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gnnforge.graph import Graph
from gnnforge.sampling._common import InEdges, LayerwiseSampler, check_fanouts
from gnnforge.sampling._kernels import neighbor_counts, neighbor_picks
from gnnforge.sampling._threads import run_on_threads, sampler_threads
from gnnforge.sampling._variates import VariateKey

__all__ = ["NeighborSampler", "neighbor_layer"]


class NeighborSampler(LayerwiseSampler):
    """Multi-layer uniform neighbour sampling over in-edges (Hamilton et al., GraphSAGE).

    Each destination of a layer keeps min(fanout, d) distinct in-edges drawn uniformly
    (all of them when d <= fanout), or `fanout` draws with replacement. A layer's draws
    run on torch's intra-op thread count (`torch.set_num_threads`), split by
    destinations; the picks are the same on any number of threads.

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
            counts, src, eid = neighbor_layer(edges, rows, frontier, fanouts[index],
                                              self.replace, layer_key)
            return counts, src, eid, None

        return layer

    def __repr__(self) -> str:
        return f"NeighborSampler(fanouts={self.fanouts}, replace={self.replace})"


def neighbor_layer(edges: InEdges, rows: np.ndarray, frontier: np.ndarray, fanout: int,
                   replace: bool, key: VariateKey, threads: int | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One NS layer: (picks per destination, picked source ids, their parent edge ids).

    The destinations are split into `sampler_threads` ranges of equal picks, each drawn
    and gathered on its own thread into its part of the outputs (`neighbor_picks`).

    Args:
        edges: the in-edges; rows: each destination's CSR row; frontier: [n] their ids.
        threads: thread count; torch's intra-op count when None.
    """
    degree, counts = neighbor_counts(edges.rowptr, rows, fanout, replace)
    starts = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    total = int(starts[-1])
    pos = np.empty(total, dtype=np.int64)
    src = np.empty(total, dtype=np.int64)
    eid = pos if edges.eids.size == 0 else np.empty(total, dtype=np.int64)
    parts = sampler_threads(total, threads)
    # Range t holds the destinations whose picks start in [t/parts, (t+1)/parts) of all.
    bounds = np.searchsorted(starts[:-1], [total * t // parts for t in range(parts)] + [total])
    bounds[0], bounds[-1] = 0, counts.size

    def draw(lo: int, hi: int) -> None:
        neighbor_picks(edges.rowptr, edges.col, edges.eids, rows, frontier, degree, counts,
                       starts, fanout, replace, key.key_a, key.key_b, key.mix, key.dependent,
                       lo, hi, pos, src, eid)

    run_on_threads([lambda t=t: draw(int(bounds[t]), int(bounds[t + 1]))
                    for t in range(parts)])
    return counts, src, eid
