"""A partitioned dataset on disk: per part its vertices, in-edges, features and labels.

Layout of a directory written by `write_partitions` (`gnnforge partition`):

    manifest.json          parts, method, seed, sizes, balance achieved, edge cut, and for
                           every file its shape, dtype and sha256
    owner.npy              [N] int16/int32: the part of every vertex (routes requests)
    part{p}/nodes.npy      [n_p] int64 owned vertices, ascending (global ids)
    part{p}/rowptr.npy     [n_p + 1] int64 CSR of the owned vertices' in-edges
    part{p}/col.npy        [E_p] int32/int64 global source id of each in-edge
    part{p}/edge_ids.npy   [E_p] int32/int64 id of each in-edge in the whole graph
    part{p}/features.npy   [n_p, F] float32 owned feature rows (row i: nodes[i])
    part{p}/labels.npy     [n_p] int64 owned labels
    part{p}/train.npy, val.npy, test.npy   owned vertices of each split (global ids)

Every array is a plain .npy file, memory-mapped on load (copy-on-write: pages are read
from disk when touched and shared with the page cache), so a rank holds only its part
and features larger than RAM stay on disk. In-edges keep the whole graph's CSR order
within a row, so a partition samples exactly the edges the whole graph would.
`load_partition` validates everything it reads: checksums, shapes, dtypes, id ranges,
and that each part owns exactly what `owner` says; errors name the file.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from gnnforge.sampling._common import InEdges

__all__ = ["FORMAT", "Partition", "PartitionError", "load_partition", "read_manifest",
           "write_partitions"]

FORMAT = "gnnforge-partitions"
VERSION = 1
SPLITS = ("train", "val", "test")


class PartitionError(ValueError):
    """A partitioned dataset directory is missing a file or holds an inconsistent one."""


@dataclass(frozen=True)
class Partition:
    """One part of a partitioned dataset, memory-mapped.

    Attributes:
        manifest: the directory's manifest (sizes, balance, edge cut, files).
        part: this part's index.
        nodes: [n_p] int64 owned global ids, ascending.
        in_edges: the owned vertices' in-edges (rows follow `nodes`), for the samplers.
        features: [n_p, F] float32 owned rows (memory-mapped).
        labels: [n_p] int64 owned labels.
        splits: "train", "val", "test" -> [k] int64 owned global ids of the split.
        owner: [N] part of every vertex (memory-mapped).
    """

    manifest: dict[str, Any]
    part: int
    nodes: np.ndarray
    in_edges: InEdges
    features: Tensor
    labels: Tensor
    splits: dict[str, Tensor]
    owner: np.ndarray

    @property
    def num_nodes(self) -> int:
        """Vertices of the whole graph."""
        return int(self.manifest["num_nodes"])

    def local(self, ids: np.ndarray | Tensor) -> Tensor:
        """Rows (positions in `nodes`) of owned global ids.

        Raises:
            ValueError: when an id is not owned by this part.
        """
        ids_np = np.asarray(ids, dtype=np.int64)
        rows = self.in_edges.rows(ids_np)
        return torch.from_numpy(np.ascontiguousarray(rows, dtype=np.int64))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _save(root: Path, name: str, array: np.ndarray, files: dict) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    files[name] = {"shape": list(array.shape), "dtype": str(array.dtype),
                   "sha256": _sha256(path)}


def _index_dtype(limit: int) -> type:
    return np.int32 if limit < 2**31 else np.int64


def write_partitions(out_dir: str | Path, graph, owner: Tensor, features: Tensor,
                     labels: Tensor, masks: dict[str, Tensor], *, method: str, seed: int,
                     balance: dict[str, float], edge_cut: int) -> dict[str, Any]:
    """Write the partitioned dataset `owner` describes; returns the manifest.

    Args:
        out_dir: directory to create (must not hold a manifest already).
        graph: the whole `Graph`; a vertex's part stores its in-edges.
        owner: [N] int64 part of every vertex.
        features: [N, F] float features; labels: [N] int64.
        masks: "train", "val", "test" -> [N] bool.
        method, seed, balance, edge_cut: recorded in the manifest.
    """
    root = Path(out_dir)
    if (root / "manifest.json").exists():
        raise FileExistsError(f"{root / 'manifest.json'} exists; choose another --out or "
                              "delete the old partitions first")
    owner_np = owner.numpy().astype(np.int64)
    num_parts = int(owner_np.max()) + 1 if owner_np.size else 1
    rowptr, col, eids = (t.numpy() for t in graph.csr(torch.int64))
    files: dict[str, dict] = {}
    _save(root, "owner.npy", owner_np.astype(np.int16 if num_parts < 2**15 else np.int32),
          files)
    parts = []
    for part in range(num_parts):
        nodes = np.flatnonzero(owner_np == part).astype(np.int64)
        starts, ends = rowptr[nodes], rowptr[nodes + 1]
        counts = ends - starts
        local_ptr = np.zeros(nodes.size + 1, dtype=np.int64)
        np.cumsum(counts, out=local_ptr[1:])
        positions = np.repeat(starts - local_ptr[:-1], counts) + np.arange(local_ptr[-1])
        prefix = f"part{part}/"
        _save(root, prefix + "nodes.npy", nodes, files)
        _save(root, prefix + "rowptr.npy", local_ptr, files)
        _save(root, prefix + "col.npy", col[positions].astype(_index_dtype(graph.num_nodes)),
              files)
        _save(root, prefix + "edge_ids.npy",
              eids[positions].astype(_index_dtype(graph.num_edges)), files)
        _save(root, prefix + "features.npy", features[torch.from_numpy(nodes)].float().numpy(),
              files)
        _save(root, prefix + "labels.npy", labels[torch.from_numpy(nodes)].numpy()
              .astype(np.int64), files)
        for split in SPLITS:
            _save(root, prefix + f"{split}.npy", nodes[masks[split].numpy()[nodes]], files)
        parts.append({"nodes": int(nodes.size), "edges": int(local_ptr[-1]),
                      "train": int(masks["train"].numpy()[nodes].sum())})
    manifest = {"format": FORMAT, "version": VERSION, "num_parts": num_parts,
                "method": method, "seed": seed, "num_nodes": graph.num_nodes,
                "num_edges": graph.num_edges, "feature_dim": int(features.shape[1]),
                "num_classes": int(labels.max()) + 1 if labels.numel() else 0,
                "balance": balance, "edge_cut": edge_cut,
                "edge_cut_fraction": edge_cut / max(graph.num_edges, 1),
                "parts": parts, "files": files}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


_MANIFEST_KEYS = {"format": str, "version": int, "num_parts": int, "method": str,
                  "seed": int, "num_nodes": int, "num_edges": int, "feature_dim": int,
                  "num_classes": int, "balance": dict, "edge_cut": int, "parts": list,
                  "files": dict}


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """The manifest of a partitioned dataset, checked for its keys and types.

    Raises:
        PartitionError: no manifest, not JSON, another format, or a missing/bad key.
    """
    path = Path(directory) / "manifest.json"
    if not path.is_file():
        raise PartitionError(f"{path}: no such file; write partitions with "
                             "`gnnforge partition --out DIR`")
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise PartitionError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise PartitionError(f"{path}: not a {FORMAT} manifest")
    for key, kind in _MANIFEST_KEYS.items():
        if not isinstance(manifest.get(key), kind) or isinstance(manifest.get(key), bool):
            raise PartitionError(f"{path}: key {key!r} must be a {kind.__name__}, got "
                                 f"{manifest.get(key)!r}")
    if manifest["version"] != VERSION:
        raise PartitionError(f"{path}: version {manifest['version']}, this gnnforge reads "
                             f"version {VERSION}")
    if manifest["num_parts"] < 1 or len(manifest["parts"]) != manifest["num_parts"]:
        raise PartitionError(f"{path}: num_parts {manifest['num_parts']} does not match "
                             f"{len(manifest['parts'])} part entries")
    return manifest


def _open(root: Path, manifest: dict, name: str, verify: bool) -> np.ndarray:
    """Memory-map one file after checking it against the manifest."""
    path = root / name
    entry = manifest["files"].get(name)
    if entry is None:
        raise PartitionError(f"{root / 'manifest.json'}: no entry for {name}")
    if not path.is_file():
        raise PartitionError(f"{path}: no such file (listed in the manifest)")
    if verify and _sha256(path) != entry.get("sha256"):
        raise PartitionError(f"{path}: checksum mismatch (the file changed after "
                             "`gnnforge partition` wrote it); partition again")
    try:
        array = np.load(path, mmap_mode="c", allow_pickle=False)
    except ValueError as error:
        raise PartitionError(f"{path}: not a readable .npy file ({error})") from None
    if list(array.shape) != entry.get("shape") or str(array.dtype) != entry.get("dtype"):
        raise PartitionError(f"{path}: shape {list(array.shape)} dtype {array.dtype}, the "
                             f"manifest says {entry.get('shape')} {entry.get('dtype')}")
    return array


def _check(condition: bool, path: Path, message: str) -> None:
    if not condition:
        raise PartitionError(f"{path}: {message}")


def load_partition(directory: str | Path, part: int, verify: bool = True) -> Partition:
    """Memory-map part `part` of a partitioned dataset, validating what it reads.

    Args:
        directory: written by `write_partitions` / `gnnforge partition`.
        part: which part (a rank's index in its cooperating group).
        verify: check every file's sha256 (reads each file once; the id-range and shape
            checks always run).

    Raises:
        PartitionError: a missing, changed or inconsistent file (the message names it).
    """
    root = Path(directory)
    manifest = read_manifest(root)
    if not 0 <= part < manifest["num_parts"]:
        raise PartitionError(f"{root}: part {part} requested, the dataset has "
                             f"{manifest['num_parts']} parts")
    num_nodes = manifest["num_nodes"]
    owner = _open(root, manifest, "owner.npy", verify)
    _check(owner.shape == (num_nodes,), root / "owner.npy", f"expected {num_nodes} entries")
    prefix = f"part{part}/"
    arrays = {name: _open(root, manifest, prefix + name + ".npy", verify)
              for name in ("nodes", "rowptr", "col", "edge_ids", "features", "labels",
                           *SPLITS)}
    _validate(root / f"part{part}", arrays, owner, part, manifest)
    edges = InEdges(arrays["rowptr"], arrays["col"], arrays["edge_ids"], num_nodes,
                    nodes=arrays["nodes"])
    return Partition(manifest, part, arrays["nodes"], edges,
                     torch.from_numpy(arrays["features"]), torch.from_numpy(arrays["labels"]),
                     {s: torch.from_numpy(np.asarray(arrays[s])) for s in SPLITS}, owner)


def _validate(folder: Path, arrays: dict, owner: np.ndarray, part: int, manifest: dict) -> None:
    nodes, rowptr, col, eids = (arrays[k] for k in ("nodes", "rowptr", "col", "edge_ids"))
    num_nodes, num_edges = manifest["num_nodes"], manifest["num_edges"]
    _check(nodes.ndim == 1 and (nodes.size == 0 or (nodes[0] >= 0 and nodes[-1] < num_nodes)),
           folder / "nodes.npy", f"ids must lie in [0, {num_nodes})")
    _check(bool(np.all(np.diff(nodes) > 0)), folder / "nodes.npy",
           "ids must be strictly ascending")
    owned = np.flatnonzero(np.asarray(owner) == part)
    _check(owned.size == nodes.size and bool(np.array_equal(owned, nodes)),
           folder / "nodes.npy", f"does not match the vertices owner.npy gives part {part}")
    _check(rowptr.shape == (nodes.size + 1,) and rowptr[0] == 0
           and bool(np.all(np.diff(rowptr) >= 0)) and rowptr[-1] == col.size == eids.size,
           folder / "rowptr.npy", "not a CSR row pointer over col.npy / edge_ids.npy")
    _check(col.size == 0 or (int(col.min()) >= 0 and int(col.max()) < num_nodes),
           folder / "col.npy", f"source ids must lie in [0, {num_nodes})")
    _check(eids.size == 0 or (int(eids.min()) >= 0 and int(eids.max()) < num_edges),
           folder / "edge_ids.npy", f"edge ids must lie in [0, {num_edges})")
    features, labels = arrays["features"], arrays["labels"]
    _check(features.ndim == 2 and features.shape == (nodes.size, manifest["feature_dim"]),
           folder / "features.npy", f"expected shape ({nodes.size}, {manifest['feature_dim']})")
    _check(labels.shape == (nodes.size,) and (labels.size == 0 or (
        int(labels.min()) >= 0 and int(labels.max()) < manifest["num_classes"])),
        folder / "labels.npy", f"labels must lie in [0, {manifest['num_classes']})")
    for split in SPLITS:
        ids = arrays[split]
        inside = np.isin(ids, nodes) if ids.size else np.ones(0, dtype=bool)
        _check(ids.ndim == 1 and bool(inside.all()), folder / f"{split}.npy",
               "holds vertices this part does not own")
