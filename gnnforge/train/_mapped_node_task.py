"""Sampled node classification on synthetic-products, straight from its memory maps.

The registry's node task holds a `Graph` (int64 COO, plus CSR copies): for
ogbn-products' 124M edges that is 2 GiB per index array. Here the sampler reads the
dataset's memory-mapped CSR (int32 `col`, edge ids implied by the CSR order, see
`gnnforge.sampling.InEdges`) and the features are gathered per batch from the mapped
[N, 100] file, so training adds memory proportional to a batch, not to the graph.

Evaluation samples too (the training fanouts) over a seeded sample of at most
`EVAL_NODES` nodes of the split, the whole split when smaller: full-graph inference
would need the whole graph in memory, and one pass over the 2.2M test nodes costs more
than 200 training steps. The summary says how many nodes each accuracy covers.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnnforge._device import process_device, to_device
from gnnforge.train._config import ConfigError, TrainConfig
from gnnforge.train._resources import resource_line

__all__ = ["EVAL_NODES", "MappedNodeTask"]

EVAL_NODES = 10_000
_REFUSED = {"normalize_features": (False, "it would copy the whole [N, 100] feature file"),
            "distributed": ("independent", "its samplers take a Graph or a partition"),
            "compile": (False, "sampled minibatches change shape every step")}


class MappedNodeTask:
    """Node classification over `gnnforge.data.load_synthetic_products`, sampled only."""

    items = "nodes"
    metric = "val_accuracy"
    higher_is_better = True
    cooperative = False

    def __init__(self, config: TrainConfig) -> None:
        from gnnforge.data import PRODUCTS_NODES, load_synthetic_products
        from gnnforge.sampling import InEdges
        from gnnforge.train._sampled import SampledBatches

        for name, (allowed, why) in _REFUSED.items():
            if getattr(config, name) != allowed:
                raise ConfigError(f"--dataset synthetic-products does not take "
                                  f"--{name.replace('_', '-')} {getattr(config, name)}: {why}")
        self.config = config
        prefetch = {"auto": None, "on": True, "off": False}[config.warm_page_cache]
        self.data = load_synthetic_products(config.synthetic_nodes or PRODUCTS_NODES,
                                            config.seed, progress=config.progress,
                                            prefetch=prefetch)
        empty = self.data.col[:0]  # eids: the CSR positions are the edge ids
        self.edges = InEdges(self.data.rowptr, self.data.col, empty, self.data.num_nodes)
        self.x, self.y = self.data.x, self.data.y
        self.num_classes = int(self.data.meta["spec"]["num_classes"])
        self.train_nodes = self.data.train
        self.device = process_device(config.device)
        self.y_device = self.y.to(self.device)
        self.sampler = SampledBatches(self.edges, config, features=self.x, count_reads=True)
        self.eval_nodes = {split: _subset(getattr(self.data, split), config.seed)
                           for split in ("val", "test")}
        self.name = f"node classification (sampled-graph {config.model.upper()})"
        spec = self.data.meta["spec"]
        self.description = (f"synthetic-products ({self.data.num_nodes:,} nodes, seed "
                            f"{spec['seed']}, from {self.data.folder}; "
                            f"{self.data.warmup.describe()})")

    def build_model(self) -> nn.Module:
        from gnnforge.nn import NodeClassifier

        config = self.config
        return NodeClassifier(self.x.shape[1], config.hidden, self.num_classes,
                              num_layers=config.layers, conv=config.model,
                              dropout=config.dropout, activation=config.activation,
                              input_dropout=config.input_dropout)

    def plan_graph(self) -> Any:
        """The blocks of a fixed first minibatch, for the planner (as `NodeTask`)."""
        seeds = self.train_nodes[: self.config.batch_size]
        return self.sampler.sampler.sample(self.edges, seeds,
                                           generator=torch.Generator().manual_seed(0))

    def start_epoch(self, epoch: int) -> int:
        return self.sampler.start_epoch(epoch, self.train_nodes)

    def batch(self, index: int) -> Any:
        return self.sampler.batch(index)

    def loss(self, model: nn.Module, batch: Any) -> tuple[Tensor, int]:
        blocks, input_nodes, seeds = batch
        logits = model(*self._on_device(blocks, input_nodes))
        self.sampler.record(blocks)  # after the forward: its reads of the feature map count
        return F.cross_entropy(logits, self.y_device[seeds.to(self.device)]), int(seeds.numel())

    def _on_device(self, blocks: list[Any], input_nodes: Tensor) -> tuple[list[Any], Tensor]:
        if self.device.type == "cpu":  # the rows stay in the map for a SAGE first layer
            return blocks, self.sampler.features(self.x, input_nodes, in_table=True)
        features = self.sampler.features(self.x, input_nodes)           # [n, F], from the map
        return [block.to(self.device) for block in blocks], to_device(features, self.device)

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        """Accuracy on the split's evaluation nodes, over blocks sampled with the training
        fanouts (a fixed generator: every evaluation sees the same blocks)."""
        model.eval()
        nodes = self.eval_nodes[split]
        generator = torch.Generator().manual_seed(self.config.seed)
        correct = 0
        for start in range(0, nodes.numel(), self.config.batch_size):
            seeds = nodes[start:start + self.config.batch_size]
            blocks = self.sampler.sampler.sample(self.edges, seeds, generator=generator)
            logits = model(*self._on_device(blocks, blocks[0].src_nodes))
            correct += int((logits.argmax(1).cpu() == self.y[seeds]).sum())
        model.train()
        return {f"{split}_accuracy": correct / max(nodes.numel(), 1)}

    def epoch_stats(self) -> dict[str, float]:
        return self.sampler.epoch_stats()

    def describe(self) -> list[tuple[str, Any]]:
        sizes = "/".join(str(getattr(self.data, s).numel()) for s in ("train", "val", "test"))
        evaluated = "/".join(str(self.eval_nodes[s].numel()) for s in ("val", "test"))
        return [("dataset", self.description),
                ("nodes / edges", f"{self.data.num_nodes} / {self.data.num_edges}"),
                ("train / val / test nodes", sizes),
                ("val / test nodes evaluated (sampled blocks)", evaluated)]

    def resource_report(self, summary: dict[str, Any]) -> str:
        """`steps/s=S peak_rss_mib=M data_mib=D` (see `resource_line`)."""
        return resource_line(self.sampler.steps, summary["train time (s)"],
                             self.data.data_bytes)

    def state_dict(self) -> dict[str, Any]:
        return self.sampler.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.sampler.load_state_dict(state)


def _subset(nodes: Tensor, seed: int) -> Tensor:
    """At most EVAL_NODES of `nodes`, drawn from `seed`, sorted."""
    if nodes.numel() <= EVAL_NODES:
        return nodes
    generator = torch.Generator().manual_seed(seed)
    return nodes[torch.randperm(nodes.numel(), generator=generator)[:EVAL_NODES]].sort().values
