"""Sampled minibatches for node classification: seeds, per-layer blocks, cached features.

Batch order is `NodeSeeds`' (a function of seed and epoch). Independent minibatches take
the key `step_key(seed, epoch, step)`; dependent minibatches (LABOR's kappa) take key
number `epoch * steps + step` from `DependentKeys`. Either way a batch is a pure function
of (seed, epoch, step): a resumed run samples the same blocks, and worker processes
(`--workers`) build exactly the batches the training process would. The per-epoch
counters are kept where the batches are used (`record`), in the training process.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import Tensor

from gnnforge.graph import Graph
from gnnforge.ops import gather_rows
from gnnforge.train._config import TrainConfig
from gnnforge.train._resources import storage_read_bytes

__all__ = ["SampledBatches", "step_key"]


def step_key(seed: int, epoch: int, step: int) -> Any:
    """The sampling key of one independent minibatch: a hash of (seed, epoch, step)."""
    from gnnforge.sampling import VariateKey

    state = np.random.SeedSequence([seed, epoch, step]).generate_state(1, np.uint64)
    return VariateKey(int(state[0]) >> 2)  # 62 bits, as `draw_key` draws


class SampledBatches:
    """Blocks for `NodeClassifier` from NS or LABOR over `graph`.

    `graph` is a `Graph` (features: its node_data["x"]) or a whole graph's `InEdges` (a
    CSR held without a Graph, e.g. memory-mapped; `features` then names the [N, F] rows
    the feature cache reads). Each batch is (blocks, input_nodes, seeds): blocks input
    layer first, input_nodes the [n] original ids whose features layer 0 reads, seeds the
    [b] labelled destinations.

    With `count_reads` (data read from files, e.g. memory-mapped), the epoch statistics
    include `storage_read_mib`: what this process read from storage between the epoch's
    start and its last `record` (call it after the batch's features are gathered), so
    evaluation is excluded; with `--workers` the workers' sampling reads are theirs.
    """

    def __init__(self, graph: Graph | Any, config: TrainConfig,
                 features: Tensor | None = None, count_reads: bool = False) -> None:
        from gnnforge.sampling import (DependentKeys, FeatureStore, LaborSampler,
                                       NeighborSampler)

        kind = config.sampler or "neighbor"
        self.sampler = (LaborSampler(config.fanouts) if kind == "labor"
                        else NeighborSampler(config.fanouts))
        self.graph, self.config = graph, config
        self.keys = DependentKeys(config.dependent, seed=config.seed) if config.dependent \
            else None
        if features is None and config.cache_size:
            features = graph.node_data["x"].float()
        self.store = FeatureStore(features, config.cache_size) if config.cache_size else None
        self._seeds: list[Tensor] = []
        self._epoch = 0
        self._edges = 0
        self._batches = 0
        self.count_reads = count_reads and storage_read_bytes() is not None
        self._read_bytes = 0          # this epoch's storage reads so far
        self._read_mark = 0           # storage_read_bytes() at the last count
        self.steps = 0  # batches trained by this process, over every epoch
        self._resumed: dict[str, Any] | None = None  # counters to restore in start_epoch

    def start_epoch(self, epoch: int, train_nodes: Tensor) -> int:
        from gnnforge.sampling import NodeSeeds

        seeds = NodeSeeds(train_nodes, self.config.batch_size, seed=self.config.seed)
        seeds.set_epoch(epoch)
        self._seeds, self._epoch = list(seeds), epoch
        self._edges = self._batches = self._read_bytes = 0
        self._read_mark = storage_read_bytes() or 0
        if self.store is not None:
            self.store.reset_stats()
        resumed, self._resumed = self._resumed, None
        if resumed is not None and resumed["epoch"] == epoch:  # resuming mid-epoch
            self._edges, self._batches = resumed["edges"], resumed["batches"]
            self._read_bytes = resumed.get("read_bytes", 0)
            if self.store is not None:
                self.store.load_state_dict(resumed["store"])
        return len(self._seeds)

    def batch(self, index: int) -> tuple[list[Any], Tensor, Tensor]:
        seeds = self._seeds[index]
        if self.keys is not None:
            key = self.keys[self._epoch * len(self._seeds) + index]
        else:
            key = step_key(self.config.seed, self._epoch, index)
        blocks = self.sampler.sample(self.graph, seeds, key=key)
        return blocks, blocks[0].src_nodes, seeds

    def record(self, blocks: list[Any]) -> None:
        """Count a batch the model trained on into the epoch's statistics."""
        self._edges += sum(block.num_edges for block in blocks)
        self._batches += 1
        self.steps += 1
        if self.count_reads:
            mark = storage_read_bytes() or 0
            self._read_bytes += mark - self._read_mark
            self._read_mark = mark

    def features(self, x: Any, input_nodes: Tensor, in_table: bool = False) -> Any:
        """[n, F] input features of `input_nodes` (x a tensor or SparseFeatures), through
        the feature cache when enabled. With `in_table` and neither of those, x's rows are
        left in x (`IndexedRows`): the model gathers them only where its first layer
        cannot aggregate them from x (`NodeClassifier`)."""
        if self.store is not None:
            return self.store.fetch(input_nodes)
        if in_table and isinstance(x, Tensor):
            from gnnforge.nn import IndexedRows

            return IndexedRows(x, input_nodes)
        # gather_rows: index_select (on one thread several times faster than x[input_nodes])
        # or the prefetching native copy, whichever measured faster for this class.
        return gather_rows(x, input_nodes) if isinstance(x, Tensor) else x.rows(input_nodes)

    def epoch_stats(self) -> dict[str, float]:
        stats = {"sampled_edges_per_batch": self._edges / max(self._batches, 1)}
        if self.store is not None:
            stats["cache_miss_rate"] = self.store.miss_rate
        if self.count_reads:
            stats["storage_read_mib"] = self._read_bytes / 2**20
        return stats

    def state_dict(self) -> dict[str, Any]:
        # The epoch's counters and the feature cache's contents decide the per-epoch
        # statistics (sampled edges per batch, cache miss rate), so they are saved too.
        return {"epoch": self._epoch, "edges": self._edges, "batches": self._batches,
                "steps": self.steps, "read_bytes": self._read_bytes,
                "store": None if self.store is None else self.store.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "epoch" in state:  # applied by start_epoch, which resets the counters
            self._resumed = state
            # over the whole run, as the summary's training time (older checkpoints: 0)
            self.steps = state.get("steps", 0)
            if self.store is not None and state["store"] is not None:
                self.store.load_state_dict(state["store"])
