"""Molecules from SMILES: OGB-style molecular graphs and a fast sizes-only path.

`smiles_to_graph` follows OGB's `smiles2graph` (ogb/utils/features.py): RDKit parses and
sanitizes the SMILES; nodes are the heavy atoms in RDKit order with 9 integer features,
edges are the bonds in both directions (bond i -> edges 2i = (u, v), 2i+1 = (v, u)) with 3
integer features. A value outside a feature's list maps to its last ('misc') entry.

Sources: the NCI molecules RDKit ships (`rdkit/Data/NCI/first_5K.smi`), the MOSES sets in
the `molsets` package (read as data files; importing `moses` itself fails here), and any
CSV/SMI file with a SMILES column and label columns. Invalid SMILES are counted, listed in
the returned metadata and reported with a warning; they are never dropped silently.

Packing only needs (atoms, directed edges) per molecule, so `molecule_sizes` skips building
graphs and is cached on its own; it is what makes the 1.58M MOSES molecules practical.
"""

from __future__ import annotations

import csv
import gzip
import importlib.util
import io
import sys
import warnings
import zlib
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnforge.data._limits import CappedReader, decompressed_limit
from gnnforge.data._paths import cache_dir
from gnnforge.data._store import cache_key, cached_graphs
from gnnforge.graph import Graph

__all__ = [
    "ATOM_FEATURE_DIMS",
    "BOND_FEATURE_DIMS",
    "load_molecules",
    "molecule_files",
    "molecule_sizes",
    "read_smiles",
    "smiles_to_graph",
]

# ogb/utils/features.py `allowable_features`, in its order; the last entry is 'misc'.
_ATOM_LISTS: tuple[tuple[Any, ...], ...] = (
    tuple(range(1, 119)) + ("misc",),                                        # atomic number
    ("CHI_UNSPECIFIED", "CHI_TETRAHEDRAL_CW", "CHI_TETRAHEDRAL_CCW", "CHI_OTHER", "misc"),
    tuple(range(11)) + ("misc",),                                            # total degree
    tuple(range(-5, 6)) + ("misc",),                                         # formal charge
    tuple(range(9)) + ("misc",),                                             # total num Hs
    tuple(range(5)) + ("misc",),                                             # radical electrons
    ("SP", "SP2", "SP3", "SP3D", "SP3D2", "misc"),                           # hybridization
    (False, True),                                                           # aromatic
    (False, True),                                                           # in ring
)
_BOND_LISTS: tuple[tuple[Any, ...], ...] = (
    ("SINGLE", "DOUBLE", "TRIPLE", "AROMATIC", "misc"),
    ("STEREONONE", "STEREOZ", "STEREOE", "STEREOCIS", "STEREOTRANS", "STEREOANY"),
    (False, True),                                                           # conjugated
)
ATOM_FEATURE_DIMS = tuple(len(values) for values in _ATOM_LISTS)  # vocabulary size per column
BOND_FEATURE_DIMS = tuple(len(values) for values in _BOND_LISTS)
_ATOM_INDEX = tuple({value: i for i, value in enumerate(values)} for values in _ATOM_LISTS)
_BOND_INDEX = tuple({value: i for i, value in enumerate(values)} for values in _BOND_LISTS)

_SMILES_HEADERS = ("smiles", "mol", "canonical_smiles")
# Label columns of the MoleculeNet files in shared/datasets (others hold descriptors or ids).
_KNOWN_LABELS = {
    "delaney-processed": ["measured log solubility in mols per litre"],
    "SAMPL": ["expt"],
    "Lipophilicity": ["exp"],
    "bace": ["Class", "pIC50"],
    "BBBP": ["p_np"],
}
_MOSES_SPLITS = {"moses": "train", "moses_train": "train", "moses_test": "test",
                 "moses_test_scaffolds": "test_scaffolds"}
_MAX_LISTED_INVALID = 20


def _index(table: dict, value: Any) -> int:
    return table.get(value, len(table) - 1)  # OGB's safe_index: unknown -> 'misc'


