"""Cooperative minibatches for node classification under torch.distributed.

(Balin et al., "Cooperative Minibatching in Graph Neural Networks".) All P processes walk
the same global batches (`NodeSeeds`, a function of seed and epoch); process p keeps the
seeds it owns, samples the in-edges of the vertices it owns with the step's key, and the
model exchanges embedding rows with the other processes before every layer
(`gnnforge.distributed.CooperativeSampler`). Each process's loss is its seeds' share of
the global batch loss (summed cross-entropy divided by the global batch size); the
engine sums gradients and losses over processes, so every process applies the same
update that one process would apply to the whole batch.

Keys come from `DependentKeys(max(dependent, 1), seed)` indexed by `epoch * steps + step`
(kappa 1: independent batches), a pure function of the step, so `--resume` needs no
sampler state. A single process run with `--dependent 1` (or the same kappa) draws the
same minibatches as the cooperative run with NS and LABOR-0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from gnnforge.graph import Graph
from gnnforge.train._config import ConfigError, TrainConfig

__all__ = ["CooperativeBatch", "CooperativeBatches"]


@dataclass(frozen=True)
class CooperativeBatch:
    """This process's share of one global batch, and that batch's size."""

    minibatch: Any              # gnnforge.distributed.CooperativeMinibatch
    global_size: int


class CooperativeBatches:
    """Per-step cooperative minibatches over `graph`; same interface as `SampledBatches`.

    Raises:
        ConfigError: when not running under torch.distributed with at least 2 processes.
    """

    def __init__(self, graph: Graph, config: TrainConfig, rank: int, world: int) -> None:
        from gnnforge.distributed import CooperativeSampler, cooperation_groups, partition_nodes
        from gnnforge.sampling import (DependentKeys, FeatureStore, LaborSampler,
                                       NeighborSampler)

        if world < 2:
            raise ConfigError("--distributed cooperative needs 2 or more processes: launch "
                              "with torchrun --nproc-per-node P -m gnnforge train ... (or "
                              "use --distributed independent for one process)")
        kind = config.sampler or "neighbor"
        sampler = (LaborSampler(config.fanouts) if kind == "labor"
                   else NeighborSampler(config.fanouts))
        self.graph, self.config, self.world = graph, config, world
        # --cooperate local: the processes of one node cooperate, nodes take turns.
        self.coop = cooperation_groups(config.cooperate)
        self.rank = self.coop.rank
        train_mask = graph.node_data.get("train_mask") if config.partition == "metis" else None
        self.owner = partition_nodes(graph, self.coop.size, config.partition, seed=config.seed,
                                     train_mask=train_mask)
        self.sampler = CooperativeSampler(sampler, self.owner, group=self.coop.group)
        self.keys = DependentKeys(max(config.dependent, 1), seed=config.seed)
        self.store = (FeatureStore(graph.node_data["x"].float(), config.cache_size)
                      if config.cache_size else None)
        self._seeds: list[Tensor] = []
        self._epoch = 0
        self._counts = torch.zeros(4, dtype=torch.float64)  # edges, sent, received, batches
        self._resumed: dict[str, Any] | None = None  # counters to restore in start_epoch

    def start_epoch(self, epoch: int, train_nodes: Tensor) -> int:
        from gnnforge.sampling import NodeSeeds

        seeds = NodeSeeds(train_nodes, self.config.batch_size, seed=self.config.seed)
        seeds.set_epoch(epoch)
        self._seeds, self._epoch = list(seeds), epoch
        self._counts.zero_()
        if self.store is not None:
            self.store.reset_stats()
        resumed, self._resumed = self._resumed, None
        if resumed is not None and resumed["epoch"] == epoch:  # resuming mid-epoch
            self._counts.copy_(resumed["counts"])
            if self.store is not None:
                self.store.load_state_dict(resumed["store"])
        return len(self._seeds) // self.coop.count

    def batch(self, step: int) -> CooperativeBatch:
        """Collective: every process must ask for the same `step`; group g of G takes the
        global batch step * G + g."""
        index = step * self.coop.count + self.coop.index
        seeds = self._seeds[index]
        local = seeds[self.owner[seeds] == self.rank]
        key = self.keys[self._epoch * len(self._seeds) + index]
        minibatch = self.sampler.sample(self.graph, local, key)
        sent, received = minibatch.remote_rows()
        self._counts += torch.tensor([sum(b.num_edges for b in minibatch.blocks), sent,
                                      received, 1], dtype=torch.float64)
        # Each group's loss is divided by G too: the summed gradient is the groups' mean.
        return CooperativeBatch(minibatch, int(seeds.numel()) * self.coop.count)

    def features(self, x: Tensor, input_nodes: Tensor) -> Tensor:
        """[n, F] input features of this process's owned `input_nodes` (cache when enabled)."""
        if self.store is not None:
            return self.store.fetch(input_nodes)
        return x.index_select(0, input_nodes)

    def epoch_stats(self) -> dict[str, float]:
        """Collective: edges sampled and embedding rows exchanged per global batch."""
        totals = self._counts.clone()
        dist.all_reduce(totals)
        batches = max(float(totals[3]) / self.coop.size, 1.0)
        stats = {"sampled_edges_per_batch": float(totals[0]) / batches,
                 "remote_rows_per_batch": float(totals[1]) / batches}
        if self.store is not None:
            stats["cache_miss_rate"] = self.store.miss_rate  # this process's cache
        return stats

    def state_dict(self) -> dict[str, Any]:
        """This process's epoch counters and feature cache (sampling keys are a pure
        function of (seed, epoch, step)); the engine saves one per process."""
        return {"epoch": self._epoch, "counts": self._counts.clone(),
                "store": None if self.store is None else self.store.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "epoch" in state:  # applied by start_epoch, which resets the counters
            self._resumed = state
            if self.store is not None and state["store"] is not None:
                self.store.load_state_dict(state["store"])
