"""The table of dataset sources: built-in generators and rules that discover files.

Adding a source is one entry: a `DatasetSource` in `builtin_sources()` for data that
needs no files (generators, the RDKit-shipped molecules, the standard-library program
graphs), or a function in `DISCOVERY_RULES` that looks at one file and returns a
`DatasetSource` for it (or None). Rules are tried in order; the first match claims the
file and its companion files (`DatasetSource.files`).
"""

from __future__ import annotations

import gzip
import re
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gnnforge.data import _generators
from gnnforge.data._clean import CleanOptions, clean_graph
from gnnforge.data._edgelist import read_edge_list
from gnnforge.data._ligra import LIGRA_WORDS, read_ligra
from gnnforge.data._musae import read_graph_json, read_musae
from gnnforge.data._npz import read_graph_npz
from gnnforge.data._planetoid import PLANETOID_PARTS, read_planetoid
from gnnforge.data._roads import read_mat_graph, read_mtx_with_coordinates
from gnnforge.data._tu import read_tu_zip, tu_name
from gnnforge.graph import Graph

__all__ = ["DISCOVERY_RULES", "PRODUCTS_FORMAT", "DatasetSource", "builtin_sources"]

# The format tag of synthetic-products: the one source kept as a memory-mapped CSR.
PRODUCTS_FORMAT = "mapped-csr"

Build = Callable[..., tuple[list[Graph], dict[str, Any]]]


