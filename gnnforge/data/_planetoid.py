"""Planetoid citation graphs (Cora, CiteSeer, PubMed) from the raw `ind.NAME.*` files.

Processing follows Kipf & Welling's `gcn` loader (and PyG's `read_planetoid_data`):
nodes 0..len(allx)-1 are the allx rows, the test nodes are the ids in `test.index`
(their rows are tx, in file order), training nodes are the first len(x), validation the
next 500, and test the ids in `test.index`. The files are pickles, read with the
restricted unpickler.

Quirks, handled explicitly and reported in meta:
- CiteSeer: 15 ids inside the test range have no tx row (isolated test nodes). As in
  the reference loaders they get zero features and label 0; `has_features` and
  `has_label` are False for them and they are in no mask.
- PubMed: `ind.pubmed.allx` is absent from every public snapshot. Structure and labels
  are complete (ally gives the node count), so the graph loads; features exist only for
  the x rows (the training nodes) and the tx rows (the test nodes). Every other row of x
  is zero with `has_features` False; nothing is invented. Pass features="none" for a
  structure-only graph.

Edges: `graph` maps node -> neighbour list; each (node, neighbour) is the edge
neighbour -> node. As stored (duplicates and self-loops kept) unless cleaning options
ask otherwise; PyG's Planetoid equals `dedup=True, self_loops="remove"`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse
import torch

from gnnforge.data._clean import CleanOptions, clean_graph
from gnnforge.data._errors import DataFormatError, names_the_file
from gnnforge.data._limits import check_dense_size
from gnnforge.data._safe_pickle import safe_load
from gnnforge.data._sparse import checked_matrix
from gnnforge.data._text import parse_table, read_bytes
from gnnforge.graph import Graph

__all__ = ["PLANETOID_PARTS", "planetoid_files", "read_planetoid"]

PLANETOID_PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
_OPTIONAL = ("allx",)
_NUM_VAL = 500


def planetoid_files(root: str | Path, name: str) -> dict[str, Path]:
    """The `ind.NAME.*` files present in `root` (allx may be missing)."""
    root = Path(root)
    return {
        part: root / f"ind.{name}.{part}"
        for part in PLANETOID_PARTS
        if (root / f"ind.{name}.{part}").exists()
    }


def _features(path: Path, value: Any) -> scipy.sparse.csr_matrix:
    return checked_matrix(path, "feature matrix", value)


def _labels(path: Path, value: Any) -> np.ndarray:
    if not (isinstance(value, np.ndarray) and value.ndim == 2):
        raise DataFormatError(
            path, f"expected a 2-D one-hot label array, got {type(value).__name__}"
        )
    return value


@names_the_file
def read_planetoid(
    root: str | Path, name: str, *, clean: CleanOptions = CleanOptions(), features: str = "dense"
) -> tuple[Graph, dict[str, Any]]:
    """Read `ind.NAME.*` from `root` into one Graph.

    Node data: x [N, F] float32 (unless features="none"), y [N] int64, train_mask,
    val_mask, test_mask, has_features, has_label [N] bool.

    Raises:
        DataFormatError: a required file is missing or malformed (named), or the parts
            disagree in row counts.
    """
    if features not in ("dense", "none"):
        raise ValueError(f"features must be 'dense' or 'none', got {features!r}")
    files = planetoid_files(root, name)
    missing = [part for part in PLANETOID_PARTS if part not in files and part not in _OPTIONAL]
    if missing:
        raise DataFormatError(Path(root) / f"ind.{name}.*", f"missing Planetoid parts {missing}")
    x, tx = (_features(files[p], safe_load(files[p])) for p in ("x", "tx"))
    y, ty, ally = (_labels(files[p], safe_load(files[p])) for p in ("y", "ty", "ally"))
    allx = _features(files["allx"], safe_load(files["allx"])) if "allx" in files else None
    adjacency = safe_load(files["graph"])
    if not isinstance(adjacency, dict):
        raise DataFormatError(
            files["graph"], f"expected a dict of neighbour lists, got {type(adjacency).__name__}"
        )
    test_index = parse_table(read_bytes(files["test.index"]), files["test.index"], 1)[:, 0]
    if test_index.size != tx.shape[0] or ty.shape[0] != tx.shape[0]:
        raise DataFormatError(
            files["test.index"],
            f"{test_index.size} test ids but tx has {tx.shape[0]} rows and ty {ty.shape[0]}",
        )
    num_known = ally.shape[0]  # allx rows, also when allx itself is missing
    if allx is not None and allx.shape[0] != num_known:
        raise DataFormatError(files["allx"], f"{allx.shape[0]} rows but ally has {num_known}")
    if test_index.size and test_index.min() < num_known:
        raise DataFormatError(
            files["test.index"], f"test id {test_index.min()} overlaps the {num_known} allx nodes"
        )
    num_nodes = max(num_known, int(test_index.max()) + 1 if test_index.size else 0)
    # The test ids fill the range after the known nodes, with a few gaps (CiteSeer: 15 of
    # 1,015); a range far wider than the test set is a corrupt id, not a dataset.
    if num_nodes - num_known > 2 * max(test_index.size, 1):
        raise DataFormatError(
            files["test.index"], f"test id {num_nodes - 1} leaves {num_nodes - num_known} ids "
            f"after the {num_known} known nodes for only {test_index.size} test ids")
    num_features, num_classes = x.shape[1], y.shape[1]
    if features == "dense":
        check_dense_size(files["x"], "features", (num_nodes, num_features), np.float32)

    feature_rows = scipy.sparse.lil_matrix((num_nodes, num_features), dtype=np.float32)
    has_features = np.zeros(num_nodes, dtype=bool)
    if allx is not None:
        feature_rows[:num_known] = allx
        has_features[:num_known] = True
    else:
        feature_rows[: x.shape[0]] = x
        has_features[: x.shape[0]] = True
    feature_rows[test_index] = tx
    has_features[test_index] = True
    onehot = np.zeros((num_nodes, num_classes), dtype=np.float32)
    onehot[:num_known] = ally
    onehot[test_index] = ty
    has_label = onehot.sum(1) > 0

    src, dst = _edges(files["graph"], adjacency, num_nodes)
    masks = {
        name: np.zeros(num_nodes, dtype=bool) for name in ("train_mask", "val_mask", "test_mask")
    }
    masks["train_mask"][: y.shape[0]] = True
    masks["val_mask"][y.shape[0] : y.shape[0] + _NUM_VAL] = True
    masks["test_mask"][test_index] = True
    node_data = {
        "y": torch.from_numpy(onehot.argmax(1).astype(np.int64)),
        "has_features": torch.from_numpy(has_features),
        "has_label": torch.from_numpy(has_label),
        **{k: torch.from_numpy(v) for k, v in masks.items()},
    }
    if features == "dense":
        node_data["x"] = torch.from_numpy(feature_rows.toarray())
    graph = Graph(torch.from_numpy(src), torch.from_numpy(dst), num_nodes, node_data=node_data)
    graph, drops = clean_graph(graph, clean)
    meta = {
        "format": "Planetoid",
        "files": [str(p) for p in files.values()],
        "feature_dim": int(num_features),
        "num_classes": int(num_classes),
        "nodes_without_features": int((~has_features).sum()),
        "nodes_without_label": int((~has_label).sum()),
        "allx": "present" if allx is not None else "absent: features only for x and tx rows",
        "split": {k: int(v.sum()) for k, v in masks.items()},
        "drops": drops,
    }
    return graph, meta


def _edges(path: Path, adjacency: dict, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    nodes, neighbours, counts = [], [], []
    for node, items in adjacency.items():
        if not isinstance(node, (int, np.integer)) or not isinstance(items, list):
            raise DataFormatError(path, f"entry {node!r}: expected int -> list of ints")
        nodes.append(node)
        neighbours.extend(items)
        counts.append(len(items))
    try:
        targets = np.asarray(neighbours, dtype=np.int64)
    except (TypeError, ValueError) as error:
        raise DataFormatError(path, f"neighbour lists must hold integers ({error})") from error
    owners = np.repeat(np.asarray(nodes, dtype=np.int64), counts)
    for name, ids in (("node", owners), ("neighbour", targets)):
        bad = (ids < 0) | (ids >= num_nodes)
        if bad.any():
            raise DataFormatError(
                path, f"{name} id {ids[np.nonzero(bad)[0][0]]} outside 0..{num_nodes - 1}"
            )
    return targets, owners
