"""Cooperative minibatching: P processes sample and compute one global minibatch together.

(Balin et al., "Cooperative Minibatching in Graph Neural Networks".) Process p owns the
vertices with owner == p and their in-edges. Layer by layer, from the seeds down:

1. p samples the in-edges of its destinations D_l^p (vertices it owns) -> block l with
   sources U_l^p (any owner);
2. p asks each owner q for the ids of U_l^p that q owns (all_to_all of ids);
3. q's destinations one layer down are D_l^q followed by everything it was asked for.

The requests become the layer's `ExchangePlan`, which the forward pass replays with
embeddings (before each layer, rows travel from owners to requesters) and the backward
pass replays in reverse. The randomness is a function of (key, global ids), so with the
same key every process draws exactly the edges that a single process would for the same
seeds, and the union of the per-process work equals the global minibatch's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

from gnnforge.distributed._exchange import ExchangePlan, all_to_all_ids, exchange
from gnnforge.graph import Graph
from gnnforge.sampling._block import Block
from gnnforge.sampling._common import InEdges, check_seed_ids, in_edges, sample_layer
from gnnforge.sampling._kernels import compact
from gnnforge.sampling._variates import VariateKey

__all__ = ["CooperativeMinibatch", "CooperativeSampler"]

_SAME = object()  # exchange_group's default: the sampling group


@dataclass(frozen=True)
class CooperativeMinibatch:
    """This process's share of a cooperative minibatch.

    Attributes:
        blocks: per layer (input first), this process's block: destinations it owns,
            sources from anywhere.
        plans: per layer, the exchange that turns owned rows into the block's source rows.
        input_nodes: [n] int64 owned vertices whose input features this process supplies.
        seeds: [b] int64 this process's seeds (the last block's destinations).
        group: the process group the exchanges run on (None: the default group).
    """

    blocks: list[Block]
    plans: list[ExchangePlan]
    input_nodes: Tensor
    seeds: Tensor
    group: Any = None

    def exchanges(self) -> list[Callable[[Tensor], Tensor]]:
        """Per layer, the differentiable exchange (pass as `exchange=` to a block model)."""
        return [partial(exchange, plan=plan, group=self.group) for plan in self.plans]

    def remote_rows(self) -> tuple[int, int]:
        """Rows (vertex embeddings) this process sends to / receives from other processes."""
        rank = dist.get_rank(self.group)
        pairs = [plan.remote_rows(rank) for plan in self.plans]
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


class CooperativeSampler:
    """Wraps a NeighborSampler / LaborSampler / RandomWalkSampler for P processes.

    Every process of the group calls `sample` once per global batch, with its own seeds
    and the same key (e.g. `DependentKeys(kappa, seed)[step]` on all). LABOR-* optimises
    its probabilities per process over the process's destinations, so only NS, LABOR-0
    and random walks reproduce the single-process minibatch exactly (random walks need
    the whole graph, not a partition).

    Args:
        sampler: any sampler of `gnnforge.sampling`.
        owner: [N] integer process (rank in `group`) of each vertex (from
            `partition_nodes`, or a partition's memory-mapped `owner`).
        group: process group of the sampling all-to-alls (None: the default group). A
            prefetching thread needs a group of its own, so that its collectives never
            interleave with the main thread's.
        exchange_group: group of the forward/backward exchanges of the minibatch (default:
            `group`; None: the default group): the same processes, in the same rank order.
    """

    def __init__(self, sampler, owner: Tensor | np.ndarray, group=None,
                 exchange_group: Any = _SAME) -> None:
        if not dist.is_initialized():
            raise RuntimeError("CooperativeSampler needs torch.distributed initialised "
                               "(torchrun, or gnnforge.distributed.spawn)")
        owner_np = owner.numpy() if isinstance(owner, Tensor) else np.asarray(owner)
        world = dist.get_world_size(group)
        if owner_np.ndim != 1 or owner_np.dtype.kind not in "iu":
            raise ValueError(f"owner must be a 1-D integer array, got shape "
                             f"{owner_np.shape} dtype {owner_np.dtype}")
        if owner_np.size and (int(owner_np.min()) < 0 or int(owner_np.max()) >= world):
            raise ValueError(f"owner must hold ranks in [0, {world}), got values in "
                             f"[{int(owner_np.min())}, {int(owner_np.max())}]")
        self.sampler = sampler
        self.group = group
        self.exchange_group = group if exchange_group is _SAME else exchange_group
        self._owner_np = owner_np

    @property
    def owner(self) -> Tensor:
        return torch.as_tensor(np.asarray(self._owner_np, dtype=np.int64))

    def sample(self, graph: Graph | InEdges, seeds: Tensor, key: VariateKey
               ) -> CooperativeMinibatch:
        """Sample this process's share; collective (every process must call it).

        Args:
            graph: the whole graph, or this process's in-edges (a partition's
                `Partition.in_edges`, owned vertices only).
            seeds: [b] distinct int64 seeds owned by this process.
            key: the step's key, the same on every process.

        Raises:
            ValueError: when a seed is not owned by this process or the owner vector
                does not match the graph.
            PeerError: when another process died or timed out.
        """
        edges = graph if isinstance(graph, InEdges) else in_edges(graph)
        if self._owner_np.size != edges.num_nodes:
            raise ValueError(f"owner has {self._owner_np.size} entries for {edges.num_nodes} "
                             "nodes")
        frontier = check_seed_ids(seeds, edges.num_nodes)
        seeds_t = torch.from_numpy(frontier.copy())
        rank, world = dist.get_rank(self.group), dist.get_world_size(self.group)
        foreign = np.flatnonzero(self._owner_np[frontier] != rank)
        if foreign.size:
            raise ValueError(f"seeds[{foreign[0]}] = {frontier[foreign[0]]} is owned by process "
                             f"{self._owner_np[frontier[foreign[0]]]}, not {rank}")
        layer_fn = self.sampler.layer_fn(graph if isinstance(graph, Graph) else None)
        blocks, plans = [], []
        for layer in reversed(range(self.sampler.num_layers)):
            block = sample_layer(edges, frontier, layer, key, layer_fn)
            plan, frontier = self._plan(block.src_nodes.numpy(), frontier, world)
            blocks.append(block)
            plans.append(plan)
        return CooperativeMinibatch(blocks[::-1], plans[::-1], torch.from_numpy(frontier),
                                    seeds_t, self.exchange_group)

    def _plan(self, sources: np.ndarray, frontier: np.ndarray, world: int
              ) -> tuple[ExchangePlan, np.ndarray]:
        owners = self._owner_np[sources].astype(np.int64)
        order = np.argsort(owners, kind="stable")
        recv_counts = np.bincount(owners, minlength=world)
        requests = torch.from_numpy(sources[order]).split(recv_counts.tolist())
        asked = all_to_all_ids(list(requests), "all_to_all of sampled vertex ids", self.group)
        asked_all = torch.cat(asked).numpy() if asked else np.zeros(0, dtype=np.int64)
        send_index, next_frontier = compact(frontier, asked_all)
        plan = ExchangePlan(torch.from_numpy(order), recv_counts.tolist(),
                            torch.from_numpy(send_index), [int(a.numel()) for a in asked])
        return plan, next_frontier
