"""Compile a dataset of graphs for banded propagation: reorder, assemble, count drops.

Each graph is renumbered by RCM (node data permuted with it), then graphs are placed one
after another into supergraphs of K*S node slots, never split across supergraphs; a
supergraph of low-bandwidth graphs is itself low-bandwidth, since its bandwidth is the
largest of its members'. A graph with more than K*S nodes cannot be placed and is listed
in ``skipped``. Edges whose ends end up more than one block apart are dropped from the
banded tensors and counted per graph (``dropped``), never silently. The result (orders,
placement, counts) is cached on disk; the dense tensors of a supergraph are built on
demand by `CompiledDataset.supergraph`, because a whole dataset of dense blocks would not
fit in memory.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from gnnforge.banded._blocks import BandedBlocks, compile_blocks
from gnnforge.banded._rcm import rcm_order
from gnnforge.data import cache_dir
from gnnforge.graph import Graph, GraphBatch

__all__ = ["CompiledDataset", "assemble_supergraphs", "compile_dataset", "supergraph_batch"]

_VERSION = 1  # part of the cache key; bump when compilation changes


def assemble_supergraphs(num_nodes: Sequence[int],
                         num_slots: int) -> tuple[list[list[int]], list[int]]:
    """Place graphs in order into supergraphs of `num_slots` nodes, never splitting one.

    Returns:
        (supergraphs: list of member graph indices, skipped: indices of graphs larger
        than `num_slots`, which fit nowhere).
    """
    groups: list[list[int]] = []
    skipped: list[int] = []
    used = num_slots + 1
    for index, size in enumerate(num_nodes):
        if size > num_slots:
            skipped.append(index)
            continue
        if used + size > num_slots:
            groups.append([])
            used = 0
        groups[-1].append(index)
        used += size
    return groups, skipped


def supergraph_batch(graphs: Sequence[Graph], num_slots: int) -> GraphBatch:
    """GraphBatch of `graphs` padded with isolated nodes to exactly `num_slots` nodes.

    The padding nodes form one masked padding graph (zero node and graph data).
    """
    batch = GraphBatch.from_graphs(graphs)
    extra = num_slots - batch.num_nodes
    if extra < 0:
        raise ValueError(f"supergraph_batch: {batch.num_nodes} nodes exceed {num_slots} slots")
    if extra == 0:
        return batch
    return batch.pad(num_slots, batch.num_edges, batch.num_graphs + 1)


@dataclass(frozen=True)
class CompiledDataset:
    """A dataset reordered and placed into supergraphs for banded propagation.

    Attributes:
        graphs: the reordered graphs (``graphs[i].reorder_nodes`` applied; node data permuted).
        orders: [N_i] permutation per graph (new position -> old node).
        supergraphs: member graph indices of each supergraph, in slot order.
        skipped: graphs with more than K*S nodes (in no supergraph).
        dropped: [G] int64 out-of-band edges per graph (0 for skipped graphs).
        bandwidth_before, bandwidth_after: [G] int64 per graph.
        block_size, num_blocks, num_edge_types: S, K and P.
    """

    graphs: list[Graph]
    orders: list[Tensor]
    supergraphs: list[list[int]]
    skipped: list[int]
    dropped: Tensor
    bandwidth_before: Tensor
    bandwidth_after: Tensor
    block_size: int
    num_blocks: int
    num_edge_types: int

    @property
    def num_slots(self) -> int:
        return self.block_size * self.num_blocks

    def supergraph(self, index: int,
                   dtype: torch.dtype = torch.float32) -> tuple[GraphBatch, BandedBlocks]:
        """(padded batch of the members with ALL edges, its banded blocks) of one supergraph."""
        batch = supergraph_batch([self.graphs[i] for i in self.supergraphs[index]], self.num_slots)
        blocks = compile_blocks(batch, self.block_size, self.num_edge_types, self.num_blocks, dtype)
        return batch, blocks

    def kept_fraction(self) -> float:
        """Fraction of the placed graphs' edges represented in the band."""
        placed = sorted(i for group in self.supergraphs for i in group)
        total = sum(self.graphs[i].num_edges for i in placed)
        return 1.0 if total == 0 else 1.0 - float(self.dropped.sum()) / total

    def report(self) -> str:
        """Summary: graphs placed and skipped, slot fill, dropped edges per graph and in total."""
        placed = sum(len(group) for group in self.supergraphs)
        nodes = sum(self.graphs[i].num_nodes for group in self.supergraphs for i in group)
        slots = len(self.supergraphs) * self.num_slots
        with_drops = torch.nonzero(self.dropped).flatten().tolist()
        lines = [f"S={self.block_size} K={self.num_blocks} P={self.num_edge_types}: "
                 f"{placed} graphs in {len(self.supergraphs)} supergraphs "
                 f"(slot fill {nodes / max(slots, 1):.1%}), {len(self.skipped)} skipped "
                 f"(more than {self.num_slots} nodes)",
                 f"dropped edges: {int(self.dropped.sum())} of "
                 f"{sum(self.graphs[i].num_edges for g in self.supergraphs for i in g)} "
                 f"(kept {self.kept_fraction():.2%}) in {len(with_drops)} graphs"]
        lines += [f"  graph {i}: {int(self.dropped[i])} of {self.graphs[i].num_edges} edges "
                  f"dropped (bandwidth {int(self.bandwidth_after[i])})" for i in with_drops[:10]]
        if len(with_drops) > 10:
            lines.append(f"  ... and {len(with_drops) - 10} more graphs with drops")
        return "\n".join(lines)


