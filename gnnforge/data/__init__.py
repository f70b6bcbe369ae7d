"""Real datasets, parsers and seeded generators."""

from gnnforge.data._generators import (
    grid_2d,
    random_molecule_like,
    rmat,
    stochastic_block_model,
    uniform_random,
)
from gnnforge.data._molecules import (
    ATOM_FEATURE_DIMS,
    BOND_FEATURE_DIMS,
    load_molecules,
    molecule_files,
    molecule_sizes,
    read_smiles,
    smiles_to_graph,
)
from gnnforge.data._paths import cache_dir, shared_datasets_dir
from gnnforge.data._programs import (
    PROGRAM_EDGE_TYPES,
    ProgramGraphs,
    program_graph_sizes,
    program_graphs,
)
from gnnforge.data._store import cache_key, cached_graphs, load_graphs, save_graphs

__all__ = [
    "ATOM_FEATURE_DIMS",
    "BOND_FEATURE_DIMS",
    "PROGRAM_EDGE_TYPES",
    "ProgramGraphs",
    "cache_dir",
    "cache_key",
    "cached_graphs",
    "grid_2d",
    "load_graphs",
    "load_molecules",
    "molecule_files",
    "molecule_sizes",
    "program_graph_sizes",
    "program_graphs",
    "random_molecule_like",
    "read_smiles",
    "rmat",
    "save_graphs",
    "shared_datasets_dir",
    "smiles_to_graph",
    "stochastic_block_model",
    "uniform_random",
]