@dataclass(frozen=True)
class DatasetSource:
    """One loadable dataset.

    Attributes:
        name: lookup name (matched case-insensitively).
        description: one line for listings.
        build: `build(clean: CleanOptions, **options) -> (graphs, meta)`.
        files: the files it reads (their identity keys the cache); empty for built-ins.
        options: the extra options `build` accepts, with their defaults.
        builtin: True when it needs no data files.
        fmt: format tag shown in listings and used to disambiguate names.
        collection: True for a set of graphs (graph classification, molecules): its
            statistics then include the per-graph size distribution.
    """

    name: str
    description: str
    build: Build
    files: tuple[Path, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    builtin: bool = False
    fmt: str = ""
    collection: bool = False


def _single(reader: Callable[..., tuple[Graph, dict[str, Any]]]) -> Build:
    def build(clean: CleanOptions, **options):
        graph, meta = reader(clean=clean, **options)
        return [graph], meta

    return build


def _generator(make: Callable[..., Graph | list[Graph]], what: str) -> Build:
    def build(clean: CleanOptions, **options):
        made = make(**options)
        graphs = made if isinstance(made, list) else [made]
        return _clean_all(graphs, clean, {"format": f"generator ({what})", "files": []})

    return build


def _molecules(source: str) -> Build:
    def build(clean: CleanOptions, **options):
        from gnnforge.data._molecules import load_molecules

        graphs, meta = load_molecules(source, **options)
        return _clean_all(graphs, clean, {**meta, "format": "smiles (RDKit, OGB features)"})

    return build


def _programs(clean: CleanOptions, **options):
    from gnnforge.data._programs import program_graphs

    corpus = program_graphs(**options)
    meta = {"format": "python source (AST + data flow)", "files": len(corpus.files),
            "parse_failures": len(corpus.failures), "vocabulary": len(corpus.vocab),
            "edge_types": list(corpus.edge_types)}
    return _clean_all(corpus.graphs, clean, meta)


def _synthetic_products(clean: CleanOptions, num_nodes: int, seed: int, progress=None):
    """The memory-mapped graph as an in-memory `Graph` (int64 COO plus node data), for
    the registry's generic tools; refused past `PRODUCTS_GRAPH_MAX_EDGES` edges, where
    that copy would cost gigabytes: `load_synthetic_products` (and `gnnforge train --task
    node --mode sampled`) keep the mapped CSR instead."""
    import torch

    from gnnforge.data._mapped_products import load_synthetic_products

    data = load_synthetic_products(num_nodes, seed, progress=progress, prefetch=False)
    if data.num_edges > PRODUCTS_GRAPH_MAX_EDGES:
        raise ValueError(
            f"synthetic-products with {num_nodes:,} nodes has {data.num_edges:,} edges: an "
            f"in-memory Graph would hold {16 * data.num_edges / 2**30:.1f} GiB of int64 "
            "COO; use gnnforge.data.load_synthetic_products (memory-mapped CSR) or "
            "`gnnforge train --task node --mode sampled --dataset synthetic-products`, or "
            f"num_nodes <= {PRODUCTS_GRAPH_MAX_EDGES // 64:,}")
    rowptr = torch.from_numpy(data.rowptr.astype("int64"))
    dst = torch.repeat_interleave(torch.arange(data.num_nodes), rowptr.diff())
    src = torch.from_numpy(data.col.astype("int64"))
    masks = {}
    for split in ("train", "val", "test"):
        mask = torch.zeros(data.num_nodes, dtype=torch.bool)
        mask[getattr(data, split)] = True
        masks[f"{split}_mask"] = mask
    graph = Graph(src, dst, data.num_nodes,
                  node_data={"x": data.x.clone(), "y": data.y, **masks})
    meta = {key: data.meta[key] for key in ("version", "spec", "split", "self_loops_removed",
                                            "duplicates_removed")}
    return _clean_all([graph], clean, {"format": "generator (synthetic-products, "
                                                 "memory-mapped CSR)", "files": [], **meta})


# Past this many edges the registry's in-memory Graph of synthetic-products is refused.
PRODUCTS_GRAPH_MAX_EDGES = 1 << 24


def _clean_all(graphs: list[Graph], clean: CleanOptions, meta: dict[str, Any]):
    cleaned, totals = [], {}
    for graph in graphs:
        graph, drops = clean_graph(graph, clean)
        cleaned.append(graph)
        totals = {k: totals.get(k, 0) + v for k, v in drops.items()}
    return cleaned, {**meta, "drops": totals}


def builtin_sources() -> list[DatasetSource]:
    """Seeded synthetic datasets; each option can be overridden in `load_dataset`."""
    return [
        DatasetSource(
            "rmat",
            "R-MAT power-law graph (Chakrabarti et al.), hubs at low ids",
            _generator(_generators.rmat, "rmat"),
            options={"scale": 14, "num_edges": 262_144, "seed": 0},
            builtin=True,
            fmt="generator",
        ),
        DatasetSource(
            "grid",
            "2D 4-neighbour grid, road-like and low bandwidth",
            _generator(_generators.grid_2d, "grid_2d"),
            options={"rows": 256, "cols": 256, "shuffle": False, "seed": 0},
            builtin=True,
            fmt="generator",
        ),
        DatasetSource(
            "sbm",
            "stochastic block model, 8 communities",
            _generator(_generators.stochastic_block_model, "stochastic_block_model"),
            options={"block_sizes": [1000] * 8, "p_in": 0.01, "p_out": 0.0005, "seed": 0},
            builtin=True,
            fmt="generator",
        ),
        DatasetSource(
            "uniform",
            "uniform random directed multigraph (Erdos-Renyi-like)",
            _generator(_generators.uniform_random, "uniform_random"),
            options={"num_nodes": 16_384, "num_edges": 131_072, "seed": 0},
            builtin=True,
            fmt="generator",
        ),
        DatasetSource(
            "molecule-like",
            "small molecule-like graphs (tree + ring bonds)",
            _generator(_generators.random_molecule_like, "random_molecule_like"),
            options={"num_graphs": 2000, "mean_atoms": 23.0, "seed": 0},
            builtin=True,
            fmt="generator",
            collection=True,
        ),
        DatasetSource(
            "synthetic-products",
            "ogbn-products-shaped graph: 2.45M nodes, ~124M edges, 100-dim features, "
            "47 classes (memory-mapped CSR; docs/data.md)",
            _synthetic_products,
            options={"num_nodes": 2_449_029, "seed": 0, "progress": None},
            builtin=True,
            fmt=PRODUCTS_FORMAT,
        ),
        DatasetSource(
            "nci-molecules",
            "the 5,000 NCI molecules RDKit ships (invalid SMILES counted)",
            _molecules("nci"),
            builtin=True,
            fmt="smiles",
            collection=True,
        ),
        DatasetSource(
            "python-programs",
            "function graphs of this interpreter's standard library (first 200 files)",
            _programs,
            options={"max_files": 200},
            builtin=True,
            fmt="python",
            collection=True,
        ),
    ]


# ----------------------------------------------------------------------------- sniffing


def _head(path: Path, size: int = 4096) -> bytes:
    try:
        with open(path, "rb") as handle:
            start = handle.read(2)
        opener = gzip.open if start == b"\x1f\x8b" else open
        with opener(path, "rb") as handle:
            return handle.read(size)
    except (OSError, EOFError):
        return b""


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".txt", ".mtx", ".csv", ".json", ".npz", ".mat", ".zip", ".edges", ".el"):
        name = name.removesuffix(suffix)
    return name.lower()


