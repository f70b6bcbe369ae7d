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

from gnnforge.data import load_dataset
from gnnforge.graph import Graph

# Short names used before the graphs took the dataset registry's names (`gnnforge datasets`);
# still accepted. ("rmat" is the registry's generated 2^14 R-MAT, the former "rmat-small".)
ALIASES = {"github": "musae-git", "facebook": "musae-facebook", "slashdot": "soc-slashdot0902",
           "rmat-small": "rmat", "amazon-cs": "amazon_cs", "amazon-photo": "amazon_photo",
           "coauthor-cs": "coauthor_cs", "coauthor-phy": "coauthor_phy", "enron": "email-enron",
           "epinions": "soc-epinions1", "hepth": "cit-hepth", "luxembourg": "luxembourg_osm",
           "usroads": "usroads-48"}
# every single real graph of shared/datasets (the gnn-benchmark npz copies of Cora and
# CiteSeer are the Planetoid graphs again, so they are left out)
REAL_GRAPHS = ("musae-git", "musae-facebook", "soc-slashdot0902", "cora", "citeseer", "pubmed",
               "amazon_cs", "amazon_photo", "coauthor_cs", "coauthor_phy", "email-enron",
               "soc-epinions1", "cit-hepth", "luxembourg_osm", "usroads-48")
GRAPHS = ("rmat", "rmat_s17_e21", *REAL_GRAPHS)
_UNDIRECTED = dict(symmetrize=True, dedup=True, self_loops="remove")


def resolve_name(name: str) -> str:
    """The registry name of a single graph called `name` (a registry name or an alias).

    Raises:
        KeyError: an unknown name (with the closest known ones) or a collection of graphs.
    """
    from gnnforge.data import find_dataset

    source = find_dataset(ALIASES.get(name.lower(), name))
    if source.collection:
        raise KeyError(f"{source.name!r} is a collection of small graphs; sampling needs one "
                       "graph (e.g. rmat, cora, musae-git)")
    return source.name


@dataclass(frozen=True)
class LoadedGraph:
    name: str
    graph: Graph
    features: Tensor | None = None  # [N, F] float32
    labels: Tensor | None = None  # [N] int64


def load(name: str, feature_dim: int = 128, seed: int = 0) -> LoadedGraph:
    """A single graph by registry name (or alias), undirected; generated ones need no files.

    Raises:
        KeyError: an unknown name (the message lists the known ones).
    """
    name = resolve_name(name)
    options = {"seed": seed} if name == "rmat" else {}
    graph = load_dataset(name, **options, **_UNDIRECTED).graph
    if name == "rmat":
        return LoadedGraph(name, graph)
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
