"""The default graph-property dataset: RDKit's NCI molecules with their shipped TPSA values.

RDKit ships `Data/NCI/first_5K.smi` (4,999 NCI structures, no labels) together with
`Data/NCI/first_5k.tpsa.csv`: the same molecules with their topological polar surface
area (TPSA, in square angstroms) computed by Daylight's tools and Ertl's `tpsa.c`, kept by
RDKit as test reference data. TPSA is a real, externally computed molecular property (a
sum of polar-fragment contributions, used to predict drug absorption), so regressing it
from the molecular graph is a meaningful task that needs no download. It is not a
wet-lab measurement; docs and the run summary say so.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch

from gnnforge.data._molecules import rdkit_nci_file
from gnnforge.graph import Graph

__all__ = ["TPSA_DESCRIPTION", "load_nci_tpsa", "nci_tpsa_file"]

TPSA_DESCRIPTION = ("TPSA regression (A^2, Daylight/Ertl values shipped by RDKit: "
                    "Data/NCI/first_5k.tpsa.csv)")


def nci_tpsa_file() -> Path:
    """RDKit's TPSA labels for its NCI molecules (Data/NCI/first_5k.tpsa.csv)."""
    return rdkit_nci_file("first_5k.tpsa.csv")


def _parse(path: Path) -> list[tuple[int, str, float]]:
    rows = []
    for line_number, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        smiles, _, value = line.rpartition(",")
        try:
            rows.append((line_number, smiles, float(value)))
        except ValueError as error:
            raise ValueError(f"{path.name} line {line_number}: TPSA {value!r} is not a number") \
                from error
    return rows


def load_nci_tpsa(limit: int = 0, use_cache: bool = True) -> tuple[list[Graph], dict[str, Any]]:
    """The NCI molecules as OGB-featured graphs with graph data `y` [1] float32 = TPSA.

    SMILES that RDKit cannot sanitize are counted in meta['num_invalid'] (and listed in
    meta['invalid']) and left out with a warning.

    Args:
        limit: keep only the first `limit` valid molecules (0: all); for quick runs.
    """
    from gnnforge.data import cached_graphs, smiles_to_graph

    path = nci_tpsa_file()

    def build() -> tuple[list[Graph], dict[str, Any]]:
        graphs, invalid = [], []
        for line_number, smiles, value in _parse(path):
            try:
                graph = smiles_to_graph(smiles)
            except ValueError:
                invalid.append((line_number, smiles))
                continue
            graphs.append(graph.with_graph_data(y=torch.tensor([value], dtype=torch.float32)))
        return graphs, {"num_invalid": len(invalid), "invalid": invalid[:20]}

    graphs, meta = cached_graphs("nci-tpsa", [path], {"kind": "nci-tpsa-v1"}, build,
                                 use_cache=use_cache)
    if meta["num_invalid"]:
        warnings.warn(f"nci-tpsa: {meta['num_invalid']} of {len(graphs) + meta['num_invalid']} "
                      "SMILES could not be sanitized by RDKit and were left out "
                      f"(first: line {meta['invalid'][0][0]} {meta['invalid'][0][1]!r})",
                      stacklevel=2)
    if limit:
        graphs = graphs[:limit]
    meta["target"] = TPSA_DESCRIPTION
    return graphs, meta
