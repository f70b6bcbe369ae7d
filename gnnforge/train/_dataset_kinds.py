"""Which training task fits a dataset, by the names `gnnforge datasets` prints.

`gnnforge train --dataset NAME` accepts every listed name: node-labelled graphs
(Planetoid, the gnn-benchmark and GraphGallery npz sets, MUSAE) train node
classification, collections of labelled graphs (TU sets, reddit10k, the MoleculeNet
CSVs, RDKit's NCI molecules with their TPSA values) graph property prediction, and
unlabelled single graphs (SNAP, road networks, generators) link prediction. The kind is
read from the source's format, so nothing is loaded to decide it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["DatasetKind", "dataset_kind"]

# Names that are not registry sources: the TPSA-labelled NCI set and the labelled SBM.
_SPECIAL = {"nci-tpsa": ("graph", "a molecule set (RDKit's NCI molecules, TPSA labels)"),
            "nci-molecules": ("graph", "a molecule set (RDKit's NCI molecules, TPSA labels)"),
            "sbm": ("node", "a stochastic block model whose communities are the labels")}
_LABELLED_NPZ = ("gnn-benchmark npz", "GraphGallery npz")


@dataclass(frozen=True)
class DatasetKind:
    """The task a dataset trains (`graph`, `node`, `link` or `varmisuse`), what it is in
    words (for error messages), and its registry name (None for a file path)."""

    task: str
    what: str
    name: str | None


def dataset_kind(name: str) -> DatasetKind:
    """The training task `name` fits.

    Raises:
        KeyError: an unknown name (the message lists close and known names).
        ValueError: a dataset with nothing to train on (no labels and not one graph).
    """
    low = name.lower()
    if low in _SPECIAL:
        return DatasetKind(*_SPECIAL[low], low)
    path = Path(name)
    if path.suffix.lower() in (".csv", ".smi", ".gz", ".txt") and path.is_file():
        return DatasetKind("graph", "a molecule file", None)
    from gnnforge.data import find_dataset
    from gnnforge.data._sources import PRODUCTS_FORMAT

    source = find_dataset(name)
    if source.fmt == "smiles":
        return DatasetKind("graph", "a molecule set", source.name)
    if source.fmt == "python":
        return DatasetKind("varmisuse", "a set of program graphs", source.name)
    if source.fmt in ("tu", "graph-json"):
        return DatasetKind("graph", "a collection of labelled graphs", source.name)
    if source.collection:
        raise ValueError(f"dataset {source.name!r} is a collection of graphs without labels; "
                         "there is nothing to train on")
    if source.fmt in ("planetoid", "musae", PRODUCTS_FORMAT) \
            or source.description in _LABELLED_NPZ:
        return DatasetKind("node", "a node-labelled graph", source.name)
    return DatasetKind("link", "an unlabelled graph", source.name)