def _sibling(path: Path, *names: str) -> Path | None:
    for name in names:
        if (path.parent / name).exists():
            return path.parent / name
    return None


def _looks_like_edge_list(head: bytes) -> bool:
    for line in head.split(b"\n")[:-1] or head.split(b"\n"):
        stripped = line.strip()
        if not stripped or stripped[:1] in (b"#", b"%"):
            continue
        tokens = stripped.replace(b",", b" ").split()
        if not all(t.lstrip(b"+-").replace(b".", b"", 1).isdigit() for t in tokens):
            if b"," in stripped and b"id" in stripped.lower():
                continue  # a CSV header such as id_1,id_2
            return False
        return len(tokens) in (2, 3)
    return False


# ----------------------------------------------------------------------------- rules


def _planetoid_rule(path: Path) -> DatasetSource | None:
    if not (path.name.startswith("ind.") and path.name.endswith(".graph")):
        return None
    name = path.name[len("ind.") : -len(".graph")]
    files = tuple(
        path.parent / f"ind.{name}.{part}"
        for part in PLANETOID_PARTS
        if (path.parent / f"ind.{name}.{part}").exists()
    )

    def build(clean, features="dense"):
        graph, meta = read_planetoid(path.parent, name, clean=clean, features=features)
        return [graph], meta

    return DatasetSource(
        name,
        f"Planetoid citation graph '{name}'",
        build,
        files,
        {"features": "dense"},
        fmt="planetoid",
    )


def _tu_rule(path: Path) -> DatasetSource | None:
    if path.suffix != ".zip":
        return None
    name = tu_name(path)
    if name is None:
        return None

    def build(clean, progress=None):
        return read_tu_zip(path, clean=clean, progress=progress)

    return DatasetSource(
        name.lower(),
        f"TU Dortmund graph classification '{name}'",
        build,
        (path,),
        {"progress": None},
        fmt="tu",
        collection=True,
    )


def _npz_rule(path: Path) -> DatasetSource | None:
    if path.suffix != ".npz":
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            members = {name.removesuffix(".npy") for name in archive.namelist()}
    except (zipfile.BadZipFile, OSError):
        return None
    if {"adj_data", "adj_indptr"} <= members:
        kind = "gnn-benchmark npz"
    elif {"adj_matrix", "node_label"} <= members:
        kind = "GraphGallery npz"
    elif {"src", "dst", "num_nodes"} <= members:
        kind = "edge-array npz"
    else:
        return None
    options = {} if kind == "edge-array npz" else {"features": "dense"}
    build = _single(lambda clean, **o: read_graph_npz(path, clean=clean, **o))
    return DatasetSource(_stem(path), kind, build, (path,), options, fmt="npz")


def _mat_rule(path: Path) -> DatasetSource | None:
    if path.suffix != ".mat":
        return None
    build = _single(lambda clean: read_mat_graph(path, clean=clean))
    return DatasetSource(_stem(path), "SuiteSparse MATLAB graph", build, (path,), fmt="mat")


