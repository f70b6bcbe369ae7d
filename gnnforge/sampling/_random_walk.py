"""PinSAGE-style sampling: neighbours are the most visited vertices of short random walks."""

from __future__ import annotations

import numpy as np

from gnnforge.graph import Graph
from gnnforge.sampling._common import LayerwiseSampler
from gnnforge.sampling._kernels import random_walk_layer

__all__ = ["RandomWalkSampler"]


class RandomWalkSampler(LayerwiseSampler):
    """Random walks with restart from each seed; the top-k visited become its neighbours.

    (Ying et al., "Graph Convolutional Neural Networks for Web-Scale Recommender Systems".)
    Walks follow in-edges, so information still flows along edge direction. Block edges
    are not parent edges (`edge_ids` is -1); `edge_weight` holds the visit counts.

    Args:
        num_layers: number of blocks.
        num_neighbors: k, the most visited vertices kept per seed.
        walk_length: steps per walk.
        num_walks: walks per seed.
        restart_prob: probability of jumping back to the seed after each step.
    """

    def __init__(self, num_layers: int, num_neighbors: int = 10, walk_length: int = 3,
                 num_walks: int = 20, restart_prob: float = 0.5) -> None:
        for name, value in (("num_layers", num_layers), ("num_neighbors", num_neighbors),
                            ("walk_length", walk_length), ("num_walks", num_walks)):
            if not isinstance(value, int | np.integer) or value < 1:
                raise ValueError(f"RandomWalkSampler: {name} must be an int >= 1, got {value!r}")
        if not 0.0 <= restart_prob < 1.0:
            raise ValueError("RandomWalkSampler: restart_prob must lie in [0, 1), got "
                             f"{restart_prob}")
        self._num_layers = int(num_layers)
        self.num_neighbors = int(num_neighbors)
        self.walk_length = int(walk_length)
        self.num_walks = int(num_walks)
        self.restart_prob = float(restart_prob)

    @property
    def num_layers(self) -> int:
        return self._num_layers

    def layer_fn(self, graph: Graph):
        """The per-layer kernel call `(in_edges, rows, frontier, layer, key) -> picks`."""
        del graph  # walks need only the CSR

        def layer(edges, rows, frontier, index, layer_key):
            if edges.nodes is not None:
                raise ValueError("RandomWalkSampler needs the whole graph (walks leave the "
                                 "partition); use NeighborSampler or LaborSampler on "
                                 "partitioned data")
            counts, src, weight = random_walk_layer(
                edges.rowptr, edges.col, frontier, self.walk_length, self.num_walks, self.restart_prob,
                self.num_neighbors, layer_key.key_a, layer_key.key_b, layer_key.mix,
                layer_key.dependent)
            return counts, src, np.full(src.size, -1, dtype=np.int64), weight

        return layer

    def __repr__(self) -> str:
        return (f"RandomWalkSampler(num_layers={self.num_layers}, "
                f"num_neighbors={self.num_neighbors}, walk_length={self.walk_length}, "
                f"num_walks={self.num_walks}, restart_prob={self.restart_prob})")
