"""Link prediction on unlabelled graphs: GraphSAGE/GCN on sampled blocks, dot-product scores.

A step takes a batch of training pairs (u, v), draws one negative (u, w) per pair (never
an edge of the graph), samples blocks around every endpoint over the message graph (the
training pairs, see `LinkSplit`) and removes the batch's own pairs from those blocks, so
the model cannot read the answer off an edge it is asked to predict. Loss: binary cross
entropy of the scores h_u . h_v. Evaluation embeds every node on the message graph (val
and test pairs are not in it) and ranks each held-out pair among 50 negatives of its own
(MRR, Hits@1, Hits@10) and reports AUC over all of them.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnnforge._device import process_device, to_device
from gnnforge.graph import Graph
from gnnforge.train._config import TrainConfig
from gnnforge.train._link_metrics import link_metrics
from gnnforge.train._link_split import LinkSplit, remove_edges

__all__ = ["LinkModel", "LinkTask", "load_link_graph"]

EVAL_NEGATIVES = 50


def load_link_graph(name: str) -> tuple[Graph, str]:
    """(graph, description) of a registry dataset, undirected, for link prediction."""
    from gnnforge.data import load_dataset

    dataset = load_dataset(name, symmetrize=True, dedup=True, self_loops="remove")
    if len(dataset.graphs) != 1:
        raise ValueError(f"--task link needs one graph; {name!r} holds {len(dataset.graphs)}")
    return dataset.graph, f"{dataset.name} (undirected, {dataset.graph.num_nodes:,} nodes)"


class LinkModel(nn.Module):
    """Node embeddings: the input features (or a learned table for featureless graphs)
    through `NodeClassifier`'s layers, scored by dot products."""

    def __init__(self, num_nodes: int, in_channels: int | None, hidden: int, num_layers: int,
                 conv: str, dropout: float) -> None:
        super().__init__()
        from gnnforge.nn import NodeClassifier

        self.table = nn.Embedding(num_nodes, hidden) if in_channels is None else None
        self.encoder = NodeClassifier(in_channels or hidden, hidden, hidden,
                                      num_layers=num_layers, conv=conv, dropout=dropout)

    def forward(self, graph: Any, nodes: Tensor, x: Tensor | None) -> Tensor:
        """Embeddings of the destinations of `graph` (blocks or the message graph) whose
        input nodes are `nodes` (x: their features, None for the learned table)."""
        inputs = self.table(nodes) if self.table is not None else x
        return self.encoder(graph, inputs)

    @staticmethod
    def score(h_u: Tensor, h_v: Tensor) -> Tensor:
        return (h_u * h_v).sum(-1)