def _atom_features(atom: Any) -> list[int]:
    return [
        _index(_ATOM_INDEX[0], atom.GetAtomicNum()),
        _index(_ATOM_INDEX[1], str(atom.GetChiralTag())),
        _index(_ATOM_INDEX[2], atom.GetTotalDegree()),
        _index(_ATOM_INDEX[3], atom.GetFormalCharge()),
        _index(_ATOM_INDEX[4], atom.GetTotalNumHs()),
        _index(_ATOM_INDEX[5], atom.GetNumRadicalElectrons()),
        _index(_ATOM_INDEX[6], str(atom.GetHybridization())),
        _ATOM_INDEX[7][atom.GetIsAromatic()],
        _ATOM_INDEX[8][atom.IsInRing()],
    ]


def _bond_features(bond: Any) -> list[int]:
    return [
        _index(_BOND_INDEX[0], str(bond.GetBondType())),
        _index(_BOND_INDEX[1], str(bond.GetStereo())),
        _BOND_INDEX[2][bond.GetIsConjugated()],
    ]


def _rdkit() -> Any:
    try:
        from rdkit import Chem, RDLogger
    except ImportError as error:
        raise ImportError("molecules need RDKit: pip install 'gnnforge[chem]'") from error
    return Chem, RDLogger


@contextmanager
def _quiet_rdkit() -> Iterator[Any]:
    """RDKit prints a line per bad SMILES; we count them ourselves instead."""
    Chem, RDLogger = _rdkit()
    RDLogger.DisableLog("rdApp.*")
    try:
        yield Chem
    finally:
        RDLogger.EnableLog("rdApp.*")


def _mol_to_graph(mol: Any) -> Graph:
    x = np.array([_atom_features(a) for a in mol.GetAtoms()], dtype=np.int64).reshape(-1, 9)
    num_bonds = mol.GetNumBonds()
    ends = np.empty((2 * num_bonds, 2), dtype=np.int64)
    attr = np.empty((2 * num_bonds, 3), dtype=np.int64)
    for i, bond in enumerate(mol.GetBonds()):
        u, v = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        ends[2 * i] = (u, v)
        ends[2 * i + 1] = (v, u)
        attr[2 * i] = attr[2 * i + 1] = _bond_features(bond)
    return Graph._trusted(torch.from_numpy(ends[:, 0].copy()), torch.from_numpy(ends[:, 1].copy()),
                          x.shape[0], node_data={"x": torch.from_numpy(x)},
                          edge_data={"edge_attr": torch.from_numpy(attr)})


def smiles_to_graph(smiles: str) -> Graph:
    """One molecule as a Graph, exactly like OGB's `smiles2graph`.

    Returns:
        Graph with N heavy atoms and 2B directed edges (B bonds), node data
        `x` [N, 9] int64 (atomic number, chirality, degree, formal charge, num H, radical
        electrons, hybridization, aromatic, in ring; vocabulary sizes ATOM_FEATURE_DIMS)
        and edge data `edge_attr` [2B, 3] int64 (bond type, stereo, conjugated).

    Raises:
        ValueError: when RDKit cannot parse or sanitize `smiles`.
    """
    with _quiet_rdkit() as Chem:
        mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        raise ValueError(f"smiles_to_graph: RDKit cannot parse SMILES {smiles!r}")
    return _mol_to_graph(mol)


# ----------------------------------------------------------------------------- sources


def _moses_file(split: str) -> Path:
    spec = importlib.util.find_spec("moses")  # locates the package without running its code
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the MOSES sets need the molsets package: "
                                "pip install --no-deps molsets==0.3.1")
    path = Path(list(spec.submodule_search_locations)[0]) / "dataset" / "data" / f"{split}.csv.gz"
    if not path.exists():
        raise FileNotFoundError(f"molsets is installed but {path} is missing")
    return path


def rdkit_nci_file(name: str = "first_5K.smi") -> Path:
    """A file of the NCI set RDKit ships in its Data/NCI folder (found without importing RDKit)."""
    spec = importlib.util.find_spec("rdkit")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the NCI molecules ship with RDKit: pip install 'gnnforge[chem]'")
    path = Path(list(spec.submodule_search_locations)[0]) / "Data" / "NCI" / name
    if not path.exists():
        raise FileNotFoundError(f"RDKit is installed but {path} is missing")
    return path


