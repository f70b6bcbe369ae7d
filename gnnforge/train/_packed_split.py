"""One data split as fixed-shape packed batches (tuple packing, `gnnforge.packing`).

A thin adapter over `PackedLoader` that the training loop can index: `plan(epoch)` draws
the epoch's packs (a pure function of seed and epoch, so resume can skip steps without
building them) and `batch(number)` builds one padded `GraphBatch`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from gnnforge.graph import Graph, GraphBatch

__all__ = ["PackedSplit"]


class PackedSplit:
    """Packed batches over `graphs[indices]`.

    Args:
        graphs: the dataset.
        indices: the graphs of this split.
        batch_graphs: average graphs per pack. The (nodes, edges) limits are this many
            times the split's mean graph size (at least the largest graph), so packs hold
            about `batch_graphs` graphs and both limits are nearly filled.
        seed: seeds the per-epoch reshuffle. shuffle=False: one fixed order (evaluation).
        limits: (nodes, edges) limits to take instead (raised to the split's largest
            graph): evaluation splits take the training split's, so that every split has
            the same batch shape where its graphs fit, and a compiled step (torch.compile,
            XLA) compiles once for all of them.
    """

    def __init__(self, graphs: Sequence[Graph], indices: Sequence[int], batch_graphs: int,
                 seed: int = 0, shuffle: bool = True,
                 limits: Sequence[int] | None = None) -> None:
        from gnnforge.packing import PackedLoader

        self.indices = list(indices)
        self.members = [graphs[i] for i in self.indices]
        sizes = np.array([(g.num_nodes, g.num_edges) for g in self.members],
                         dtype=np.int64).reshape(-1, 2)
        wanted = limits or [math.ceil(float(sizes[:, c].mean()) * batch_graphs)
                            for c in range(2)]
        limits = [max(int(wanted[c]), int(sizes[:, c].max()), 1) for c in range(2)]
        self.limits = tuple(limits)
        self.loader = PackedLoader(self.members, limits, max_graphs_per_pack=2 * batch_graphs,
                                   seed=seed, shuffle=shuffle)
        self.real = sizes.sum(0)
        self._packs: list[np.ndarray] = []

    @property
    def shape(self) -> tuple[int, int, int]:
        """(nodes, edges, graph slots) of every batch."""
        loader = self.loader
        return loader.num_nodes, loader.num_edges, loader.num_graphs

    def plan(self, epoch: int) -> list[np.ndarray]:
        """The epoch's packs (positions into `indices`), in order."""
        self._packs = self.loader.epoch_packs(epoch)
        return self._packs

    def __len__(self) -> int:
        return len(self._packs)

    def batch(self, number: int) -> GraphBatch:
        return self.loader.collate(self._packs[number])

    def padding_fraction(self) -> tuple[float, float]:
        """(node, edge) fraction of padding slots over an epoch."""
        packs = max(len(self._packs), 1)
        nodes, edges, _ = self.shape
        return 1 - float(self.real[0]) / (packs * nodes), 1 - float(self.real[1]) / (packs * edges)