class LinkTask:
    """Link prediction, the engine's task protocol (see `gnnforge.train._engine.Task`)."""

    items = "edges"
    metric = "val_mrr"
    higher_is_better = True

    def __init__(self, config: TrainConfig, graph: Graph | None = None,
                 description: str = "") -> None:
        from gnnforge.sampling import LaborSampler, NeighborSampler

        if graph is None:
            graph, description = load_link_graph(config.dataset or "rmat")
        self.config, self.description = config, description
        self.split = LinkSplit(graph, config.seed)
        self.x = graph.node_data["x"].float() if "x" in graph.node_data else None
        self.sampler = (LaborSampler(config.fanouts) if config.sampler == "labor"
                        else NeighborSampler(config.fanouts))
        self.generator = torch.Generator().manual_seed(config.seed)
        eval_generator = torch.Generator().manual_seed(config.seed + 1)
        self.eval_negatives = {split: self.split.negatives(self.split.pairs[split][:, 0],
                                                           EVAL_NEGATIVES, eval_generator)
                               for split in ("val", "test")}
        self.name = f"link prediction (sampled {config.model.upper()}, dot-product scores)"
        self._order = torch.empty(0, dtype=torch.int64)
        self._removed = self._batches = 0
        # Sampling and negatives stay on the CPU; blocks, inputs and indices move (--device).
        self.device = process_device(config.device)  # under torchrun: cuda:LOCAL_RANK

    def build_model(self) -> nn.Module:
        width = None if self.x is None else self.x.shape[1]
        return LinkModel(self.split.num_nodes, width, self.config.hidden, self.config.layers,
                         self.config.model, self.config.dropout)

    def start_epoch(self, epoch: int) -> int:
        generator = torch.Generator().manual_seed(self.config.seed * 1_000_003 + epoch)
        self._order = torch.randperm(self.split.num_train, generator=generator)
        self._removed = self._batches = 0
        return -(-self.split.num_train // self.config.batch_size)

    def batch(self, index: int) -> dict[str, Any]:
        size = self.config.batch_size
        ids = self._order[index * size:(index + 1) * size]
        pairs = self.split.pairs["train"][ids]
        tails = self.split.negatives(pairs[:, 0], 1, self.generator)[:, 0]
        seeds, local = torch.unique(torch.cat([pairs[:, 0], pairs[:, 1], tails]),
                                    return_inverse=True)
        blocks = self.sampler.sample(self.split.message_graph, seeds, generator=self.generator)
        excluded = self.split.edge_ids(ids)
        kept = [remove_edges(block, excluded) for block in blocks]
        self._removed += sum(b.num_edges - k.num_edges for b, k in zip(blocks, kept))
        self._batches += 1
        n = ids.numel()
        return {"blocks": kept, "heads": local[:n], "tails": local[n:2 * n],
                "negatives": local[2 * n:]}

    def _inputs(self, nodes: Tensor) -> Tensor | None:
        """Input features of `nodes` (CPU ids), gathered on the CPU, on the device."""
        return None if self.x is None else to_device(self.x.index_select(0, nodes), self.device)

    def loss(self, model: nn.Module, batch: dict[str, Any]) -> tuple[Tensor, int]:
        features = self._inputs(batch["blocks"][0].src_nodes)
        if self.device.type != "cpu":
            batch = {key: ([block.to(self.device) for block in value] if key == "blocks"
                           else to_device(value, self.device)) for key, value in batch.items()}
        blocks = batch["blocks"]
        h = model(blocks, blocks[0].src_nodes, features)
        heads = h[batch["heads"]]
        positive = LinkModel.score(heads, h[batch["tails"]])
        negative = LinkModel.score(heads, h[batch["negatives"]])
        scores = torch.cat([positive, negative])
        labels = torch.cat([torch.ones_like(positive), torch.zeros_like(negative)])
        return F.binary_cross_entropy_with_logits(scores, labels), int(positive.numel())

    @torch.no_grad()
    def embed(self, model: nn.Module) -> Tensor:
        """[N, hidden] embeddings of every node on the message graph (eval mode)."""
        model.eval()
        graph = self.split.message_graph
        nodes = torch.arange(self.split.num_nodes, device=self.device)
        x = None if self.x is None else self.x.to(self.device)
        h = model(graph if self.device.type == "cpu" else graph.to(self.device), nodes, x)
        model.train()
        return h

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        h = self.embed(model)
        pairs = self.split.pairs[split].to(self.device)
        tails = self.eval_negatives[split].to(self.device)
        positive = LinkModel.score(h[pairs[:, 0]], h[pairs[:, 1]])
        negative = LinkModel.score(h[pairs[:, 0]].unsqueeze(1), h[tails])
        return link_metrics(positive, negative, split)

    def epoch_stats(self) -> dict[str, float]:
        return {"removed_edges_per_batch": self._removed / max(self._batches, 1)}

    def describe(self) -> list[tuple[str, Any]]:
        pairs = self.split.pairs
        return [("dataset", self.description),
                ("pairs (train/val/test)", "/".join(str(int(pairs[s].shape[0]))
                                                    for s in ("train", "val", "test"))),
                ("inputs", "node features" if self.x is not None else
                 f"learned {self.config.hidden}-wide node table (no features)"),
                ("evaluation", f"each held-out pair ranked among {EVAL_NEGATIVES} negatives")]

    def state_dict(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["generator"])
