"""`PackedLoader`: fixed-shape GraphBatches of packed small graphs.

Every batch has exactly `num_nodes` nodes, `num_edges` edges and `num_graphs` graph slots
(`GraphBatch.pad`: one masked padding graph absorbs the padding nodes and edges, padding
edges are self-loops on a padding node), so a compiled model sees one shape for the whole
epoch and never recompiles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from gnnforge.graph import Graph, GraphBatch
from gnnforge.packing._assign import PackAssigner
from gnnforge.packing._collate import PackCollator
from gnnforge.packing._histogram import size_histogram
from gnnforge.packing._pack import pack
from gnnforge.packing._plan import PackingPlan

__all__ = ["PackedLoader"]


class PackedLoader:
    """Iterate a dataset of graphs as fixed-shape packed batches.

    Args:
        graphs: the dataset (a sequence of Graphs with the same data keys).
        limits: (nodes, edges) real capacity per pack; default the dataset maximum.
        max_graphs_per_pack: cap on real graphs per pack; default none (the plan's
            largest pack sets the slot count).
        heuristic, method: passed to `pack` (method 'lpfhp' or 'spfhp').
        seed: seeds the per-epoch reshuffle (graphs among same-size places, pack order).
        shuffle: False keeps a fixed assignment and pack order.
        oversized: 'error' raises naming the first graph above a limit; 'drop' leaves
            such graphs out (`dropped` lists their indices; `plan.dropped` counts them).
        refine: seconds of LP refinement for the plan (fewer packs, a proven bound in
            `plan.lp`); 0 skips it. See `pack`.

    Attributes:
        plan: the PackingPlan.
        num_nodes, num_edges, num_graphs: the fixed batch shape (one more node and one
            more graph slot than the limits, for the padding graph).
        dropped: dataset indices left out (oversized='drop').

    Raises:
        ValueError: on an empty dataset, a method that may overflow ('nodes_only',
            'edges_only'), or an oversized graph with oversized='error'.
    """

    def __init__(self, graphs: Sequence[Graph], limits: Sequence[int] | None = None, *,
                 max_graphs_per_pack: int | None = None,
                 heuristic: str | Callable[[np.ndarray], np.ndarray] = "product",
                 method: str = "lpfhp", seed: int = 0, shuffle: bool = True,
                 oversized: str = "error", refine: float = 0.0) -> None:
        if len(graphs) == 0:
            raise ValueError("PackedLoader: graphs is empty")
        if method not in ("lpfhp", "spfhp", "none"):
            raise ValueError(f"PackedLoader: method must be 'lpfhp', 'spfhp' or 'none' (the "
                             f"single-component baselines can overflow), got {method!r}")
        self.graphs = graphs
        sizes = np.array([(g.num_nodes, g.num_edges) for g in graphs], dtype=np.int64)
        limits_array = sizes.max(axis=0) if limits is None else np.asarray(limits, np.int64)
        keep = self._check_sizes(sizes, limits_array, oversized)
        self.dropped = np.flatnonzero(~keep)
        self.plan: PackingPlan = pack(size_histogram(sizes[keep]), limits_array, heuristic,
                                      method, max_graphs_per_pack, refine=refine)
        # The plan saw only kept graphs; report the dropped ones through it as well.
        for row in sizes[~keep].tolist():
            self.plan.dropped[tuple(row)] = self.plan.dropped.get(tuple(row), 0) + 1
        self._assigner = PackAssigner(self.plan, sizes, keep, seed)
        self.shuffle = shuffle
        self.epoch = 0
        largest = max((len(shape) for shape, _ in self.plan.packs), default=0)
        self.num_nodes = int(limits_array[0]) + 1
        self.num_edges = int(limits_array[1])
        self.num_graphs = (max_graphs_per_pack or largest) + 1
        self._collate: PackCollator | None = None

    @staticmethod
    def _check_sizes(sizes: np.ndarray, limits: np.ndarray, oversized: str) -> np.ndarray:
        if limits.shape != (2,) or (limits < 1).any():
            raise ValueError(f"limits: expected two positive ints (nodes, edges), got "
                             f"{limits.tolist()}")
        if oversized not in ("error", "drop"):
            raise ValueError(f"oversized: expected 'error' or 'drop', got {oversized!r}")
        over = (sizes > limits).any(axis=1)
        if over.any() and oversized == "error":
            first = int(np.flatnonzero(over)[0])
            raise ValueError(
                f"graphs[{first}] has {sizes[first, 0]} nodes and {sizes[first, 1]} edges, above "
                f"the limits {limits.tolist()} ({int(over.sum())} graphs are too large); raise "
                "limits or pass oversized='drop' to leave them out and count them")
        return ~over

    def __len__(self) -> int:
        return len(self._assigner)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration use this epoch's shuffle (as DistributedSampler does)."""
        self.epoch = epoch

    def epoch_packs(self, epoch: int) -> list[np.ndarray]:
        """The dataset indices of every pack of `epoch`, in iteration order."""
        return self._assigner.epoch(epoch, self.shuffle)

    def __iter__(self) -> Iterator[GraphBatch]:
        packs = self.epoch_packs(self.epoch)
        self.epoch += 1
        for indices in packs:
            yield self.collate(indices)

    def collate(self, indices: np.ndarray) -> GraphBatch:
        """The padded batch of graphs[indices]; the dataset is concatenated on first use."""
        if self._collate is None:
            self._collate = PackCollator(self.graphs, (self.num_nodes, self.num_edges,
                                                       self.num_graphs))
        return self._collate(indices)
