"""The graphs the sampling measurements use, loaded through `gnnforge.data`.

Every graph is returned undirected (both directions, deduplicated, no self-loops), as
the sampling benchmarks and the paper's curves use them; the cleaning counts are in the
dataset's metadata.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from gnnforge.data import CleanOptions, clean_graph, load_dataset, rmat
from gnnforge.graph import Graph

# name here -> name in the gnnforge.data registry (None: generated, needs no files)
_REGISTRY_NAMES = {"github": "musae-git", "facebook": "musae-facebook",
                   "slashdot": "soc-slashdot0902", "rmat": "rmat_s17_e21", "rmat-small": None,
                   "cora": "cora", "citeseer": "citeseer", "pubmed": "pubmed",
                   "amazon-cs": "amazon_cs", "amazon-photo": "amazon_photo",
                   "coauthor-cs": "coauthor_cs", "coauthor-phy": "coauthor_phy",
                   "enron": "email-enron", "epinions": "soc-epinions1", "hepth": "cit-hepth",
                   "luxembourg": "luxembourg_osm", "usroads": "usroads-48"}
GRAPHS = tuple(_REGISTRY_NAMES)
# every single real graph of shared/datasets (the gnn-benchmark npz copies of Cora and
# CiteSeer are the Planetoid graphs again, so they are left out)
REAL_GRAPHS = tuple(n for n, r in _REGISTRY_NAMES.items() if r is not None and n != "rmat")
_UNDIRECTED = dict(symmetrize=True, dedup=True, self_loops="remove")


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
    if _REGISTRY_NAMES[name] is None:
        graph, _ = clean_graph(rmat(14, 2**18, seed=seed), CleanOptions(**_UNDIRECTED))
        return LoadedGraph(name, graph)
    try:
        dataset = load_dataset(_REGISTRY_NAMES[name], **_UNDIRECTED)
    except KeyError as error:
        raise FileNotFoundError(f"graph {name!r} needs shared/datasets (set GNNFORGE_DATASETS); "
                                "'rmat-small' works without it") from error
    graph = dataset.graph
    labels = graph.node_data.get("y")
    features = None
    if "feature_ids" in graph.node_data:
        features = _project(graph.node_data["feature_ids"], feature_dim, seed)
    structure = Graph._trusted(graph.src, graph.dst, graph.num_nodes)
    return LoadedGraph(name, structure, features, labels)


def _project(feature_ids: Tensor, feature_dim: int, seed: int) -> Tensor:
    """Sparse binary features (ids padded with -1) randomly projected to dense columns."""
    ids = feature_ids.numpy()
    rows, slots = np.nonzero(ids >= 0)
    cols = ids[rows, slots]
    projection = np.random.default_rng(seed).standard_normal((int(cols.max()) + 1, feature_dim))
    features = np.zeros((ids.shape[0], feature_dim))
    np.add.at(features, rows, projection[cols])
    features /= np.sqrt(np.maximum(np.bincount(rows, minlength=ids.shape[0]), 1))[:, None]
    return torch.from_numpy(features.astype(np.float32))
