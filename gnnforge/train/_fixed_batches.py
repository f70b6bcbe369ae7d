"""Static-shape batches of small graphs: seeded order, next-fit into fixed limits, padded.

Every batch has exactly `max_nodes` nodes, `max_edges` edges and `max_graphs` graph slots
(padding masked, padding edges are loops on a padding node), so a compiled model sees one
shape. Graphs are taken in a seeded per-epoch order and a batch closes when the next graph
would overflow a limit (next-fit), which keeps the order a pure function of (seed, epoch).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from gnnforge.graph import Graph, GraphBatch

__all__ = ["FixedShapeBatches"]


class FixedShapeBatches:
    """Fixed-shape batches over `graphs[indices]`.

    Args:
        graphs: the dataset.
        indices: which graphs this split uses.
        batch_graphs: average graphs per batch; the node and edge limits are this many
            times the split's mean size (rounded up), so they bind before the slot limit.
        seed: base seed; epoch e shuffles with seed * 1_000_003 + e. shuffle=False keeps
            the given order (evaluation).

    Raises:
        ValueError: when a graph cannot fit the limits (names it).
    """

    def __init__(self, graphs: Sequence[Graph], indices: Sequence[int], batch_graphs: int,
                 seed: int = 0, shuffle: bool = True) -> None:
        self.graphs, self.indices = graphs, list(indices)
        self.seed, self.shuffle = seed, shuffle
        sizes = torch.tensor([[graphs[i].num_nodes, graphs[i].num_edges] for i in self.indices],
                             dtype=torch.int64).reshape(-1, 2)
        self.sizes = sizes
        mean = sizes.double().mean(0) if len(self.indices) else torch.ones(2)
        largest = sizes.max(0).values if len(self.indices) else torch.ones(2, dtype=torch.int64)
        # One node and one graph slot are reserved for the padding graph.
        self.max_nodes = max(math.ceil(float(mean[0]) * batch_graphs), int(largest[0])) + 1
        self.max_edges = max(math.ceil(float(mean[1]) * batch_graphs), int(largest[1]), 1)
        self.max_graphs = 2 * batch_graphs + 1
        self._plan: list[list[int]] = []

    def plan(self, epoch: int) -> list[list[int]]:
        """The epoch's batches as lists of positions into `indices`."""
        order = torch.arange(len(self.indices))
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            order = torch.randperm(len(self.indices), generator=generator)
        batches, current, nodes, edges = [], [], 0, 0
        for position in order.tolist():
            n, e = (int(v) for v in self.sizes[position])
            if current and (nodes + n > self.max_nodes - 1 or edges + e > self.max_edges
                            or len(current) + 1 > self.max_graphs - 1):
                batches.append(current)
                current, nodes, edges = [], 0, 0
            current.append(position)
            nodes, edges = nodes + n, edges + e
        if current:
            batches.append(current)
        self._plan = batches
        return batches

    def __len__(self) -> int:
        return len(self._plan)

    def batch(self, number: int) -> GraphBatch:
        """Batch `number` of the last `plan`, padded to the fixed shape."""
        positions = self._plan[number]
        batch = GraphBatch.from_graphs([self.graphs[self.indices[p]] for p in positions])
        return batch.pad(self.max_nodes, self.max_edges, self.max_graphs)

    def padding_fraction(self) -> tuple[float, float]:
        """(node, edge) fraction of padding slots over the last `plan`."""
        slots = max(len(self._plan), 1)
        real = self.sizes.sum(0).double()
        return (1 - float(real[0]) / (slots * self.max_nodes),
                1 - float(real[1]) / (slots * self.max_edges))
