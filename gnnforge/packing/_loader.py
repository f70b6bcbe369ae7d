"""`PackedLoader`: fixed-shape GraphBatches of packed small graphs.

Every batch has exactly `num_nodes` nodes, `num_edges` edges and `num_graphs` graph slots
(`GraphBatch.pad`: one masked padding graph absorbs the padding nodes and edges, padding
edges are self-loops on a padding node), so a compiled model sees one shape for the whole
epoch and never recompiles. Planning is `PackSampler`'s; batches are built by
`PackCollator`'s gathers from the dataset concatenated once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from gnnforge._worker_send import check_sendable
from gnnforge.graph import Graph, GraphBatch
from gnnforge.packing._collate import PackCollator
from gnnforge.packing._plan import PackingPlan
from gnnforge.packing._sampler import PackSampler

__all__ = ["PackedLoader"]


class PackedLoader:
    """Iterate a dataset of graphs as fixed-shape packed batches.

    Args:
        graphs: the dataset (a sequence of Graphs with the same data keys).
        limits, max_graphs_per_pack, heuristic, method, seed, shuffle, oversized, refine:
            as `PackSampler` (limits default from the data: about max_graphs_per_pack
            graphs per pack, 32 when it is None).

    Attributes:
        plan: the PackingPlan. sampler: the PackSampler.
        num_nodes, num_edges, num_graphs: the fixed batch shape (one more node and one
            more graph slot than the limits, for the padding graph).
        dropped: dataset indices left out (oversized='drop').

    Raises:
        ValueError: as `PackSampler`.
    """

    def __init__(self, graphs: Sequence[Graph], limits: Sequence[int] | None = None, *,
                 max_graphs_per_pack: int | None = None,
                 heuristic: str | Callable[[np.ndarray], np.ndarray] = "product",
                 method: str = "lpfhp", seed: int = 0, shuffle: bool = True,
                 oversized: str = "error", refine: float = 0.0) -> None:
        if len(graphs) == 0:
            raise ValueError("PackedLoader: graphs is empty")
        self.graphs = graphs
        self.sampler = PackSampler(graphs, limits, max_graphs_per_pack=max_graphs_per_pack,
                                   heuristic=heuristic, method=method, seed=seed,
                                   shuffle=shuffle, oversized=oversized, refine=refine)
        self.num_nodes = self.sampler.num_nodes
        self.num_edges = self.sampler.num_edges
        self.num_graphs = self.sampler.num_graphs
        self._collate: PackCollator | None = None

    @property
    def plan(self) -> PackingPlan:
        return self.sampler.plan

    @property
    def dropped(self) -> np.ndarray:
        return self.sampler.dropped

    @property
    def shuffle(self) -> bool:
        return self.sampler.shuffle

    @shuffle.setter
    def shuffle(self, value: bool) -> None:
        self.sampler.shuffle = value

    @property
    def epoch(self) -> int:
        return self.sampler.epoch

    def __len__(self) -> int:
        return len(self.sampler)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration use this epoch's shuffle (as DistributedSampler does)."""
        self.sampler.set_epoch(epoch)

    def epoch_packs(self, epoch: int) -> list[np.ndarray]:
        """The dataset indices of every pack of `epoch`, in iteration order."""
        return self.sampler.epoch_packs(epoch)

    def __iter__(self) -> Iterator[GraphBatch]:
        packs = self.epoch_packs(self.sampler.epoch)
        self.sampler.epoch += 1
        for indices in packs:
            yield self.collate(indices)

    def collate(self, indices: np.ndarray) -> GraphBatch:
        """The padded batch of graphs[indices]; the dataset is concatenated on first use."""
        if self._collate is None:
            self._collate = PackCollator(self.graphs, (self.num_nodes, self.num_edges,
                                                       self.num_graphs))
        return check_sendable(self._collate(indices), "PackedLoader.collate")