def _nci_file() -> Path:
    return rdkit_nci_file()


def _resolve(source: str | Path) -> Path:
    if isinstance(source, str) and source == "nci":
        return _nci_file()
    if isinstance(source, str) and source in _MOSES_SPLITS:
        return _moses_file(_MOSES_SPLITS[source])
    path = Path(source)
    if not path.exists() and isinstance(source, str):
        # A shared file's name, as `gnnforge datasets` and `pack --source` spell it.
        path = molecule_files().get(source, path)
    if not path.exists():
        raise FileNotFoundError(
            f"molecule source {str(source)!r} is neither 'nci', one of {sorted(_MOSES_SPLITS)}, "
            "a shared molecule file name (gnnforge datasets) nor an existing CSV/SMI file")
    return path


def molecule_files(datasets_dir: str | Path | None = None) -> dict[str, Path]:
    """Named molecule sources: the built-ins plus SMILES files found in the shared datasets.

    Missing built-ins (no RDKit, no molsets) are left out; call `load_molecules` with the
    name to see why.
    """
    from gnnforge.data._paths import shared_datasets_dir

    found: dict[str, Path] = {}
    for name in ("nci", "moses"):
        try:
            found[name] = _resolve(name)
        except (ImportError, FileNotFoundError):
            pass
    root = Path(datasets_dir) if datasets_dir is not None else shared_datasets_dir()
    if root is not None:
        for folder in ("moleculenet", "qm9_smiles", "zinc_jtnn_subset"):
            for path in sorted((root / folder).glob("*")):
                if path.suffix in (".gz", ".csv", ".smi", ".txt"):
                    stem = path.name.split(".")[0]
                    key = stem if folder == "moleculenet" else f"{folder.split('_')[0]}_{stem}"
                    found[key] = path
    return found


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":  # capped like every decompression (gnnforge.data._limits)
        capped = CappedReader(gzip.open(path, "rb"), path,
                              decompressed_limit(path.stat().st_size))
        return io.TextIOWrapper(io.BufferedReader(capped), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_smiles(source: str | Path, smiles_column: str | None = None,
                label_columns: Sequence[str] | None = None
                ) -> tuple[list[str], np.ndarray, list[str]]:
    """Read SMILES strings and labels from a named source or a CSV/SMI file.

    CSV files need a header; the SMILES column is `smiles_column` or the first header named
    smiles/mol (any case). `.smi`/`.txt` files without a comma take the first whitespace
    token of each line (a first line reading "smiles" is treated as a header).

    Returns:
        (smiles [n], labels [n, T] float64 with NaN where a value is blank, label names).

    Raises:
        ValueError: when the SMILES or a label column is missing or a label is not a number.
    """
    path = _resolve(source)
    try:
        with _open_text(path) as handle:
            first = handle.readline()
            handle.seek(0)
            if "," not in first:
                return _read_plain(handle)
            rows = list(csv.reader(handle))
    except (OSError, EOFError, zlib.error, csv.Error, UnicodeDecodeError) as error:
        raise ValueError(f"{path.name}: unreadable SMILES file ({type(error).__name__}: "
                         f"{error})") from error
    header, body = rows[0], [row for row in rows[1:] if row]
    column = _smiles_column(header, smiles_column, path)
    short = next((r for r, row in enumerate(body) if len(row) <= column), None)
    if short is not None:
        raise ValueError(f"{path.name} row {short + 2}: {len(body[short])} fields, but the "
                         f"SMILES column is number {column + 1}")
    names = _label_names(header, body, column, label_columns, path)
    positions = [header.index(name) for name in names]
    labels = np.full((len(body), len(names)), np.nan)
    for r, row in enumerate(body):
        for c, position in enumerate(positions):
            text = row[position].strip() if position < len(row) else ""
            if text:
                if not _is_number(text):
                    raise ValueError(f"{path.name} row {r + 2}: label {names[c]!r} is {text!r}, "
                                     "not a number")
                labels[r, c] = float(text)
    return [row[column].strip() for row in body], labels, names


def _read_plain(handle: io.TextIOBase) -> tuple[list[str], np.ndarray, list[str]]:
    smiles = []
    for line in handle:
        parts = line.split()
        if parts:
            smiles.append(parts[0])
    if smiles and smiles[0].lower() == "smiles":
        smiles = smiles[1:]
    return smiles, np.zeros((len(smiles), 0)), []


def _smiles_column(header: list[str], smiles_column: str | None, path: Path) -> int:
    if smiles_column is not None:
        if smiles_column not in header:
            raise ValueError(f"{path.name}: no column {smiles_column!r}; columns are {header[:12]}")
        return header.index(smiles_column)
    for position, name in enumerate(header):
        if name.strip().lower() in _SMILES_HEADERS:
            return position
    raise ValueError(f"{path.name}: no SMILES column among {header[:12]}; pass smiles_column=")


def _label_names(header: list[str], body: list[list[str]], column: int,
                 label_columns: Sequence[str] | None, path: Path) -> list[str]:
    if label_columns is not None:
        missing = [name for name in label_columns if name not in header]
        if missing:
            raise ValueError(f"{path.name}: label columns {missing} not in header {header[:12]}")
        return list(label_columns)
    known = _KNOWN_LABELS.get(path.name.split(".")[0])
    if known is not None:
        return known
    # Otherwise every column other than SMILES whose non-blank values are all numbers.
    names = []
    for position, name in enumerate(header):
        values = [row[position].strip() for row in body if position < len(row)]
        if position != column and all(_is_number(v) for v in values if v):
            names.append(name)
    return names


# ----------------------------------------------------------------------------- datasets


def _warn_invalid(name: str, invalid: list[tuple[int, str]], total: int) -> None:
    if invalid:
        shown = ", ".join(f"#{i} {s!r}" for i, s in invalid[:3])
        warnings.warn(f"{name}: {len(invalid)} of {total} SMILES could not be parsed by RDKit "
                      f"and were left out (first: {shown}); see meta['invalid']", stacklevel=3)


def load_molecules(source: str | Path = "nci", *, smiles_column: str | None = None,
                   label_columns: Sequence[str] | None = None, use_cache: bool = True,
                   progress: bool = True) -> tuple[list[Graph], dict[str, Any]]:
    """Molecular graphs (see `smiles_to_graph`) with labels, cached on disk.

    Args:
        source: 'nci' (RDKit's NCI set), 'moses'/'moses_test'/'moses_test_scaffolds', or a
            CSV/SMI path (see `read_smiles`).
        smiles_column, label_columns: override the column detection.

    Returns:
        (graphs, meta). Each graph holds graph data `y` [T] float32 (0 where missing) and
        `y_mask` [T] bool (False where the file had no value). meta: `source`, `num_smiles`,
        `num_invalid`, `invalid` (up to 20 (row, smiles) pairs), `index` (row of each graph
        in the file), `label_names`.
    """
    path = _resolve(source)
    options = {"kind": "molecules-ogb-v1", "smiles_column": smiles_column,
               "label_columns": None if label_columns is None else list(label_columns)}
    name = f"molecules-{path.name.split('.')[0]}"

    def build() -> tuple[list[Graph], dict[str, Any]]:
        smiles, labels, names = read_smiles(path, smiles_column, label_columns)
        return _build_graphs(name, smiles, labels, names, progress)

    graphs, meta = cached_graphs(name, [path], options, build, use_cache=use_cache)
    meta["source"] = str(path)
    # Warned here, not in build(), so a cache hit reports exactly what the build found.
    _warn_invalid(name, [tuple(x) for x in meta["invalid"]], meta["num_smiles"])
    return graphs, meta


def _build_graphs(name: str, smiles: list[str], labels: np.ndarray, names: list[str],
                  progress: bool) -> tuple[list[Graph], dict[str, Any]]:
    from tqdm import tqdm

    graphs, index, invalid = [], [], []
    mask = ~np.isnan(labels)
    values = np.where(mask, labels, 0.0).astype(np.float32)
    with _quiet_rdkit() as Chem:
        for row, text in enumerate(tqdm(smiles, desc=name, disable=not progress, unit="mol")):
            mol = Chem.MolFromSmiles(text)
            if mol is None:
                invalid.append((row, text))
                continue
            graph = _mol_to_graph(mol)
            graphs.append(graph.with_graph_data(y=torch.from_numpy(values[row]),
                                                y_mask=torch.from_numpy(mask[row])))
            index.append(row)
    meta = {"num_smiles": len(smiles), "num_invalid": len(invalid),
            "invalid": invalid[:_MAX_LISTED_INVALID], "index": index, "label_names": names}
    return graphs, meta


# ----------------------------------------------------------------------------- sizes only


def _sizes_chunk(smiles: list[str]) -> np.ndarray:
    """[n, 2] (atoms, directed edges) per SMILES; -1 rows for invalid ones."""
    out = np.full((len(smiles), 2), -1, dtype=np.int64)
    with _quiet_rdkit() as Chem:
        for i, text in enumerate(smiles):
            mol = Chem.MolFromSmiles(text)  # sanitized, like smiles_to_graph: same atom count
            if mol is not None:
                out[i] = (mol.GetNumAtoms(), 2 * mol.GetNumBonds())
    return out


def molecule_sizes(source: str | Path = "nci", *, use_cache: bool = True, progress: bool = True,
                   workers: int = 2) -> tuple[np.ndarray, dict[str, Any]]:
    """(atoms, directed edges) per valid molecule, without building graphs; cached.

    Equals `[(g.num_nodes, g.num_edges) for g in load_molecules(source)[0]]`. Parsing
    still runs RDKit with sanitization (so atom counts and validity match the graph path),
    split over `workers` processes (at most 2 by default: the machine is shared).

    Returns:
        (sizes [n_valid, 2] int64, meta with `num_smiles`, `num_invalid`, `invalid`).
    """
    path = _resolve(source)
    target = cache_dir() / f"sizes-{path.name.split('.')[0]}-{cache_key([path], {'v': 1})}.npz"
    if use_cache and target.exists():
        with np.load(target, allow_pickle=False) as stored:
            sizes, rows = stored["sizes"], stored["invalid_rows"]
            meta = _sizes_meta(path, int(stored["num_smiles"]), rows,
                               [str(s) for s in stored["invalid_smiles"]])
    else:
        smiles, _, _ = read_smiles(path)
        all_sizes = _parallel_sizes(smiles, workers, progress, path.name)
        bad = np.flatnonzero(all_sizes[:, 0] < 0)
        sizes = all_sizes[all_sizes[:, 0] >= 0]
        invalid_smiles = [smiles[i] for i in bad[:_MAX_LISTED_INVALID]]
        meta = _sizes_meta(path, len(smiles), bad, invalid_smiles)
        if use_cache:
            np.savez(target, sizes=sizes, invalid_rows=bad, num_smiles=len(smiles),
                     invalid_smiles=np.array(invalid_smiles, dtype=str))
    _warn_invalid(f"sizes-{path.name}", [tuple(x) for x in meta["invalid"]], meta["num_smiles"])
    return sizes, meta


def _sizes_meta(path: Path, total: int, rows: np.ndarray, smiles: list[str]) -> dict[str, Any]:
    listed = [(int(r), s) for r, s in zip(rows[:_MAX_LISTED_INVALID].tolist(), smiles)]
    return {"source": str(path), "num_smiles": total, "num_invalid": int(rows.size),
            "invalid": listed}


def _parallel_sizes(smiles: list[str], workers: int, progress: bool, label: str) -> np.ndarray:
    from tqdm import tqdm

    chunk = 20_000
    pieces = [smiles[i:i + chunk] for i in range(0, len(smiles), chunk)]
    bar = tqdm(total=len(smiles), desc=f"sizes {label}", unit="mol", disable=not progress,
               file=sys.stderr)
    results = []
    if workers <= 1 or len(pieces) <= 1:
        for piece in pieces:
            results.append(_sizes_chunk(piece))
            bar.update(len(piece))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for piece, result in zip(pieces, pool.map(_sizes_chunk, pieces)):
                results.append(result)
                bar.update(len(piece))
    bar.close()
    return np.concatenate(results) if results else np.zeros((0, 2), dtype=np.int64)
