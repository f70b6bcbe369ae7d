"""Real datasets, parsers, statistics and seeded generators.

Start with `list_datasets()` and `load_dataset(name)`; the `read_*` functions parse one
file format each (see docs/data.md).
"""

from gnnforge.data._clean import CleanOptions, clean_graph
from gnnforge.data._edgelist import read_edge_list
from gnnforge.data._errors import DataFormatError
from gnnforge.data._generators import (
    grid_2d,
    random_molecule_like,
    rmat,
    stochastic_block_model,
    uniform_random,
)
from gnnforge.data._ligra import read_ligra
from gnnforge.data._mapped_products import (MappedProducts, generated_meta,
                                            load_synthetic_products)
from gnnforge.data._mtx import read_matrix_market, read_matrix_market_array
from gnnforge.data._musae import read_graph_json, read_musae
from gnnforge.data._npz import read_graph_npz
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
from gnnforge.data._planetoid import read_planetoid
from gnnforge.data._programs import (
    PROGRAM_EDGE_TYPES,
    ProgramGraphs,
    program_graph_sizes,
    program_graphs,
)
from gnnforge.data._registry import (
    Dataset,
    discover_datasets,
    find_dataset,
    list_datasets,
    load_dataset,
)
from gnnforge.data._roads import read_mat_graph, read_mtx_with_coordinates
from gnnforge.data._safe_pickle import UnsafePickleError, safe_load, safe_loads
from gnnforge.data._sources import DISCOVERY_RULES, DatasetSource, builtin_sources
from gnnforge.data._stats import collection_stats, graph_stats
from gnnforge.data._store import (
    CacheWarning,
    cache_key,
    cached_graphs,
    cached_meta,
    load_graphs,
    load_meta,
    save_graphs,
)
from gnnforge.data._synthetic_products import (PRODUCTS_NODES, ProductsSpec,
                                               generate_products, split_sizes)
from gnnforge.data._tu import read_tu_zip

__all__ = [
    "ATOM_FEATURE_DIMS",
    "BOND_FEATURE_DIMS",
    "CacheWarning",
    "CleanOptions",
    "DISCOVERY_RULES",
    "DataFormatError",
    "Dataset",
    "DatasetSource",
    "MappedProducts",
    "PRODUCTS_NODES",
    "ProductsSpec",
    "PROGRAM_EDGE_TYPES",
    "ProgramGraphs",
    "UnsafePickleError",
    "builtin_sources",
    "cache_dir",
    "cache_key",
    "cached_graphs",
    "cached_meta",
    "clean_graph",
    "collection_stats",
    "discover_datasets",
    "generate_products",
    "generated_meta",
    "find_dataset",
    "graph_stats",
    "grid_2d",
    "list_datasets",
    "load_dataset",
    "load_graphs",
    "load_meta",
    "load_synthetic_products",
    "load_molecules",
    "molecule_files",
    "molecule_sizes",
    "program_graph_sizes",
    "program_graphs",
    "random_molecule_like",
    "read_edge_list",
    "read_graph_json",
    "read_graph_npz",
    "read_ligra",
    "read_mat_graph",
    "read_matrix_market",
    "read_matrix_market_array",
    "read_mtx_with_coordinates",
    "read_musae",
    "read_planetoid",
    "read_smiles",
    "read_tu_zip",
    "rmat",
    "safe_load",
    "safe_loads",
    "save_graphs",
    "shared_datasets_dir",
    "smiles_to_graph",
    "split_sizes",
    "stochastic_block_model",
    "uniform_random",
]
