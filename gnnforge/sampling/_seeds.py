"""Minibatch seeds: shuffled node batches and edge batches with one negative per edge."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from gnnforge.graph import Graph

__all__ = ["EdgeBatch", "EdgeSeeds", "NodeSeeds"]


def _check_batch_size(name: str, batch_size: int) -> int:
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"{name}: batch_size must be an int >= 1, got {batch_size!r}")
    return batch_size


def _num_batches(total: int, batch_size: int, drop_last: bool) -> int:
    full, rest = divmod(total, batch_size)
    return full + (1 if rest and not drop_last else 0)


class NodeSeeds:
    """Node-prediction seeds: `nodes` shuffled once per epoch and cut into batches.

    Args:
        nodes: [n] int64 node ids (e.g. the training nodes).
        batch_size: seeds per batch.
        shuffle: reshuffle every epoch (epoch e uses a generator seeded with (seed, e)).
        seed: seed of the shuffles.
        drop_last: drop a final batch smaller than batch_size.

    Iterating yields [b] int64 tensors; `set_epoch(e)` picks the epoch's order.
    """

    def __init__(self, nodes: Tensor, batch_size: int, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False) -> None:
        nodes = torch.as_tensor(nodes)
        if nodes.dim() != 1 or nodes.dtype.is_floating_point:
            raise ValueError(f"NodeSeeds: nodes must be a 1-D integer tensor, got shape "
                             f"{tuple(nodes.shape)} dtype {nodes.dtype}")
        self.nodes = nodes.to(torch.int64)
        self.batch_size = _check_batch_size("NodeSeeds", batch_size)
        self.shuffle = shuffle
        self.seed = int(seed)
        self.drop_last = drop_last
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return _num_batches(self.nodes.numel(), self.batch_size, self.drop_last)

    def __iter__(self) -> Iterator[Tensor]:
        order = self.nodes
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
            order = self.nodes[torch.randperm(self.nodes.numel(), generator=generator)]
        for index in range(len(self)):
            yield order[index * self.batch_size:(index + 1) * self.batch_size]


@dataclass(frozen=True)
class EdgeBatch:
    """Link-prediction batch: positive edges, one corrupted negative each, and their seeds.

    Attributes:
        pos_src, pos_dst: [b] int64 endpoints of the positive edges (original ids).
        neg_src, neg_dst: [b] int64 endpoints of the negatives (src kept, dst uniform).
        seeds: [n] int64 distinct endpoints: the seeds to sample blocks for.
        pos_index, neg_index: [2, b] int64 positions of (src, dst) in `seeds`.
        edge_ids: [b] int64 parent ids of the positive edges (to exclude them when needed).
    """

    pos_src: Tensor
    pos_dst: Tensor
    neg_src: Tensor
    neg_dst: Tensor
    seeds: Tensor
    pos_index: Tensor
    neg_index: Tensor
    edge_ids: Tensor


class EdgeSeeds:
    """Edge-prediction seeds: shuffled batches of edges plus one uniform negative per edge.

    The negative of edge (u, v) is (u, w) with w uniform over all nodes (it may be a true
    edge with probability ~ deg(u)/N, the usual unfiltered corruption).

    Args:
        graph: the graph whose edges are the positives.
        batch_size: positive edges per batch.
        seed: seed of the shuffles and the negatives.
        drop_last: drop a final smaller batch.
    """

    def __init__(self, graph: Graph, batch_size: int, seed: int = 0,
                 drop_last: bool = False) -> None:
        if not isinstance(graph, Graph):
            raise TypeError("EdgeSeeds: graph must be a gnnforge Graph, got "
                            f"{type(graph).__name__}")
        if graph.num_nodes == 0:
            raise ValueError("EdgeSeeds: the graph has no nodes to draw negatives from")
        self.graph = graph
        self.batch_size = _check_batch_size("EdgeSeeds", batch_size)
        self.seed = int(seed)
        self.drop_last = drop_last
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return _num_batches(self.graph.num_edges, self.batch_size, self.drop_last)

    def __iter__(self) -> Iterator[EdgeBatch]:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        order = torch.randperm(self.graph.num_edges, generator=generator)
        for index in range(len(self)):
            edge_ids = order[index * self.batch_size:(index + 1) * self.batch_size]
            yield self._batch(edge_ids, generator)

    def _batch(self, edge_ids: Tensor, generator: torch.Generator) -> EdgeBatch:
        src, dst = self.graph.src[edge_ids], self.graph.dst[edge_ids]
        neg_dst = torch.randint(0, self.graph.num_nodes, (edge_ids.numel(),), generator=generator)
        seeds, inverse = torch.unique(torch.cat([src, dst, neg_dst]), return_inverse=True)
        b = edge_ids.numel()
        pos_index = torch.stack([inverse[:b], inverse[b:2 * b]])
        neg_index = torch.stack([inverse[:b], inverse[2 * b:]])
        return EdgeBatch(src, dst, src.clone(), neg_dst, seeds, pos_index, neg_index, edge_ids)
