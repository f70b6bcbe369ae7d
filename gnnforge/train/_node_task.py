"""Node classification: full-graph training, or sampled minibatches of per-layer blocks."""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnnforge._device import process_device, to_device
from gnnforge.train._xla_meter import XlaMeter
from gnnforge.graph import Graph
from gnnforge.train._compile import CompiledLoss
from gnnforge.train._config import TrainConfig
from gnnforge.train._handover import handover

__all__ = ["NodeTask", "load_node_dataset"]

# Inputs with fewer non-zeros than this fraction (Planetoid's bag-of-words: 0.5-1.3%) go
# to the model as SparseFeatures: input dropout and the first projection touch only the
# non-zeros, several times faster than the dense [N, F] path and the same math.
SPARSE_INPUT_DENSITY = 0.1


def _synthetic_sbm(seed: int) -> Graph:
    """A 4-community SBM with community-informative noisy features (no download needed)."""
    from gnnforge.data import stochastic_block_model

    sizes = [500] * 4
    graph = stochastic_block_model(sizes, 0.02, 0.002, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    y = torch.repeat_interleave(torch.arange(4), torch.tensor(sizes))
    x = torch.randn(graph.num_nodes, 16, generator=generator)
    x[:, :4] += F.one_hot(y, 4).float()
    split = torch.rand(graph.num_nodes, generator=generator)
    return graph.with_node_data(x=x, y=y, train_mask=split < 0.1,
                                val_mask=(split >= 0.1) & (split < 0.3), test_mask=split >= 0.3)


def load_node_dataset(name: str, seed: int = 0,
                      largest_component: bool = False) -> tuple[Graph, str]:
    """(graph with node data x, y, train/val/test masks, description) for `name`: a
    node-labelled graph of the dataset registry or 'sbm' (generated, labelled).

    largest_component: keep the largest (weakly) connected component only, before the
    split is drawn (Shchur et al.'s protocol); Planetoid keeps its published masks on it.
    """
    if name.lower() == "sbm":
        graph = _synthetic_sbm(seed)
        return _largest(graph, "synthetic 4-block SBM (2,000 nodes), noisy features",
                        largest_component)
    if name.lower() not in ("cora", "citeseer", "pubmed"):
        from gnnforge.train._node_data import labelled_graph

        return labelled_graph(name, seed, largest_component)
    graph, description = _planetoid(name)
    return _largest(graph, description, largest_component)


def _largest(graph: Graph, description: str, largest_component: bool) -> tuple[Graph, str]:
    if not largest_component:
        return graph, description
    from gnnforge.train._node_data import largest_component_of

    return largest_component_of(graph, description)


def _planetoid(name: str) -> tuple[Graph, str]:
    name = name.lower()
    from gnnforge.data import read_planetoid, shared_datasets_dir

    root = shared_datasets_dir()
    if root is None:
        raise FileNotFoundError(f"--dataset {name} needs the shared datasets folder "
                                "(set GNNFORGE_DATASETS); --dataset sbm needs no files")
    graph, meta = read_planetoid(root / "planetoid", name)
    missing = meta["nodes_without_features"]
    if missing:
        warnings.warn(f"{name}: {missing} of {graph.num_nodes} nodes have no features in the "
                      "shipped files (PubMed's allx is absent); they get zero vectors",
                      stacklevel=2)
    return graph, f"Planetoid {name} ({meta['allx']})"


class NodeTask:
    """Cross-entropy node classification, accuracy on the val/test masks."""

    items = "nodes"
    metric = "val_accuracy"
    higher_is_better = True

    def __init__(self, config: TrainConfig, graph: Graph | None = None,
                 description: str = "") -> None:
        if graph is None:
            graph, description = load_node_dataset(config.dataset or "pubmed", config.seed,
                                                   config.largest_component)
        for key in ("x", "y", "train_mask", "val_mask", "test_mask"):
            if key not in graph.node_data:
                raise ValueError(f"node task: graph has no node_data[{key!r}]")
        self.config, self.description = config, description
        self.graph = graph
        self.x, self.y = graph.node_data["x"].float(), graph.node_data["y"]
        if config.normalize_features:
            from gnnforge.train._node_data import row_normalized

            self.x = row_normalized(self.x)
            self.description += ", rows normalised to sum 1"
        self.num_classes = int(self.y.max()) + 1
        self.train_nodes = torch.nonzero(graph.node_data["train_mask"]).flatten()
        self.name = f"node classification ({config.mode}-graph {config.model.upper()})"
        self.sampled = config.mode == "sampled"
        self.device = process_device(config.device)  # under torchrun: cuda:LOCAL_RANK
        # The sampler reads the CPU graph; full-graph steps and evaluation use `device_graph`.
        self.device_graph = graph.to(self.device) if self.device.type != "cpu" else graph
        self.inputs = self._model_inputs(config)
        self.device_inputs = (self.inputs if self.device.type == "cpu"
                              else self.inputs.to(self.device))
        self.y_device = self.y.to(self.device)
        # --compile (full-graph mode): the loss under torch.compile, one graph (the whole
        # graph is the batch); the first call runs the model once eagerly to prepare the
        # layers' per-graph structures, which the traced calls then read.
        self.compiled = CompiledLoss(self._full_loss) if config.compile else None
        self._prepared = False
        # XLA (full graph): the step ends after the update and after the evaluation pass.
        self.xla = XlaMeter() if self.device.type == "xla" else None
        # Read by the engine: every process takes its share of every batch.
        self.cooperative = config.distributed == "cooperative"
        self._order = self.train_nodes
        if self.sampled:
            self._setup_sampler()

    def _model_inputs(self, config: TrainConfig) -> Tensor | Any:
        """x as the model takes it: SparseFeatures when mostly zero and a path supports it."""
        density = int(torch.count_nonzero(self.x)) / max(self.x.numel(), 1)
        # The feature cache and the cooperative exchange move dense rows; off the CPU the
        # input is dense too (SparseFeatures' kernels are the CPU ones).
        if density >= SPARSE_INPUT_DENSITY or config.cache_size \
                or config.distributed == "cooperative" or config.device != "cpu":
            return self.x
        from gnnforge.nn import SparseFeatures

        self.description += f", sparse input ({density:.2%} non-zero)"
        return SparseFeatures.from_dense(self.x)

    def _setup_sampler(self) -> None:
        if self.cooperative:
            from gnnforge.train._cooperative import CooperativeBatches
            from gnnforge.train._engine import init_distributed

            rank, world = init_distributed()
            self.sampler = CooperativeBatches(self.graph, self.config, rank, world)
            self.name = self.name.replace(")", f", cooperative over {world} processes)")
            return
        from gnnforge.train._sampled import SampledBatches

        self.sampler = SampledBatches(self.graph, self.config)

    def build_model(self) -> nn.Module:
        from gnnforge.nn import NodeClassifier

        config = self.config
        gat = {} if config.model != "gat" else dict(
            heads=config.heads, output_heads=config.output_heads,
            attention_dropout=config.attention_dropout)
        return NodeClassifier(self.x.shape[1], config.hidden, self.num_classes,
                              num_layers=config.layers, conv=config.model,
                              dropout=config.dropout, activation=config.activation,
                              input_dropout=config.input_dropout, **gat)

    def parameter_groups(self, model: nn.Module) -> list[dict[str, Any]]:
        """The optimiser's groups: weight decay on every layer, or (`weight_decay_layers`
        'first', Kipf & Welling's reference code) on the first layer only."""
        if self.config.weight_decay_layers == "all":
            return [{"params": list(model.parameters())}]
        first = list(model.convs[0].parameters())
        chosen = {id(p) for p in first}
        rest = [p for p in model.parameters() if id(p) not in chosen]
        return [{"params": first}, {"params": rest, "weight_decay": 0.0}]

    def plan_graph(self) -> Any:
        """What the planner plans the model on (`_engine._plan_model`): the full graph, or
        the blocks of a fixed minibatch (the first training nodes, a seeded sampler);
        None for cooperative runs (every process must take the same plan)."""
        if not self.sampled:
            return self.graph
        if self.cooperative:
            return None
        seeds = self.train_nodes[: self.config.batch_size]
        return self.sampler.sampler.sample(self.graph, seeds,
                                           generator=torch.Generator().manual_seed(0))

    def start_epoch(self, epoch: int) -> int:
        if self.sampled:
            return self.sampler.start_epoch(epoch, self.train_nodes)
        return 1

    def batch(self, index: int) -> Any:
        return self.sampler.batch(index) if self.sampled else None

    def loss(self, model: nn.Module, batch: Any) -> tuple[Tensor, int]:
        if self.cooperative:  # sampled and gathered on the CPU, handed over to the device
            share = batch.minibatch
            on = handover(share.blocks, self.sampler.features(self.x, share.input_nodes),
                          self.y[share.seeds], share.plans, share.group, self.device)
            logits = model(on.blocks, on.x, exchange=on.exchanges)
            loss = F.cross_entropy(logits, on.labels, reduction="sum")
            return loss / batch.global_size, batch.global_size
        if self.sampled:
            blocks, input_nodes, seeds = batch
            self.sampler.record(blocks)
            on_cpu = self.device.type == "cpu"      # else gathered on the CPU, then copied
            features = self.sampler.features(self.inputs, input_nodes, in_table=on_cpu)
            if not on_cpu:
                blocks = [block.to(self.device) for block in blocks]
                features, seeds = to_device(features, self.device), seeds.to(self.device)
            logits = model(blocks, features)
            return F.cross_entropy(logits, self.y_device[seeds]), int(seeds.numel())
        nodes = self.train_nodes.to(self.device)
        if self.compiled is None:
            return self._full_loss(model, self.device_graph, self.device_inputs, self.y_device,
                                   nodes), int(nodes.numel())
        if not self._prepared:  # with autograd on, so the backward's formats are built too
            model(self.device_graph, self.device_inputs)
            self._prepared = True
        return self.compiled(model, self.device_graph, self.device_inputs, self.y_device,
                             nodes), int(nodes.numel())

    @staticmethod
    def _full_loss(model: nn.Module, graph: Graph, inputs: Any, y: Tensor,
                   nodes: Tensor) -> Tensor:
        """Cross-entropy of the full-graph logits on `nodes` (compilable)."""
        return F.cross_entropy(model(graph, inputs)[nodes], y[nodes])

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        model.eval()
        logits = model(self.device_graph, self.device_inputs)  # inference on the full graph
        model.train()
        mask = self.device_graph.node_data[f"{split}_mask"]
        if self.xla is None:
            correct = (logits[mask].argmax(1) == self.y_device[mask]).float().mean()
            metrics = {f"{split}_accuracy": float(correct)}
            if split == "val" and self.config.early_stopping != "metric":  # what they read
                metrics["val_loss"] = float(F.cross_entropy(logits[mask], self.y_device[mask]))
            return metrics
        # XLA: masked sums, not a boolean index (its size would come from the data).
        hits = ((logits.argmax(1) == self.y_device) & mask).sum()
        total = mask.sum()
        self.xla.sync()
        return {f"{split}_accuracy": hits.cpu().item() / max(total.cpu().item(), 1)}

    def epoch_stats(self) -> dict[str, float]:
        return self.sampler.epoch_stats() if self.sampled else {}

    def describe(self) -> list[tuple[str, Any]]:
        return [("dataset", self.description),
                ("nodes / edges", f"{self.graph.num_nodes} / {self.graph.num_edges}"),
                ("train / val / test nodes", "/".join(
                    str(int(self.graph.node_data[f"{s}_mask"].sum()))
                    for s in ("train", "val", "test")))]

    def resource_report(self, summary: dict[str, Any]) -> str | None:
        """`steps/s=S peak_rss_mib=M data_mib=D` (sampled mode in one process, see
        `resource_line`; None otherwise): data is the graph's COO and the input features."""
        from gnnforge.train._resources import resource_line

        if not self.sampled or self.cooperative:
            return None
        graph = self.graph
        data = graph.src.nbytes + graph.dst.nbytes + self.x.numel() * self.x.element_size()
        return resource_line(self.sampler.steps, summary["train time (s)"], data)

    def state_dict(self) -> dict[str, Any]:
        return self.sampler.state_dict() if self.sampled else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.sampled:
            self.sampler.load_state_dict(state)
