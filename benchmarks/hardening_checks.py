"""What each hardening check costs at its boundary, on the largest shared datasets.

The checks run once per load, cache read or construction, never per kernel call; this
prints each one's time beside the load it guards (medians of a few runs). Quoted in
docs/data.md ("Untrusted files"). Run: `PYTHONPATH=. python benchmarks/hardening_checks.py`.
"""

from __future__ import annotations

import gzip
import statistics
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.io

from gnnforge.data import (load_graphs, read_edge_list, read_graph_npz, read_mat_graph,
                           save_graphs, shared_datasets_dir)
from gnnforge.data import _limits, _sparse, _store, _text
from gnnforge.data._npz import read_npz_members

Row = tuple[str, str, float, float]  # check, dataset, check seconds, load seconds


def median_seconds(function: Callable[[], object], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def text_checks(root: Path) -> list[Row]:
    """Ragged-row and saturation checks, and the capped gunzip, on soc-Slashdot0902."""
    path = root / "snap_soc_slashdot0902" / "soc-Slashdot0902.txt.gz"
    body = _text._drop_comments(gzip.decompress(path.read_bytes()), b"#%")
    values = np.fromstring(body, dtype=np.int64, sep=" ")
    load = median_seconds(lambda: read_edge_list(path))
    plain = median_seconds(lambda: gzip.open(path).read())
    capped = median_seconds(lambda: _limits.read_capped(gzip.open(path), path))
    name = "soc-Slashdot0902 (948k lines, 11 MB text)"
    return [("ragged-row check", name, median_seconds(lambda: _text._rows_are_even(body, 2)),
             load),
            ("int64 saturation check", name,
             median_seconds(lambda: _text._may_have_saturated(values)), load),
            ("capped gunzip, extra over a plain read", name, capped - plain, load)]


def sparse_checks(root: Path) -> list[Row]:
    """The int64 CSR checks of coauthor_phy's adjacency and feature matrices."""
    path = root / "graphgallery_npz" / "coauthor_phy.npz"
    members = read_npz_members(path)
    load = median_seconds(lambda: read_graph_npz(path, features="none"), 3)
    check = median_seconds(lambda: (_sparse.checked_matrix(path, "a", members["adj_matrix"]),
                                    _sparse.checked_matrix(path, "x", members["node_attr"])))
    return [("int64 CSR checks (adjacency + features)",
             "coauthor_phy npz (34,493 x 8,415 features, 248k edges)", check, load)]


def cache_checks(root: Path) -> list[Row]:
    """Checksum and structure checks of cache entries, and the new loader vs np.load."""
    rows: list[Row] = []
    folder = Path(tempfile.mkdtemp())
    slashdot = root / "snap_soc_slashdot0902" / "soc-Slashdot0902.txt.gz"
    physics = root / "graphgallery_npz" / "coauthor_phy.npz"
    for name, graph in (("slashdot", read_edge_list(slashdot)[0]),
                        ("coauthor_phy, dense features", read_graph_npz(physics)[0])):
        path = folder / f"{name.split(',')[0]}.npz"
        save_graphs(path, [graph], {})
        label = f"{name} entry ({path.stat().st_size / 2**20:.0f} MiB)"
        load = median_seconds(lambda: load_graphs(path), 3)
        arrays = _store._read_members(path)
        arrays.pop("meta")

        def digest() -> None:
            with zipfile.ZipFile(path) as archive:
                stored = _store._read_array(archive, archive.getinfo("checksum.npy"), path)
                assert stored.tobytes().decode() == _store._digest(archive.infolist())

        old = median_seconds(lambda: _unchecked_load(path), 3)
        rows += [("cache checksum (member digest)", label, median_seconds(digest), load),
                 ("cache structure check", label,
                  median_seconds(lambda: _store._check_structure(path, arrays)), load),
                 ("cache read, checked loader minus the unchecked one", label, load - old,
                  old)]
    return rows


def _unchecked_load(path: Path) -> list:
    """The loader before the checks: np.load every member, build the graphs trusting them."""
    import torch

    from gnnforge.graph import Graph, GraphBatch

    with np.load(path, allow_pickle=False) as stored:
        fields = {k: torch.from_numpy(stored[k]) for k in stored.files if k not in ("meta",
                                                                                   "checksum")}
    data = {section: {} for section in ("node_data", "edge_data", "graph_data")}
    for name, value in fields.items():
        if "/" in name:
            section, key = name.split("/", 1)
            data[section][key] = value
    union = Graph._trusted(fields["src"], fields["dst"], int(fields["graph_ptr"][-1]),
                           fields.get("edge_type"), data["node_data"], data["edge_data"],
                           data["graph_data"])
    mask = torch.ones(fields["graph_ptr"].numel() - 1, dtype=torch.bool)
    return GraphBatch._make(union, fields["graph_ptr"], fields["edge_ptr"], mask).unbatch()


def mat_check(root: Path) -> list[Row]:
    """`.mat` parsed in a child process, against loadmat in this process."""
    path = root / "suitesparse_usroads48" / "usroads-48.mat"
    isolated = median_seconds(lambda: read_mat_graph(path), 3)
    in_process = median_seconds(lambda: scipy.io.loadmat(path), 3)
    return [("child process for loadmat (read_mat_graph minus loadmat)",
             "usroads-48 .mat (126k nodes)", isolated - in_process, isolated)]


def main() -> None:
    root = shared_datasets_dir()
    if root is None:
        sys.exit("hardening_checks: needs the shared datasets folder (set GNNFORGE_DATASETS)")
    rows = text_checks(root) + sparse_checks(root) + cache_checks(root) + mat_check(root)
    print("| check | on | check ms | load ms | share |")
    print("| --- | --- | ---: | ---: | ---: |")
    for check, dataset, seconds, load in rows:
        print(f"| {check} | {dataset} | {seconds * 1e3:.1f} | {load * 1e3:.1f} | "
              f"{100 * seconds / load:.1f}% |")


if __name__ == "__main__":
    main()
