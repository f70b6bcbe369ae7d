"""`PackSampler`: a batch sampler that yields the dataset indices of one pack at a time.

It is the planning half of `PackedLoader` (sizes, limits, the packing plan, the
per-epoch assignment of graphs to pack places), usable on its own as the `batch_sampler`
of torch's `DataLoader` (or PyG's, a subclass), with `collate` padding each batch to the
pack shape so that every batch has one fixed shape.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from torch.utils.data import Sampler

from gnnforge._worker_send import check_sendable
from gnnforge.graph import Graph, GraphBatch
from gnnforge.packing._assign import PackAssigner
from gnnforge.packing._histogram import size_histogram
from gnnforge.packing._pack import pack
from gnnforge.packing._plan import PackingPlan
from gnnforge.packing._search import DEFAULT_GRAPHS_PER_PACK, default_limits

__all__ = ["PackSampler", "graph_sizes"]


def graph_sizes(graphs: Sequence[Any] | np.ndarray) -> np.ndarray:
    """[n, 2] int64 (nodes, edges) of gnnforge Graphs, PyG Data objects (anything with
    `num_nodes` and `num_edges`), or an [n, 2] array of sizes passed through."""
    if isinstance(graphs, np.ndarray):
        sizes = graphs.astype(np.int64, copy=False)
        if sizes.ndim != 2 or sizes.shape[1] != 2:
            raise ValueError(f"sizes must be an [n, 2] array of (nodes, edges), got shape "
                             f"{sizes.shape}")
        return sizes
    rows = []
    for index, graph in enumerate(graphs):
        if not (hasattr(graph, "num_nodes") and hasattr(graph, "num_edges")):
            raise TypeError(f"graphs[{index}] is a {type(graph).__name__} without num_nodes "
                            "and num_edges; pass gnnforge Graphs, PyG Data or [n, 2] sizes")
        rows.append((int(graph.num_nodes), int(graph.num_edges)))
    return np.array(rows, dtype=np.int64).reshape(-1, 2)


class PackSampler(Sampler[list[int]]):
    """Yield each pack's dataset indices; an epoch yields every kept graph exactly once.

    Args:
        graphs: the dataset (gnnforge Graphs or PyG Data) or its [n, 2] (nodes, edges).
        limits: (nodes, edges) real capacity per pack. Default: chosen from the data for
            about `max_graphs_per_pack` graphs per pack (32 when that is None) by a small
            limit search (`default_limits`), never below the largest graph.
        max_graphs_per_pack: cap on real graphs per pack; default none (the plan's
            largest pack sets the slot count).
        heuristic, method: passed to `pack` (method 'lpfhp', 'spfhp' or 'none').
        seed: seeds the per-epoch reshuffle (graphs among same-size places, pack order).
        shuffle: False keeps a fixed assignment and pack order.
        oversized: 'error' raises naming the first graph above a limit; 'drop' leaves
            such graphs out (`dropped` lists their indices; `plan.dropped` counts them).
        refine: seconds of LP refinement for the plan; 0 skips it. See `pack`.

    Attributes:
        plan: the PackingPlan. limits: the (nodes, edges) limits used.
        num_nodes, num_edges, num_graphs: the padded batch shape (one more node and one
            more graph slot than the limits, for the padding graph).
        dropped: dataset indices left out (oversized='drop').

    Raises:
        ValueError: on an empty dataset, a method that may overflow ('nodes_only',
            'edges_only'), bad limits, or an oversized graph with oversized='error'.
    """

    def __init__(self, graphs: Sequence[Any] | np.ndarray, limits: Sequence[int] | None = None,
                 *, max_graphs_per_pack: int | None = None,
                 heuristic: str | Callable[[np.ndarray], np.ndarray] = "product",
                 method: str = "lpfhp", seed: int = 0, shuffle: bool = True,
                 oversized: str = "error", refine: float = 0.0) -> None:
        sizes = graph_sizes(graphs)
        if sizes.shape[0] == 0:
            raise ValueError("PackSampler: graphs is empty")
        if method not in ("lpfhp", "spfhp", "none"):
            raise ValueError(f"PackSampler: method must be 'lpfhp', 'spfhp' or 'none' (the "
                             f"single-component baselines can overflow), got {method!r}")
        if limits is None:
            limits_array = default_limits(sizes, max_graphs_per_pack or DEFAULT_GRAPHS_PER_PACK,
                                          heuristic=heuristic, method=method)
        else:
            limits_array = np.asarray(limits, np.int64)
        keep = _check_sizes(sizes, limits_array, oversized)
        self.limits = limits_array
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

    def __len__(self) -> int:
        return len(self._assigner)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration use this epoch's shuffle (as DistributedSampler does)."""
        self.epoch = epoch

    def epoch_packs(self, epoch: int) -> list[np.ndarray]:
        """The dataset indices of every pack of `epoch`, in iteration order."""
        return self._assigner.epoch(epoch, self.shuffle)

    def __iter__(self) -> Iterator[list[int]]:
        packs = self.epoch_packs(self.epoch)
        self.epoch += 1
        for indices in packs:
            yield indices.tolist()

    def collate(self, graphs: Sequence[Graph]) -> GraphBatch:
        """The padded GraphBatch of one pack's graphs (torch DataLoader's `collate_fn`)."""
        batch = GraphBatch.from_graphs(list(graphs)).pad(self.num_nodes, self.num_edges,
                                                         self.num_graphs)
        return check_sendable(batch, "PackSampler.collate")


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