def _dataset_key(graphs: Sequence[Graph], options: dict) -> str:
    digest = hashlib.sha256(repr(sorted(options.items())).encode())
    for graph in graphs:
        digest.update(np.int64(graph.num_nodes).tobytes())
        for tensor in (graph.src, graph.dst, graph.edge_type):
            if tensor is not None:
                digest.update(tensor.cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def _out_of_band(graph: Graph, offset: int, size: int) -> int:
    shift = (graph.src + offset) // size - (graph.dst + offset) // size
    return int((shift.abs() > 1).sum())


def compile_dataset(graphs: Sequence[Graph], block_size: int, num_blocks: int,
                    num_edge_types: int | None = None, method: str = "gnnforge",
                    reorder: bool = True, use_cache: bool = True,
                    progress: bool = True) -> CompiledDataset:
    """Reorder every graph by RCM and place them into supergraphs of K*S slots.

    Args:
        graphs: the dataset.
        block_size: S. num_blocks: K (slots per supergraph K*S).
        num_edge_types: P; default the largest over the graphs.
        method: RCM implementation, see `rcm_order`.
        reorder: False keeps the given node order (to measure what RCM buys).
        use_cache: store/load orders, placement and counts under `gnnforge.data.cache_dir()`.
        progress: tqdm bar over graphs.

    Raises:
        ValueError: on S or K < 1.
    """
    if block_size < 1 or num_blocks < 1:
        raise ValueError(f"compile_dataset: block_size and num_blocks must be >= 1, "
                         f"got {block_size}, {num_blocks}")
    graphs = list(graphs)
    types = num_edge_types
    if types is None:
        types = max([g.num_edge_types for g in graphs] + [1])
    options = dict(S=block_size, K=num_blocks, P=types, method=method, reorder=reorder, v=_VERSION)
    path = Path(cache_dir()) / f"banded-{_dataset_key(graphs, options)}.npz"
    if use_cache and path.exists():
        orders, before, after = _load(path, graphs)
    else:
        orders, before, after = [], [], []
        for graph in tqdm(graphs, desc=f"RCM + bandwidth (S={block_size})", unit="graph",
                          disable=not progress):
            order = rcm_order(graph, method) if reorder else torch.arange(graph.num_nodes)
            orders.append(order)
            before.append(_bw(graph.src, graph.dst))
            position = torch.empty_like(order)
            position[order] = torch.arange(order.numel())
            after.append(_bw(position[graph.src], position[graph.dst]))
        if use_cache:
            _save(path, orders, before, after)
    reordered = [g.reorder_nodes(o) if reorder else g for g, o in zip(graphs, orders)]
    groups, skipped = assemble_supergraphs([g.num_nodes for g in reordered],
                                           block_size * num_blocks)
    dropped = torch.zeros(len(graphs), dtype=torch.int64)
    for group in groups:
        offset = 0
        for i in group:
            dropped[i] = _out_of_band(reordered[i], offset, block_size)
            offset += reordered[i].num_nodes
    return CompiledDataset(reordered, orders, groups, skipped, dropped,
                           torch.tensor(before, dtype=torch.int64),
                           torch.tensor(after, dtype=torch.int64), block_size, num_blocks, types)


def _bw(src: Tensor, dst: Tensor) -> int:
    return int((src - dst).abs().max()) if src.numel() else 0


def _save(path: Path, orders: list[Tensor], before: list[int], after: list[int]) -> None:
    lengths = np.array([o.numel() for o in orders], dtype=np.int64)
    flat = torch.cat(orders).numpy() if orders else np.zeros(0, dtype=np.int64)
    # One temporary name per process: DDP ranks compile the same dataset at once, and each
    # must replace the cache file atomically without renaming another rank's file.
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}.npz")
    np.savez(tmp, lengths=lengths, orders=flat, before=np.array(before, dtype=np.int64),
             after=np.array(after, dtype=np.int64))
    tmp.replace(path)


def _load(path: Path, graphs: list[Graph]):
    with np.load(path, allow_pickle=False) as data:
        offsets = np.concatenate([[0], np.cumsum(data["lengths"])])
        flat = torch.from_numpy(data["orders"])
        orders = [flat[offsets[i]:offsets[i + 1]].clone() for i in range(len(graphs))]
        return orders, data["before"].tolist(), data["after"].tolist()
