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

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

from gnnforge.distributed._exchange import ExchangePlan, all_to_all_ids, exchange
from gnnforge.graph import Graph
from gnnforge.sampling._block import Block
from gnnforge.sampling._common import check_seeds, csr_arrays, sample_layer
from gnnforge.sampling._kernels import compact
from gnnforge.sampling._variates import VariateKey

__all__ = ["CooperativeMinibatch", "CooperativeSampler"]


@dataclass(frozen=True)
class CooperativeMinibatch:
    """This process's share of a cooperative minibatch.

    Attributes:
        blocks: per layer (input first), this process's block: destinations it owns,
            sources from anywhere.
        plans: per layer, the exchange that turns owned rows into the block's source rows.
        input_nodes: [n] int64 owned vertices whose input features this process supplies.
        seeds: [b] int64 this process's seeds (the last block's destinations).
    """

    blocks: list[Block]
    plans: list[ExchangePlan]
    input_nodes: Tensor
    seeds: Tensor

    def exchanges(self) -> list[Callable[[Tensor], Tensor]]:
        """Per layer, the differentiable exchange (pass as `exchange=` to a block model)."""
        return [partial(exchange, plan=plan) for plan in self.plans]

    def remote_rows(self) -> tuple[int, int]:
        """Rows (vertex embeddings) this process sends to / receives from other processes."""
        rank = dist.get_rank()
        pairs = [plan.remote_rows(rank) for plan in self.plans]
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


class CooperativeSampler:
    """Wraps a NeighborSampler / LaborSampler / RandomWalkSampler for P processes.

    Every process of the default process group calls `sample` once per global batch, with
    its own seeds and the same key (e.g. `DependentKeys(kappa, seed)[step]` on all).
    LABOR-* optimises its probabilities per process over the process's destinations, so
    only NS, LABOR-0 and random walks reproduce the single-process minibatch exactly.

    Args:
        sampler: any sampler of `gnnforge.sampling`.
        owner: [N] int64 process of each vertex (from `partition_nodes`).
    """

    def __init__(self, sampler, owner: Tensor) -> None:
        if not dist.is_initialized():
            raise RuntimeError("CooperativeSampler needs torch.distributed initialised "
                               "(torchrun, or gnnforge.distributed.spawn)")
        owner = torch.as_tensor(owner, dtype=torch.int64)
        world = dist.get_world_size()
        out_of_range = owner.numel() and (int(owner.min()) < 0 or int(owner.max()) >= world)
        if owner.dim() != 1 or out_of_range:
            raise ValueError(f"owner must be a 1-D tensor of ranks in [0, {world}), got shape "
                             f"{tuple(owner.shape)}")
        self.sampler = sampler
        self.owner = owner
        self._owner_np = owner.numpy()

    def sample(self, graph: Graph, seeds: Tensor, key: VariateKey) -> CooperativeMinibatch:
        """Sample this process's share; collective (every process must call it).

        Raises:
            ValueError: when a seed is not owned by this process or the owner vector
                does not match the graph.
            PeerError: when another process died or timed out.
        """
        if self.owner.numel() != graph.num_nodes:
            raise ValueError(f"owner has {self.owner.numel()} entries for {graph.num_nodes} nodes")
        frontier = check_seeds(graph, seeds)
        seeds_t = torch.from_numpy(frontier.copy())
        rank, world = dist.get_rank(), dist.get_world_size()
        foreign = np.flatnonzero(self._owner_np[frontier] != rank)
        if foreign.size:
            raise ValueError(f"seeds[{foreign[0]}] = {frontier[foreign[0]]} is owned by process "
                             f"{self._owner_np[frontier[foreign[0]]]}, not {rank}")
        csr = csr_arrays(graph)
        local_of = np.full(graph.num_nodes, -1, dtype=np.int64)
        layer_fn = self.sampler.layer_fn(graph)
        blocks, plans = [], []
        for layer in reversed(range(self.sampler.num_layers)):
            block = sample_layer(csr, frontier, layer, key, layer_fn, local_of)
            plan, frontier = self._plan(block.src_nodes.numpy(), frontier, world, local_of)
            blocks.append(block)
            plans.append(plan)
        return CooperativeMinibatch(blocks[::-1], plans[::-1], torch.from_numpy(frontier),
                                    seeds_t)

    def _plan(self, sources: np.ndarray, frontier: np.ndarray, world: int,
              local_of: np.ndarray) -> tuple[ExchangePlan, np.ndarray]:
        owners = self._owner_np[sources]
        order = np.argsort(owners, kind="stable")
        recv_counts = np.bincount(owners, minlength=world)
        requests = torch.from_numpy(sources[order]).split(recv_counts.tolist())
        asked = all_to_all_ids(list(requests), "all_to_all of sampled vertex ids")
        asked_all = torch.cat(asked).numpy() if asked else np.zeros(0, dtype=np.int64)
        send_index, next_frontier = compact(frontier, asked_all, local_of)
        plan = ExchangePlan(torch.from_numpy(order), recv_counts.tolist(),
                            torch.from_numpy(send_index), [int(a.numel()) for a in asked])
        return plan, next_frontier
