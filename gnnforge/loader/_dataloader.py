"""`DataLoader`: torch's DataLoader over a sequence of Graphs, collating to GraphBatch.

The counterpart of `torch_geometric.loader.DataLoader`: same arguments, and each batch is
the disjoint union of its graphs (`GraphBatch.from_graphs`, with `graph_ptr` and
`node_graph` where PyG has `ptr` and `batch`). Fixed-shape batches come from
`PackSampler` / `PackedLoader` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch.utils.data

from gnnforge._worker_send import check_sendable
from gnnforge.graph import Graph, GraphBatch

__all__ = ["DataLoader", "collate_graphs"]


def collate_graphs(graphs: Sequence[Graph]) -> GraphBatch:
    """One GraphBatch of `graphs` (torch DataLoader's `collate_fn` for graph datasets).

    In a worker process the batch is checked to pickle, so that an unsendable one raises
    in the main process (`gnnforge._worker_send`) rather than hanging the loader.

    Raises:
        TypeError: when an item is not a gnnforge Graph (naming its position), or the
            batch cannot be sent from a worker.
    """
    for index, graph in enumerate(graphs):
        if not isinstance(graph, Graph):
            raise TypeError(f"collate_graphs: item {index} of the batch is a "
                            f"{type(graph).__name__}, not a gnnforge Graph (convert PyG Data "
                            "with Graph.from_pyg)")
    return check_sendable(GraphBatch.from_graphs(list(graphs)), "collate_graphs")


class DataLoader(torch.utils.data.DataLoader):
    """Batches of `batch_size` graphs as `GraphBatch`es (PyG's DataLoader arguments).

    Args:
        dataset: a sequence of Graphs (a list, or any torch Dataset returning Graphs).
        batch_size: graphs per batch. shuffle: reshuffle every epoch (seed it with
            `generator=torch.Generator().manual_seed(...)`).
        **kwargs: the rest of torch's DataLoader arguments (drop_last, num_workers,
            sampler, batch_sampler, generator, ...); `collate_fn` is this loader's.

    Raises:
        TypeError: when `collate_fn` is passed (the collation is what this class adds).
    """

    def __init__(self, dataset: Sequence[Graph], batch_size: int | None = 1,
                 shuffle: bool | None = None, **kwargs: Any) -> None:
        if "collate_fn" in kwargs:
            raise TypeError("DataLoader: collate_fn is fixed to collate_graphs; use "
                            "torch.utils.data.DataLoader for another collation")
        if "batch_sampler" in kwargs:  # torch requires the defaults beside a batch sampler
            batch_size, shuffle = 1, None
        super().__init__(dataset, batch_size=batch_size, shuffle=shuffle,
                         collate_fn=collate_graphs, **kwargs)
