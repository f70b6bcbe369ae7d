"""Node-classification inputs for every node-labelled graph of the dataset registry.

Planetoid graphs keep their published split (`_node_task.load_node_dataset`). The others
(the gnn-benchmark and GraphGallery npz sets, MUSAE) are made undirected and get the
split of Shchur et al. ("Pitfalls of GNN evaluation", 2018): per class, 20 random train
and 30 validation nodes, every other labelled node for testing, drawn from the seed.
Inputs: the dataset's features as shipped when it has dense ones (`--normalize-features`
row-normalises them, as it does Planetoid's); MUSAE's sparse feature ids as a
fixed random projection to 128 columns (a linear map of the multi-hot vector, which would
be 4,714 wide); structural features (one-hot log2-degree bucket and scaled log degree)
for a graph without features (musae-git).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from gnnforge.graph import Graph

__all__ = ["PROJECTED_WIDTH", "labelled_graph", "per_class_split", "row_normalized",
           "structural_features"]

PROJECTED_WIDTH = 128
TRAIN_PER_CLASS, VAL_PER_CLASS = 20, 30
_DEGREE_BUCKETS = 16


def per_class_split(y: Tensor, seed: int, train: int = TRAIN_PER_CLASS,
                    val: int = VAL_PER_CLASS) -> dict[str, Tensor]:
    """Boolean train/val/test masks: per class `train` and `val` random labelled nodes
    (fewer when a class is small: half of it for training, a quarter for validation), the
    rest of the labelled nodes (y >= 0) for testing."""
    generator = torch.Generator().manual_seed(seed)
    masks = {split: torch.zeros(y.numel(), dtype=torch.bool) for split in ("train", "val")}
    labelled = y >= 0
    for label in torch.unique(y[labelled]).tolist():
        nodes = torch.nonzero(y == label).flatten()
        nodes = nodes[torch.randperm(nodes.numel(), generator=generator)]
        n_train = min(train, nodes.numel() // 2)
        n_val = min(val, (nodes.numel() - n_train) // 2)
        masks["train"][nodes[:n_train]] = True
        masks["val"][nodes[n_train:n_train + n_val]] = True
    masks["test"] = labelled & ~masks["train"] & ~masks["val"]
    return masks


def structural_features(graph: Graph) -> Tensor:
    """[N, 17] float: one-hot log2(in-degree + 1) bucket (16) and log(1 + in-degree) / 10."""
    degree = torch.bincount(graph.dst, minlength=graph.num_nodes).float()
    bucket = torch.log2(degree + 1).floor().long().clamp(max=_DEGREE_BUCKETS - 1)
    onehot = torch.nn.functional.one_hot(bucket, _DEGREE_BUCKETS).float()
    return torch.cat([onehot, (torch.log1p(degree) / 10).unsqueeze(1)], dim=1)


def _project(feature_ids: Tensor, width: int, seed: int) -> Tensor:
    """Multi-hot rows (ids padded with -1) times a fixed Gaussian [F, width] / sqrt(width)."""
    ids = feature_ids.numpy()
    rows, slots = np.nonzero(ids >= 0)
    cols = ids[rows, slots]
    vocabulary = int(cols.max()) + 1 if cols.size else 1
    projection = np.random.default_rng(seed).standard_normal((vocabulary, width)) / math.sqrt(width)
    features = np.zeros((ids.shape[0], width))
    np.add.at(features, rows, projection[cols])
    return torch.from_numpy(features.astype(np.float32))


def row_normalized(x: Tensor) -> Tensor:
    """Each row divided by its sum (rows summing to 0 stay 0): Kipf & Welling's
    preprocessing of bag-of-words inputs. Negative entries are refused, since a row sum
    is then no measure of the row's mass.

    Raises:
        ValueError: x has a negative entry (names its position).
    """
    if x.numel() and bool((x < 0).any()):
        row, col = (int(i) for i in torch.nonzero(x < 0)[0])
        raise ValueError(f"--normalize-features: x[{row}, {col}] = {float(x[row, col])} is "
                         "negative; row normalisation needs non-negative features")
    total = x.sum(1, keepdim=True)
    return x / torch.where(total == 0, torch.ones_like(total), total)


def largest_component_of(graph: Graph, description: str) -> tuple[Graph, str]:
    """(the largest weakly connected component of `graph`, description saying what went)."""
    from gnnforge.transforms import LargestConnectedComponents

    transform = LargestConnectedComponents()
    component = transform(graph)
    return component, (f"{description}; largest connected component: {component.num_nodes:,} "
                       f"of {graph.num_nodes:,} nodes ({transform.dropped_nodes:,} nodes and "
                       f"{transform.dropped_edges:,} edges dropped)")


def labelled_graph(name: str, seed: int = 0,
                   largest_component: bool = False) -> tuple[Graph, str]:
    """(graph with node data x, y and train/val/test masks, description) for a registry
    node-labelled graph other than Planetoid's; `largest_component` keeps only the
    largest connected component, before the split is drawn."""
    from gnnforge.data import load_dataset

    dataset = load_dataset(name, symmetrize=True, dedup=True, self_loops="remove")
    graph, kept = dataset.graph, ""
    if largest_component:
        graph, kept = largest_component_of(graph, "")
    if "y" not in graph.node_data:
        raise ValueError(f"dataset {name!r} has no node labels; use --task link")
    y = graph.node_data["y"].long()
    if "x" in graph.node_data:
        x, inputs = graph.node_data["x"].float(), "its features"
    elif "feature_ids" in graph.node_data:
        x = _project(graph.node_data["feature_ids"], PROJECTED_WIDTH, seed)
        inputs = f"its sparse features randomly projected to {PROJECTED_WIDTH} columns"
    else:
        x, inputs = structural_features(graph), "degree features (it has none)"
    masks = per_class_split(y, seed)
    structure = Graph._trusted(graph.src, graph.dst, graph.num_nodes)
    out = structure.with_node_data(x=x, y=y, train_mask=masks["train"], val_mask=masks["val"],
                                   test_mask=masks["test"])
    return out, (f"{dataset.name} (undirected, {inputs}; {TRAIN_PER_CLASS}/{VAL_PER_CLASS} "
                 f"per class train/val{kept})")
