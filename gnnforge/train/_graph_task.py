"""Graph property prediction with a GIN: OGB's on static-shape packed batches, or Xu et
al.'s GIN-0 on random batches of training graphs (--graph-model, --steps-per-epoch)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnnforge._device import process_device
from gnnforge.graph import Graph, GraphBatch
from gnnforge.packing import StaticBatch
from gnnforge.train._compile import CompiledLoss
from gnnforge.train._config import TrainConfig
from gnnforge.train._packed_split import PackedSplit
from gnnforge.train._xla_meter import XlaMeter, accumulator_dtype

__all__ = ["GraphTask", "random_batches", "split_indices"]


def split_indices(count: int, seed: int, fractions=(0.8, 0.1)) -> dict[str, list[int]]:
    """A seeded random train/val/test split of range(count) (80/10/10 by default)."""
    order = torch.randperm(count, generator=torch.Generator().manual_seed(seed)).tolist()
    train_end = int(round(fractions[0] * count))
    val_end = train_end + int(round(fractions[1] * count))
    return {"train": order[:train_end], "val": order[train_end:val_end],
            "test": order[val_end:]}


def random_batches(count: int, batch: int, steps: int, seed: int, epoch: int
                   ) -> list[list[int]]:
    """`steps` batches of min(batch, count) distinct positions in range(count), each drawn
    afresh (Xu et al.'s `np.random.permutation(len(train_graphs))[:batch_size]` per
    iteration); a pure function of (seed, epoch), so a resumed run draws the same."""
    rng = np.random.default_rng((seed, epoch))
    return [rng.permutation(count)[:batch].tolist() for _ in range(steps)]


def _load(config: TrainConfig):
    from gnnforge.train._graph_data import load_graph_data

    return load_graph_data(config.dataset or "nci-tpsa", limit=config.limit,
                           progress=config.progress)


class GraphTask:
    """Regression (standardised MSE, reported as MAE in target units) of graph targets `y`
    (missing values masked by `y_mask` when present), binary classification when every
    target is 0 or 1 (BCE, reported as accuracy), or multi-class classification when `y`
    is one integer class per graph (cross-entropy, accuracy; the TU sets, reddit10k)."""

    name = "graph property prediction (GIN, packed fixed-shape batches)"
    items = "graphs"

    def __init__(self, config: TrainConfig, graphs: list[Graph] | None = None,
                 target: str = "", atom_vocabulary=None, bond_vocabulary=None) -> None:
        from gnnforge.data import ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS

        if graphs is None:
            data = _load(config)
            graphs, target = data.graphs, data.target
            atom_vocabulary, bond_vocabulary = data.atom_vocabulary, data.bond_vocabulary
        self.atom_vocabulary = tuple(atom_vocabulary or ATOM_FEATURE_DIMS)
        self.bond_vocabulary = tuple(bond_vocabulary or BOND_FEATURE_DIMS)
        if len(graphs) < 10:
            raise ValueError(f"graph task: need at least 10 graphs, got {len(graphs)}")
        self.config, self.graphs, self.target = config, graphs, target
        self.splits = self._splits(graphs)
        train = PackedSplit(graphs, self.splits["train"], config.batch_graphs, seed=config.seed)
        # One batch shape for every split where the graphs fit the training limits: one
        # compiled evaluation step serves validation and test. (--selection fold-mean has
        # no validation split.)
        self.loaders = {"train": train, **{
            split: PackedSplit(graphs, self.splits[split], config.batch_graphs,
                               seed=config.seed, shuffle=False, limits=train.limits)
            for split in ("val", "test") if self.splits[split]}}
        for split in ("val", "test"):
            if split in self.loaders:
                self.loaders[split].plan(0)
        # --steps-per-epoch: this epoch's random batches (positions in splits["train"]).
        self._drawn: list[list[int]] | None = None
        # --compile: the loss (and its backward) under torch.compile, one graph per pack
        # shape; evaluation stays eager.
        self.compiled = CompiledLoss(self._loss_value) if config.compile else None
        # Packs are built on the CPU; off the CPU (or compiled) a batch reaches the model
        # as a StaticBatch with every array precomputed, copied over pinned memory.
        self.device = process_device(config.device)  # under torchrun: cuda:LOCAL_RANK
        self._static = config.compile or self.device.type != "cpu"
        # XLA: the step ends after the update and after each evaluation batch (`sync`).
        self.xla = XlaMeter() if self.device.type == "xla" else None
        y = torch.stack([g.graph_data["y"] for g in graphs])
        self.multiclass = y.dim() == 1 and not y.is_floating_point()
        if self.multiclass:                                                   # [G] classes
            self.classification, self.num_tasks = True, int(y.max()) + 1
            self.metric, self.higher_is_better = "val_accuracy", True
            return
        y = y.float()                                                         # [G, T]
        mask = torch.stack([_label_mask(g) for g in graphs])
        self.classification = bool(((y == 0) | (y == 1) | ~mask).all())
        train_y = y[self.splits["train"]]
        train_mask = mask[self.splits["train"]]
        self.mean = (train_y * train_mask).sum(0) / train_mask.sum(0).clamp(min=1)
        variance = (((train_y - self.mean) * train_mask) ** 2).sum(0) / \
            train_mask.sum(0).clamp(min=1)
        self.std = variance.sqrt().clamp(min=1e-6)
        self.mean, self.std = self.mean.to(self.device), self.std.to(self.device)
        self.num_tasks = y.shape[1]
        self.metric = "val_accuracy" if self.classification else "val_mae"
        self.higher_is_better = self.classification

    def _splits(self, graphs: list[Graph]) -> dict[str, list[int]]:
        """The seeded 80/10/10 split, or with --folds K the seed's cross-validation fold."""
        if not self.config.folds:
            return split_indices(len(graphs), self.config.seed)
        y = torch.stack([g.graph_data["y"] for g in graphs])
        if y.dim() != 1 or y.is_floating_point():
            raise ValueError("--folds stratifies by class: it needs one integer class per "
                             f"graph (got targets of shape {tuple(y.shape)}, {y.dtype})")
        from gnnforge.train._folds import fold_indices

        self.name = f"{self.name}, fold {self.config.seed % self.config.folds + 1} of " \
                    f"{self.config.folds}"
        return fold_indices(y, self.config.folds, self.config.seed,
                            validation=self.config.selection != "fold-mean")

    def build_model(self) -> nn.Module:
        from gnnforge.nn import GINClassifier, MoleculeGIN

        if self.config.graph_model == "gin-0":
            # One-hot of the first node column: a TU set's node label (Xu et al.'s input),
            # a molecule's atomic number.
            model = GINClassifier(self.atom_vocabulary[0], hidden=self.config.hidden,
                                  num_layers=self.config.layers, num_classes=self.num_tasks,
                                  pool=self.config.pool, dropout=self.config.dropout)
        else:
            model = MoleculeGIN(self.atom_vocabulary, self.bond_vocabulary,
                                hidden=self.config.hidden, num_layers=self.config.layers,
                                num_tasks=self.num_tasks, pool=self.config.pool,
                                dropout=self.config.dropout)
        if self.compiled is not None or self.xla is not None:
            # Compiled or on XLA the forward leaves this check to us: once, on the CPU.
            model.check_inputs(GraphBatch.from_graphs(self.graphs))
        return model

    def start_epoch(self, epoch: int) -> int:
        if self.config.steps_per_epoch:
            self._drawn = random_batches(len(self.splits["train"]), self.config.batch_graphs,
                                         self.config.steps_per_epoch, self.config.seed, epoch)
            return len(self._drawn)
        return len(self.loaders["train"].plan(epoch))

    def batch(self, index: int) -> GraphBatch:
        if self._drawn is not None:  # unpadded: batch norm sees exactly these graphs
            train = self.splits["train"]
            return GraphBatch.from_graphs([self.graphs[train[i]] for i in self._drawn[index]])
        return self.loaders["train"].batch(index)

    def _targets(self, batch: GraphBatch | StaticBatch) -> tuple[Tensor, Tensor]:
        mask = batch.graph_data.get("y_mask")
        mask = torch.ones_like(batch.graph_data["y"], dtype=torch.bool) if mask is None else mask
        return batch.graph_data["y"], mask & batch.graph_mask.unsqueeze(1)   # [B, T] each

    def _model_input(self, batch: GraphBatch) -> GraphBatch | StaticBatch:
        """The batch as the model takes it: on --device, as a StaticBatch when needed."""
        if not self._static:
            return batch
        return StaticBatch.from_batch(batch).to(self.device)

    def loss(self, model: nn.Module, batch: GraphBatch) -> tuple[Tensor, int]:
        # The item count comes from the CPU-side batch: no device synchronisation.
        real = batch.num_real_graphs
        if self.compiled is not None:
            return self.compiled(model, self._model_input(batch)), real
        return self._loss_value(model, self._model_input(batch)), real

    def _loss_value(self, model: nn.Module, batch: GraphBatch | StaticBatch) -> Tensor:
        """Mean loss over the real graphs of the batch, masked (no data-dependent shapes,
        no host reads: compilable)."""
        prediction = model(batch)                                             # [B, T]
        if self.multiclass:
            real = batch.graph_mask.to(prediction.dtype)                      # [B]
            errors = F.cross_entropy(prediction, batch.graph_data["y"].long(), reduction="none")
            return (errors * real).sum() / real.sum().clamp(min=1)
        y, mask = self._targets(batch)
        if self.classification:
            errors = F.binary_cross_entropy_with_logits(prediction, y, reduction="none")
        else:
            errors = (prediction - (y - self.mean) / self.std) ** 2
        count = mask.sum()
        return (errors * mask).sum() / count.clamp(min=1)

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        """The split's mean score (MAE or accuracy) over its real graphs and labels.

        The per-batch sums stay on the device (float64, float32 on XLA: the same sum as
        adding each batch's float on the host) and are read once at the end; on XLA each
        batch is one step.
        """
        model.eval()
        loader = self.loaders[split]
        # Two [1] tensors copied from the CPU: XLA bakes a 0-d zero into the graph as a
        # constant, and one tensor for both sums is one graph input, not two; either way
        # the first batch compiled apart from the others.
        total, count = (torch.zeros(1, dtype=accumulator_dtype(self.device)).to(self.device)
                        for _ in range(2))
        for number in range(len(loader)):
            batch = self._model_input(loader.batch(number))
            score, weight = self._scores(model(batch), batch)                 # [B, T] each
            total = total + (score * weight).sum().to(total.dtype)
            count = count + weight.sum().to(count.dtype)
            if self.xla is not None:
                self.xla.sync()
        model.train()
        name = "accuracy" if self.classification else "mae"
        total, count = total.cpu(), count.cpu()  # one read (on XLA .item() is a fallback)
        return {f"{split}_{name}": total.item() / max(count.item(), 1)}

    def _scores(self, prediction: Tensor, batch: GraphBatch | StaticBatch
                ) -> tuple[Tensor, Tensor]:
        """(score per prediction, its weight: 1 on real graphs and labels, else 0); masked,
        not indexed, so the shapes stay the pack's."""
        if self.multiclass:
            real = batch.graph_mask
            correct = prediction.argmax(1) == batch.graph_data["y"]
            return correct.to(prediction.dtype), real.to(prediction.dtype)
        y, mask = self._targets(batch)
        if self.classification:
            score = ((prediction > 0).to(y.dtype) == y).to(y.dtype)
        else:
            score = (prediction * self.std + self.mean - y).abs()
        return score, mask.to(score.dtype)

    def epoch_stats(self) -> dict[str, float]:
        if self._drawn is not None:
            return {}  # random batches are not padded
        nodes, edges = self.loaders["train"].padding_fraction()
        return {"node_padding": nodes, "edge_padding": edges}

    def describe(self) -> list[tuple[str, Any]]:
        loader = self.loaders["train"]
        return [("dataset", self.config.dataset or "nci-tpsa"), ("target", self.target),
                ("graphs (train/val/test)",
                 "/".join(str(len(self.splits[s])) for s in ("train", "val", "test"))),
                ("batch shape (nodes, edges, slots)", ", ".join(map(str, loader.shape))
                 if not self.config.steps_per_epoch else
                 f"{self.config.steps_per_epoch} random batches of {self.config.batch_graphs} "
                 "graphs per epoch (unpadded)")]

    def state_dict(self) -> dict[str, Any]:
        return {}  # batch order is a function of (seed, epoch); nothing else is random

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


def _label_mask(graph: Graph) -> Tensor:
    mask = graph.graph_data.get("y_mask")
    return torch.ones_like(graph.graph_data["y"], dtype=torch.bool) if mask is None else mask
