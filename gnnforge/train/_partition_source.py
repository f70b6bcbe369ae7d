"""The node data `gnnforge partition` writes: a node-classification dataset, or a graph
with generated features, labels and splits."""

from __future__ import annotations

import torch
from torch import Tensor

from gnnforge.graph import Graph

__all__ = ["load_node_data"]


def load_node_data(name: str, seed: int, feature_dim: int, num_classes: int,
                   train_fraction: float) -> tuple[Graph, Tensor, Tensor, dict[str, Tensor]]:
    """(graph, features [N, F], labels [N], {"train", "val", "test"} -> [N] bool).

    Node datasets (cora, citeseer, pubmed, sbm) come exactly as `train --task node` loads
    them (same seed, same graph), so a partitioned run can be compared with a
    single-process one. Other names go through `gnnforge.sampling`'s loader (undirected
    graphs); what they lack is generated from `seed`: standard-normal features, uniform
    labels, and splits of `train_fraction` each for training, validation and test (the
    other vertices are unlabelled: evaluation samples too, and costs what it covers).

    Raises:
        KeyError: on an unknown name.
    """
    from gnnforge.train._node_task import load_node_dataset

    if name in ("cora", "citeseer", "pubmed", "sbm"):
        graph, _ = load_node_dataset(name, seed)
        data = graph.node_data
        masks = {split: data[f"{split}_mask"] for split in ("train", "val", "test")}
        return graph, data["x"].float(), data["y"], masks
    from gnnforge.sampling._datasets import load, resolve_name

    loaded = load(resolve_name(name), feature_dim, seed)
    graph = loaded.graph
    generator = torch.Generator().manual_seed(seed)
    features = loaded.features
    if features is None:
        features = torch.randn(graph.num_nodes, feature_dim, generator=generator)
    labels = loaded.labels
    if labels is None:
        labels = torch.randint(0, num_classes, (graph.num_nodes,), generator=generator)
    draw = torch.rand(graph.num_nodes, generator=generator)
    masks = {"train": draw < train_fraction,
             "val": (draw >= train_fraction) & (draw < 2 * train_fraction),
             "test": (draw >= 2 * train_fraction) & (draw < 3 * train_fraction)}
    return Graph._trusted(graph.src, graph.dst, graph.num_nodes), features, labels.long(), masks