def _mtx_or_ligra_rule(path: Path) -> DatasetSource | None:
    name = path.name.removesuffix(".gz")
    if not name.endswith((".mtx", ".txt", ".edges", ".el", ".adj")) or "_coord." in name:
        return None
    head = _head(path)
    if head.lstrip().startswith(LIGRA_WORDS):
        build = _single(lambda clean: read_ligra(path, clean=clean))
        return DatasetSource(_stem(path), "Ligra adjacency graph", build, (path,), fmt="ligra")
    if head.startswith(b"%%MatrixMarket matrix coordinate"):
        coord = _sibling(
            path,
            name.removesuffix(".mtx") + "_coord.mtx",
            name.removesuffix(".mtx") + "_coord.mtx.gz",
        )
        build = _single(lambda clean: read_mtx_with_coordinates(path, coord, clean=clean))
        files = (path,) + ((coord,) if coord else ())
        text = "MatrixMarket graph" + (" + coordinates" if coord else "")
        return DatasetSource(_stem(path), text, build, files, fmt="mtx")
    if _looks_like_edge_list(head):
        build = _single(
            lambda clean, relabel=False: read_edge_list(path, clean=clean, relabel=relabel)
        )
        return DatasetSource(
            _stem(path), "edge list", build, (path,), {"relabel": False}, fmt="edges"
        )
    return None


def _musae_rule(path: Path) -> DatasetSource | None:
    name = path.name.removesuffix(".gz")
    if not name.endswith("_edges.csv"):
        return None
    prefix = name[: -len("_edges.csv")]
    target = _sibling(path, f"{prefix}_target.csv", f"{prefix}_target.csv.gz")
    features_path = _sibling(path, f"{prefix}.json", f"{prefix}.json.gz")

    def build(clean, features="ids"):
        graph, meta = read_musae(path, target, features_path, clean=clean, features=features)
        return [graph], meta

    files = tuple(p for p in (path, target, features_path) if p is not None)
    options = {"features": "ids"} if features_path else {}
    return DatasetSource(
        f"musae-{prefix.lower()}", "MUSAE social graph", build, files, options, fmt="musae"
    )


def _graph_json_rule(path: Path) -> DatasetSource | None:
    if path.name.removesuffix(".gz") != "graphs.json":
        return None
    target = _sibling(path, "target.csv", "target.csv.gz")

    def build(clean, progress=None):
        return read_graph_json(path, target, clean=clean, progress=progress)

    files = (path,) + ((target,) if target else ())
    return DatasetSource(
        path.parent.name.lower(),
        "graph collection (karateclub JSON)",
        build,
        files,
        {"progress": None},
        fmt="graph-json",
        collection=True,
    )


_SMILES_LINE = re.compile(rb"^[A-Za-z0-9@+\-\[\]()=#%/\\.*:$]+$")
_SMILES_COLUMNS = ("smiles", "mol")
_GENERIC_STEMS = ("test", "valid", "train", "data")


def _is_smiles_file(path: Path) -> bool:
    """A CSV with a SMILES column, or lines of single SMILES tokens (.smi/.txt)."""
    lines = _head(path, 65536).splitlines()
    if not lines:
        return False
    header = [cell.strip().strip('"').lower() for cell in lines[0].decode("utf-8", "replace")
              .split(",")]
    if any(cell in _SMILES_COLUMNS for cell in header):
        return True
    rows = [line.strip() for line in lines[:20] if line.strip()]
    return all(_SMILES_LINE.match(row) and re.search(rb"[A-Za-z]", row) for row in rows)


def _molecule_rule(path: Path) -> DatasetSource | None:
    name = path.name.lower().removesuffix(".gz")
    if not name.endswith((".csv", ".smi", ".txt")) or not _is_smiles_file(path):
        return None
    stem = name.rsplit(".", 1)[0]
    if stem in _GENERIC_STEMS:
        stem = f"{path.parent.name.split('_')[0].lower()}-{stem}"
    return DatasetSource(
        stem,
        "SMILES molecules (RDKit, OGB atom/bond features; label columns as targets)",
        _molecules(str(path)),
        (path,),
        {"progress": True},
        fmt="smiles",
        collection=True,
    )


#: Tried in order on every file under a root; the first match claims it.
DISCOVERY_RULES: list[Callable[[Path], DatasetSource | None]] = [
    _planetoid_rule,
    _tu_rule,
    _npz_rule,
    _mat_rule,
    _musae_rule,
    _graph_json_rule,
    _molecule_rule,
    _mtx_or_ligra_rule,
]
