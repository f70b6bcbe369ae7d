"""Node classification over a partitioned dataset: each process loads only its part.

`gnnforge train --partitioned DIR` under torchrun. A process memory-maps its part (owned
vertices, their in-edges, feature rows and labels; `gnnforge.distributed.load_partition`)
and gets everything else through collectives:

- `--distributed cooperative`: the processes of a cooperating group (`--cooperate all`:
  every process; `local`: the processes of one node) sample and compute one global
  minibatch together (`CooperativeSampler` on their in-edges); each supplies the input
  rows it owns, and rows cross processes by all_to_all. Groups take turns over the
  global batches; gradients are summed over every process.
- `--distributed independent`: each process trains on minibatches of its own training
  seeds; the owners of the other vertices sample their in-edges and serve their feature
  rows (`sample_remote`, `fetch_rows`).

With `--prefetch K` (default 1) a background thread samples and fetches the input rows of
the next K minibatches (on a process group of its own) while the current one computes.
Keys are a pure function of (seed, epoch, step), as in `CooperativeBatches`, so a
cooperative run over all processes draws the minibatches of one process training on the
whole graph with `--dependent 1`. Evaluation samples too (no process holds the graph).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from gnnforge._device import process_device
from gnnforge.distributed._exchange import PendingRows
from gnnforge.train._config import ConfigError, TrainConfig
from gnnforge.train._handover import OnDevice, handover, stage
from gnnforge.train._resources import peak_rss_mib

__all__ = ["PartitionedNodeTask"]

_EVAL_SEED_OFFSET = 7919  # evaluation keys differ from every training key


@dataclass(frozen=True)
class _Batch:
    """One prepared minibatch on the host: blocks, input rows (cooperative: the first
    block's source rows, maybe still in flight), labels, the embedding exchanges' plans."""

    blocks: list
    x: Tensor | PendingRows
    labels: Tensor
    plans: list | None          # per layer; None for the input layer (exchanged already)
    group: Any                  # the process group of the embedding exchanges
    global_size: int
    edges: int
    vertices: int       # sampled vertices of this process, summed over layers
    input_rows: int     # feature rows this process reads from storage (own or owners')


class PartitionedNodeTask:
    """The engine's node-classification task over `config.partitioned` (see module doc)."""

    items = "nodes"
    metric = "val_accuracy"
    higher_is_better = True
    cooperative = True  # every process takes part in every step; gradients are summed

    def __init__(self, config: TrainConfig) -> None:
        from gnnforge.distributed import load_partition, read_manifest
        from gnnforge.distributed._groups import cooperation_groups
        from gnnforge.distributed._memory import fix_mmap_threshold, mmap_threshold_from_env
        from gnnforge.sampling import DependentKeys, FeatureStore, LaborSampler, NeighborSampler

        if not dist.is_initialized() and "WORLD_SIZE" in os.environ:  # torchrun, even of 1
            from gnnforge.distributed import init_from_env

            init_from_env(timeout_s=600.0)  # as the engine's own launch
        if not dist.is_initialized():
            raise ConfigError("--partitioned runs under torchrun (one process per part): "
                              "torchrun --nproc-per-node P -m gnnforge train --partitioned DIR")
        # Opt-in: freed minibatch arrays leave the process at once instead of staying in
        # the heap of the thread that allocated them (gnnforge/distributed/_memory.py).
        try:
            threshold = mmap_threshold_from_env()
        except ValueError as error:
            raise ConfigError(str(error)) from None
        if threshold is not None:
            fix_mmap_threshold(threshold)
        self.config = config
        # Sampling and the id and feature-row exchanges stay on the CPU (gloo); the model,
        # blocks, rows and labels move to this process's device (`_handover`).
        self.device = process_device(config.device)
        self.independent = config.distributed == "independent"
        manifest = read_manifest(config.partitioned)
        self.coop = cooperation_groups("all" if self.independent else config.cooperate,
                                       sampling_group=config.prefetch > 0)
        if manifest["num_parts"] != self.coop.size:
            raise ConfigError(f"--partitioned {config.partitioned} has {manifest['num_parts']} "
                              f"parts, but {self.coop.size} processes cooperate; partition "
                              f"with --parts {self.coop.size}")
        self.data = load_partition(config.partitioned, self.coop.rank)
        self.sampler = (LaborSampler(config.fanouts) if config.sampler == "labor"
                        else NeighborSampler(config.fanouts))
        self.keys = DependentKeys(max(config.dependent, 1), seed=config.seed)
        self.eval_keys = DependentKeys(1, seed=config.seed + _EVAL_SEED_OFFSET)
        self.store = FeatureStore(self.data.features, config.cache_size) \
            if config.cache_size else None
        self.num_classes = manifest["num_classes"]
        self.name = (f"node classification (sampled {config.model.upper()}, partitioned, "
                     + ("independent" if self.independent else
                        f"cooperative {config.cooperate}") + f" over {dist.get_world_size()} "
                     "processes)")
        self._split_ids = {s: self._split_seeds(s) for s in ("train", "val", "test")}
        self._seeds: list[Tensor] = []
        self._epoch = self._steps = 0
        self._prefetcher = None
        self._counts = torch.zeros(4, dtype=torch.float64)  # edges, vertices, rows, steps
        self._samplers: dict[int, Any] = {}

    # -- data -------------------------------------------------------------------------
    def _split_seeds(self, split: str) -> Tensor:
        """Cooperative: the group's whole split (gathered once, ascending). Independent:
        the owned vertices of the split."""
        owned = self.data.splits[split].to(torch.int64)
        if self.independent:
            return owned
        gathered: list[Any] = [None] * self.coop.size
        dist.all_gather_object(gathered, owned.numpy(), group=self.coop.group)
        return torch.from_numpy(np.sort(np.concatenate(gathered)))

    def _rows(self, ids: Tensor) -> Tensor:
        """Feature rows of owned global ids (through the cache when enabled)."""
        local = self.data.local(ids.numpy())
        if self.store is not None:
            return self.store.fetch(local)
        return self.data.features.index_select(0, local)

    def _produce(self, seeds: Tensor, key_index: int, keys, group) -> _Batch:
        """Sample one minibatch and fetch its input rows (in the prefetch thread or not)."""
        from gnnforge.distributed import CooperativeSampler
        from gnnforge.distributed._exchange import exchange, exchange_rows_async
        from gnnforge.distributed._remote import fetch_rows, sample_remote

        data = self.data
        if self.independent:
            world = dist.get_world_size()
            step_keys = [keys[key_index * world + q] for q in range(world)]
            blocks = sample_remote(self.sampler, data.in_edges, data.owner, seeds, step_keys,
                                   group)
            x = fetch_rows(blocks[0].src_nodes, data.owner, self._rows,
                           int(data.features.shape[1]), group=group)
            labels = data.labels[data.local(seeds.numpy())]
            blocks, x, labels = stage(blocks, x, labels, self.device)
            return _Batch(blocks, x, labels, None, None, int(seeds.numel()),
                          sum(b.num_edges for b in blocks),
                          sum(b.num_src_nodes for b in blocks), blocks[0].num_src_nodes)
        local = seeds[torch.from_numpy(np.asarray(data.owner[seeds.numpy()]) == self.coop.rank)]
        if id(group) not in self._samplers:  # checks the [N] owner once, not per step
            self._samplers[id(group)] = CooperativeSampler(self.sampler, data.owner, group=group,
                                                           exchange_group=self.coop.group)
        sampler = self._samplers[id(group)]
        minibatch = sampler.sample(data.in_edges, local, keys[key_index])
        owned_rows = self._rows(minibatch.input_nodes)
        # Input features need no gradient: their exchange happens here, ahead of time, and
        # (--async-exchange) in flight while this thread samples the next minibatch.
        x = (exchange_rows_async(owned_rows, minibatch.plans[0], group)
             if self.config.async_exchange else exchange(owned_rows, minibatch.plans[0], group))
        labels = data.labels[data.local(local.numpy())]
        blocks, _, labels = stage(minibatch.blocks, None, labels, self.device)
        return _Batch(blocks, x, labels, [None, *minibatch.plans[1:]], minibatch.group,
                      int(seeds.numel()),
                      sum(b.num_edges for b in blocks), sum(b.num_src_nodes for b in blocks),
                      int(minibatch.input_nodes.numel()))

    # -- the engine's Task protocol -----------------------------------------------------
    def build_model(self) -> nn.Module:
        from gnnforge.nn import NodeClassifier

        return NodeClassifier(int(self.data.features.shape[1]), self.config.hidden,
                              self.num_classes, num_layers=self.config.layers,
                              conv=self.config.model, dropout=self.config.dropout,
                              input_dropout=self.config.input_dropout)

    def start_epoch(self, epoch: int) -> int:
        from gnnforge.sampling import NodeSeeds

        self._epoch, self._prefetcher = epoch, None
        self._counts.zero_()
        seed = self.config.seed + (dist.get_rank() if self.independent else 0)
        order = NodeSeeds(self._split_ids["train"], self.config.batch_size, seed=seed)
        order.set_epoch(epoch)
        self._seeds = list(order)
        if self.independent:
            steps = torch.tensor([len(self._seeds)])
            dist.all_reduce(steps, op=dist.ReduceOp.MIN)  # every process the same count
            self._steps = int(steps)
        else:
            self._steps = len(self._seeds) // self.coop.count
        return self._steps

    def _step_inputs(self, step: int) -> tuple[Tensor, int]:
        if self.independent:
            return self._seeds[step], self._epoch * self._steps + step
        index = step * self.coop.count + self.coop.index
        return self._seeds[index], self._epoch * len(self._seeds) + index

    def _produce_step(self, step: int) -> _Batch:
        seeds, key_index = self._step_inputs(step)
        group = self.coop.sampling_group if self.config.prefetch else self.coop.group
        return self._produce(seeds, key_index, self.keys, group)

    def batch(self, index: int) -> _Batch:
        """Collective: every process asks for the same step, in order."""
        from gnnforge.train._prefetch import Prefetcher

        if not self.config.prefetch:
            batch = self._produce_step(index)
        else:
            if self._prefetcher is None or self._prefetcher.next_step != index:
                self._prefetcher = Prefetcher(self._produce_step, index, self._steps,
                                              self.config.prefetch)
            batch = self._prefetcher.get(index)
        self._counts += torch.tensor([batch.edges, batch.vertices, batch.input_rows, 1],
                                     dtype=torch.float64)
        return batch

    def _on_device(self, batch: _Batch) -> OnDevice:
        """The minibatch on the model's device (waits for input rows still in flight)."""
        x = batch.x.wait() if isinstance(batch.x, PendingRows) else batch.x
        return handover(batch.blocks, x, batch.labels, batch.plans, batch.group, self.device)

    def loss(self, model: nn.Module, batch: _Batch) -> tuple[Tensor, int]:
        world = dist.get_world_size()
        on = self._on_device(batch)
        logits = model(on.blocks, on.x, exchange=on.exchanges)
        if self.independent:
            loss = F.cross_entropy(logits, on.labels) / world
            return loss, batch.global_size * world
        share = F.cross_entropy(logits, on.labels, reduction="sum") / batch.global_size
        return share / self.coop.count, batch.global_size * self.coop.count

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        """Accuracy on `split`, by sampled minibatches (collective); prefetched like
        training when `--prefetch` is on."""
        model.eval()
        steps = self._eval_steps(split)
        counts = torch.zeros(2, dtype=torch.float64)
        for batch in self._batches(steps, self.eval_keys):
            if batch.labels.numel() or batch.plans is not None:
                on = self._on_device(batch)
                logits = model(on.blocks, on.x, exchange=on.exchanges)
                counts += torch.tensor([float((logits.argmax(1) == on.labels).sum()),
                                        float(batch.labels.numel())], dtype=torch.float64)
                del on
            del batch  # before the next one is produced (without prefetching)
        model.train()
        dist.all_reduce(counts)
        return {f"{split}_accuracy": float(counts[0] / max(float(counts[1]), 1.0))}

    def _eval_steps(self, split: str) -> list[tuple[Tensor, int]]:
        """(seeds, key index) of this process's evaluation steps; every process of a group
        gets the same number (independent: padded with empty batches)."""
        from gnnforge.sampling import NodeSeeds

        batches = list(NodeSeeds(self._split_ids[split], self.config.batch_size,
                                 shuffle=False))
        if not self.independent:
            count = self.coop.count
            return [(batches[i], i) for i in range(self.coop.index, len(batches), count)]
        steps = torch.tensor([len(batches)])
        dist.all_reduce(steps, op=dist.ReduceOp.MAX)
        empty = torch.zeros(0, dtype=torch.int64)
        return [(batches[i] if i < len(batches) else empty, i) for i in range(int(steps))]

    def _batches(self, steps: list[tuple[Tensor, int]], keys):
        """The prepared minibatches of `steps` in order, from the prefetch thread (on the
        sampling group) when `--prefetch` is on."""
        from gnnforge.train._prefetch import Prefetcher

        if not self.config.prefetch:
            for seeds, key_index in steps:
                yield self._produce(seeds, key_index, keys, self.coop.group)
            return
        group = self.coop.sampling_group
        prefetcher = Prefetcher(lambda step: self._produce(*steps[step], keys, group), 0,
                                len(steps), self.config.prefetch)
        for step in range(len(steps)):
            yield prefetcher.get(step)

    def epoch_stats(self) -> dict[str, float]:
        """Collective: edges per minibatch (cooperative: a group's global one); per process
        and step, sampled vertices (all layers) and input feature rows read from storage
        (MiB; cooperative: owned rows, the rest arrives by exchange)."""
        totals = self._counts.clone()
        dist.all_reduce(totals)
        world = dist.get_world_size()
        steps = max(float(totals[3]) / world, 1.0)
        row_mib = self.data.features[:1].numel() * self.data.features.element_size() / 2**20
        minibatches = steps * (world if self.independent else self.coop.count)
        stats = {"sampled_edges_per_batch": float(totals[0]) / minibatches,
                 "vertices_per_rank_batch": float(totals[1]) / steps / world,
                 "feature_mib_per_rank_batch": float(totals[2]) / steps / world * row_mib}
        if self.store is not None:
            stats["cache_miss_rate"] = self.store.miss_rate
        return stats

    def describe(self) -> list[tuple[str, Any]]:
        manifest = self.data.manifest
        return [("dataset", f"partitioned {self.config.partitioned} ({manifest['method']}, "
                            f"{manifest['num_parts']} parts, edge cut "
                            f"{manifest.get('edge_cut_fraction', 0.0):.1%})"),
                ("nodes / edges", f"{manifest['num_nodes']} / {manifest['num_edges']}")]

    def rank_report(self) -> str:
        """`rank R: feature_rows=Y of N, peak_rss_mib=M, exchanged_mib=X` for this process."""
        from gnnforge.distributed import traffic

        peak = peak_rss_mib()
        return (f"rank {dist.get_rank()}: feature_rows={int(self.data.features.shape[0])} of "
                f"{self.data.num_nodes}, peak_rss_mib={peak:.0f}, "
                f"exchanged_mib={traffic().exchanged_bytes / 2**20:.1f}")

    def state_dict(self) -> dict[str, Any]:
        return {}  # keys are a pure function of (seed, epoch, step)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        del state

