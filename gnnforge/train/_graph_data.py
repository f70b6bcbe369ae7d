"""Graph-property datasets by registry name: molecules, TU sets, reddit10k.

Molecules (RDKit's NCI set with TPSA, the MoleculeNet CSVs, any SMILES CSV path) carry
OGB's integer atom and bond features. Graphs without them (TU sets, reddit10k) get two
integer node columns the same GIN embeds: the dataset's node label (0 when it has none)
and the in-degree capped at 63; every edge gets one constant bond column.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnforge.graph import Graph

__all__ = ["GraphData", "load_graph_data", "structural_graphs"]

MAX_DEGREE = 63


@dataclass
class GraphData:
    """Graphs with node_data x [N, C] int64, edge_data edge_attr [E, D] int64 and graph
    data y, the vocabulary of each column, and the target in words."""

    graphs: list[Graph]
    target: str
    atom_vocabulary: tuple[int, ...]
    bond_vocabulary: tuple[int, ...]


def structural_graphs(graphs: list[Graph]) -> tuple[list[Graph], tuple[int, int]]:
    """Each graph with x = [node label or 0, min(in-degree, 63)] and a zero bond column;
    returns the graphs and the two columns' vocabulary sizes."""
    labels = [g.node_data.get("node_label") for g in graphs]
    num_labels = max((int(v.max()) + 1 for v in labels if v is not None and v.numel()),
                     default=1)
    out = []
    for graph, label in zip(graphs, labels):
        degree = torch.bincount(graph.dst, minlength=graph.num_nodes).clamp(max=MAX_DEGREE)
        label = torch.zeros(graph.num_nodes, dtype=torch.int64) if label is None \
            else label.long().clamp(min=0)
        x = torch.stack([label, degree], dim=1)
        edge_attr = torch.zeros(graph.num_edges, 1, dtype=torch.int64)
        y = graph.graph_data["y"]
        structure = Graph._trusted(graph.src, graph.dst, graph.num_nodes)
        out.append(structure.with_node_data(x=x).with_edge_data(edge_attr=edge_attr)
                   .with_graph_data(y=y))
    return out, (num_labels, MAX_DEGREE + 1)


def _molecules(source, name: str, limit: int, progress: bool) -> GraphData:
    from gnnforge.data import ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS, load_molecules

    graphs, meta = load_molecules(source, progress=progress)
    if not meta["label_names"]:
        raise ValueError(f"--dataset {name!r} has no label columns; graph property prediction "
                         "needs targets (the default 'nci-tpsa' has them)")
    graphs = graphs[:limit] if limit else graphs
    return GraphData(graphs, f"{', '.join(meta['label_names'])} from {meta['source']}",
                     tuple(ATOM_FEATURE_DIMS), tuple(BOND_FEATURE_DIMS))


def load_graph_data(name: str, limit: int = 0, progress: bool = True) -> GraphData:
    """The graph-property dataset `name` (a registry name, 'nci-tpsa' or a SMILES CSV)."""
    from gnnforge.data import ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS, find_dataset, load_dataset
    from gnnforge.train._dataset_kinds import dataset_kind

    kind = dataset_kind(name)
    if kind.task != "graph":
        raise ValueError(f"--dataset {name!r} is {kind.what}, not a set of labelled graphs")
    if kind.name in ("nci-tpsa", "nci-molecules"):
        from gnnforge.train._nci_tpsa import load_nci_tpsa

        graphs, meta = load_nci_tpsa(limit=limit)
        return GraphData(graphs, meta["target"], tuple(ATOM_FEATURE_DIMS),
                         tuple(BOND_FEATURE_DIMS))
    if kind.name is None:
        return _molecules(name, name, limit, progress)
    source = find_dataset(kind.name)
    if source.fmt == "smiles":
        return _molecules(source.files[0], source.name, limit, progress)
    dataset = load_dataset(source.name, progress=progress)
    graphs = dataset.graphs[:limit] if limit else dataset.graphs
    graphs, atoms = structural_graphs(graphs)
    classes = dataset.meta.get("num_classes")
    return GraphData(graphs, f"graph class ({classes} classes) of {source.name}", atoms, (1,))
