"""A minimal private loader for the graphs the sampling measurements use.

Temporary: the data capability's loaders had not landed when this was written; switch
the CLI and benchmark to `gnnforge.data` loaders once they exist. Every graph is returned
undirected (both directions, deduplicated, no self-loops), as sampling benchmarks use them.
"""

from __future__ import annotations

import csv
import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from gnnforge.data import rmat, shared_datasets_dir
from gnnforge.graph import Graph

GRAPHS = ("github", "facebook", "slashdot", "rmat", "rmat-small")


@dataclass(frozen=True)
class LoadedGraph:
    name: str
    graph: Graph
    features: Tensor | None = None  # [N, F] float32
    labels: Tensor | None = None  # [N] int64


def load(name: str, feature_dim: int = 128, seed: int = 0) -> LoadedGraph:
    """One of GRAPHS. Real graphs need shared/datasets; "rmat-small" is generated (2^14 nodes).

    Raises:
        ValueError: on an unknown name. FileNotFoundError: when the data folder is absent.
    """
    if name not in GRAPHS:
        raise ValueError(f"unknown graph {name!r}; choose one of {', '.join(GRAPHS)}")
    if name == "rmat-small":
        return LoadedGraph(name, _undirected(rmat(14, 2**18, seed=seed)))
    root = shared_datasets_dir()
    if root is None:
        raise FileNotFoundError(f"graph {name!r} needs shared/datasets (set GNNFORGE_DATASETS); "
                                "'rmat-small' works without it")
    if name == "rmat":
        data = np.load(root / "synthetic" / "rmat_s17_e21.npz")
        return LoadedGraph(name, _from_arrays(data["src"], data["dst"], int(data["num_nodes"])))
    if name == "github":
        edges = _csv_pairs(root / "musae_github" / "git_edges.csv.gz")
        labels = _csv_column(root / "musae_github" / "git_target.csv.gz", 2).astype(np.int64)
        return LoadedGraph(name, _from_arrays(edges[:, 0], edges[:, 1], labels.size),
                           labels=torch.from_numpy(labels))
    if name == "slashdot":
        edges = np.loadtxt(root / "snap_soc_slashdot0902" / "soc-Slashdot0902.txt.gz",
                           comments="#", dtype=np.int64)
        return LoadedGraph(name, _from_arrays(edges[:, 0], edges[:, 1], int(edges.max()) + 1))
    return _facebook(root / "musae_facebook", feature_dim, seed)


def _facebook(folder: Path, feature_dim: int, seed: int) -> LoadedGraph:
    edges = _csv_pairs(folder / "facebook_edges.csv.gz")
    kinds = _csv_column(folder / "facebook_target.csv.gz", 3)
    classes = {kind: i for i, kind in enumerate(sorted(set(kinds.tolist())))}
    labels = torch.tensor([classes[k] for k in kinds.tolist()], dtype=torch.int64)
    with gzip.open(folder / "facebook.json.gz", "rt") as handle:
        active = json.load(handle)
    # The 4,714 binary features, randomly projected to feature_dim dense columns.
    rows = np.concatenate([np.full(len(v), int(k)) for k, v in active.items()])
    cols = np.concatenate([np.asarray(v, dtype=np.int64) for v in active.values()])
    projection = np.random.default_rng(seed).standard_normal((int(cols.max()) + 1, feature_dim))
    features = np.zeros((labels.numel(), feature_dim))
    np.add.at(features, rows, projection[cols])
    features /= np.sqrt(np.maximum(np.bincount(rows, minlength=labels.numel()), 1))[:, None]
    graph = _from_arrays(edges[:, 0], edges[:, 1], labels.numel())
    return LoadedGraph("facebook", graph, torch.from_numpy(features.astype(np.float32)), labels)


def _csv_pairs(path: Path) -> np.ndarray:
    return np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.int64)


def _csv_column(path: Path, column: int) -> np.ndarray:
    with gzip.open(path, "rt", encoding="utf-8", newline="") as handle:
        rows = csv.reader(handle)  # page names contain quoted commas
        next(rows)
        return np.asarray([row[column] for row in rows])


def _from_arrays(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> Graph:
    return _undirected(Graph(torch.from_numpy(src.astype(np.int64)),
                             torch.from_numpy(dst.astype(np.int64)), num_nodes))


def _undirected(graph: Graph) -> Graph:
    return graph.remove_self_loops().to_undirected(dedup=True)
