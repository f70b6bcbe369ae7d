"""synthetic-products: the generator's arrays, the cache folder, the memory maps, the listing.

Small versions of the same generator (2**12 nodes: about a second each).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnforge.data import (PRODUCTS_NODES, ProductsSpec, generate_products,
                           load_synthetic_products, split_sizes)
from gnnforge.data import _mapped_products
from gnnforge.sampling import InEdges, LaborSampler, NeighborSampler, VariateKey

SMALL = 4096


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("products")
    generate_products(ProductsSpec(num_nodes=SMALL), folder, progress=False)
    return folder


def _arrays(folder: Path) -> dict[str, np.ndarray]:
    return {path.stem: np.load(path) for path in folder.glob("*.npy")}


def test_same_seed_same_bytes_other_seed_other_graph(small, tmp_path):
    again, other = tmp_path / "again", tmp_path / "other"
    again.mkdir(), other.mkdir()
    generate_products(ProductsSpec(num_nodes=SMALL), again, progress=False)
    generate_products(ProductsSpec(num_nodes=SMALL, seed=1), other, progress=False)
    first, second = _arrays(small), _arrays(again)
    assert sorted(first) == ["col", "rowptr", "test", "train", "val", "x", "y"]
    for name in first:
        assert np.array_equal(first[name], second[name]), name
    assert not np.array_equal(first["x"], _arrays(other)["x"])
    assert not (np.array_equal(first["col"].shape, _arrays(other)["col"].shape)
                and np.array_equal(first["col"], _arrays(other)["col"]))


def test_csr_is_a_symmetric_simple_graph_with_a_heavy_tail(small):
    arrays = _arrays(small)
    assert arrays["col"].dtype == np.int32 and arrays["rowptr"].dtype == np.int32
    rowptr, col = arrays["rowptr"].astype(np.int64), arrays["col"]
    assert rowptr[0] == 0 and rowptr[-1] == col.size and np.all(np.diff(rowptr) >= 0)
    assert col.min() >= 0 and col.max() < SMALL
    dst = np.repeat(np.arange(SMALL), np.diff(rowptr))
    src = col.astype(np.int64)
    assert not np.any(src == dst), "self-loops"
    keys = dst * SMALL + src
    assert np.all(np.diff(keys) > 0), "rows sorted, no repeated edge"
    assert np.array_equal(np.sort(src * SMALL + dst), keys), "every edge has its reverse"
    degree = np.diff(rowptr)
    assert degree.max() > 10 * degree.mean()  # power-law hubs
    meta = json.loads((small / "meta.json").read_text())
    assert meta["num_edges"] == col.size and meta["stats"]["max"] == degree.max()
    assert meta["duplicates_removed"] + col.size + meta["self_loops_removed"] \
        == 2 * meta["pairs_drawn"]


def test_hubs_are_spread_over_the_ids(small):
    degree = np.diff(_arrays(small)["rowptr"])
    hubs = np.argsort(degree)[-20:]
    assert hubs.max() > SMALL // 2  # not all at the low ids (as R-MAT puts them)


def test_features_and_labels_carry_the_class(small):
    arrays = _arrays(small)
    x, y = arrays["x"], arrays["y"]
    assert x.shape == (SMALL, 100) and x.dtype == np.float32
    assert y.shape == (SMALL,) and y.dtype == np.int16 and 0 <= y.min() and y.max() < 47
    rowptr, col = arrays["rowptr"], arrays["col"]
    dst = np.repeat(np.arange(SMALL), np.diff(rowptr))
    # homophily 0.8 between classes; 20% of the labels are redrawn (0.8 * 0.8 kept at both ends)
    assert (y[col] == y[dst]).mean() > 0.4
    # a neighbourhood mean predicts the class better than the node's own features
    means = np.stack([x[y == k].mean(0) for k in range(47)])
    own = (np.argmax(x @ means.T - 0.5 * (means**2).sum(1), 1) == y).mean()
    sums = np.zeros_like(x)
    np.add.at(sums, dst, x[col])
    hood = sums / np.maximum(np.diff(rowptr), 1)[:, None]
    hood_means = np.stack([hood[y == k].mean(0) for k in range(47)])
    neighbours = (np.argmax(hood @ hood_means.T - 0.5 * (hood_means**2).sum(1), 1)
                  == y).mean()
    assert neighbours > own + 0.1


def test_split_sizes_are_ogbn_products_scaled_disjoint_and_covering(small):
    assert split_sizes(PRODUCTS_NODES) == (196_615, 39_323, 2_213_091)
    arrays = _arrays(small)
    parts = [arrays[name] for name in ("train", "val", "test")]
    assert tuple(part.size for part in parts) == split_sizes(SMALL)
    assert all(part.dtype == np.int64 and np.all(np.diff(part) > 0) for part in parts)
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(SMALL))


@pytest.mark.parametrize("bad", [{"num_nodes": 100}, {"num_nodes": 2.5e6}, {"seed": -1},
                                 {"homophily": 1.5}])
def test_bad_parameters_are_named(bad):
    with pytest.raises((ValueError, TypeError), match=next(iter(bad)) + "|parameters"):
        ProductsSpec(**bad)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNFORGE_CACHE", str(tmp_path / "cache"))
    calls = []
    real = _mapped_products.generate_products

    def counting(spec, folder, progress=None):
        calls.append(spec)
        return real(spec, folder, progress=progress)

    monkeypatch.setattr(_mapped_products, "generate_products", counting)
    return calls


def test_loaded_once_then_mapped_from_the_cache(cache):
    first = load_synthetic_products(SMALL, progress=False)
    stamp = (first.folder / "col.npy").stat().st_mtime_ns
    second = load_synthetic_products(SMALL, progress=False)
    assert len(cache) == 1 and (second.folder / "col.npy").stat().st_mtime_ns == stamp
    assert second.folder == first.folder and first.folder.name == f"n{SMALL}-seed0"
    assert first.num_edges == second.num_edges
    assert torch.equal(first.x[:5], second.x[:5]) and torch.equal(first.y, second.y)


def test_structure_is_mapped_from_the_files_in_int32(cache):
    data = load_synthetic_products(SMALL, progress=False, prefetch=False)
    assert isinstance(data.col, np.memmap) and data.col.dtype == np.int32
    assert isinstance(data.rowptr, np.memmap)
    # the feature tensor's memory is the mapping of x.npy, not a copy
    assert _mapped_file(data.x.data_ptr()).endswith("x.npy")
    assert _mapped_file(data.col.ctypes.data).endswith("col.npy")
    assert data.data_bytes == data.rowptr.nbytes + data.col.nbytes + data.x.numel() * 4
    assert data.y.dtype == torch.int64 and data.train.dtype == torch.int64
    read = load_synthetic_products(SMALL, progress=False)  # fits: read into memory
    assert read.col.dtype == np.int32 and not isinstance(read.col, np.memmap)
    assert not _mapped_file(read.x.data_ptr()).endswith(".npy")
    assert read.data_bytes == data.data_bytes


def _mapped_file(address: int) -> str:
    """The file mapped at `address` in this process (Linux /proc/self/maps)."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split()
        low, high = (int(part, 16) for part in fields[0].split("-"))
        if low <= address < high:
            return fields[-1] if len(fields) >= 6 else ""
    return ""


def _vm_flags(address: int) -> list[str]:
    """The VmFlags of the mapping holding `address` (Linux /proc/self/smaps)."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if "-" in head[0] and ":" not in head[0]:  # a mapping's first line
            low, high = (int(part, 16) for part in head[0].split("-"))
            inside = low <= address < high
        elif inside and line.startswith("VmFlags:"):
            return head[1:]
    return []


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux smaps only")
def test_col_and_features_are_mapped_for_random_access(cache, monkeypatch):
    data = load_synthetic_products(SMALL, progress=False, prefetch=False)
    assert "rr" in _vm_flags(data.x.data_ptr())          # MADV_RANDOM: no readahead
    assert "rr" in _vm_flags(data.col.ctypes.data)
    assert "rr" not in _vm_flags(data.rowptr.ctypes.data)
    monkeypatch.setenv("GNNFORGE_MMAP_ADVICE", "normal")
    plain = load_synthetic_products(SMALL, progress=False, prefetch=False)
    assert "rr" not in _vm_flags(plain.x.data_ptr())
    assert torch.equal(plain.x[:7], data.x[:7])


def test_an_unknown_map_advice_is_named(cache, monkeypatch):
    monkeypatch.setenv("GNNFORGE_MMAP_ADVICE", "sequential")
    with pytest.raises(ValueError, match="GNNFORGE_MMAP_ADVICE must be 'random' or "
                                         "'normal', got 'sequential'"):
        load_synthetic_products(SMALL, progress=False)


def test_changed_version_or_parameters_regenerate(cache):
    data = load_synthetic_products(SMALL, progress=False)
    meta = json.loads((data.folder / "meta.json").read_text())
    (data.folder / "meta.json").write_text(json.dumps({**meta, "version": -1}))
    load_synthetic_products(SMALL, progress=False)
    assert len(cache) == 2
    assert json.loads((data.folder / "meta.json").read_text())["version"] == meta["version"]
    other = load_synthetic_products(SMALL, seed=3, progress=False)
    assert len(cache) == 3 and other.folder != data.folder
    load_synthetic_products(SMALL, progress=False)
    assert len(cache) == 3


def test_an_interrupted_generation_is_not_taken_for_a_dataset(cache, monkeypatch):
    real = _mapped_products.generate_products

    def interrupted(spec, folder, progress=None):
        real(spec, folder, progress=progress)
        (folder / "meta.json").unlink()  # as if killed before the last file
        raise KeyboardInterrupt

    monkeypatch.setattr(_mapped_products, "generate_products", interrupted)
    with pytest.raises(KeyboardInterrupt):
        load_synthetic_products(SMALL, progress=False)
    parent = _mapped_products.products_folder(ProductsSpec(num_nodes=SMALL)).parent
    assert list(parent.iterdir()) == []  # no folder, no temporary left behind
    # a killed process's temporary folder (no cleanup ran) is removed, not reused
    abandoned = parent / f"n{SMALL}-seed0.tmp{2**22 + 12345}"
    abandoned.mkdir()
    (abandoned / "col.npy").write_bytes(b"partial")
    monkeypatch.setattr(_mapped_products, "generate_products", real)
    data = load_synthetic_products(SMALL, progress=False)
    assert not abandoned.exists() and data.num_edges > 0
    assert sorted(p.name for p in parent.iterdir()) == [f"n{SMALL}-seed0"]


def test_a_folder_whose_files_disagree_with_its_meta_is_an_error(cache):
    from gnnforge.data import DataFormatError

    data = load_synthetic_products(SMALL, progress=False)
    np.save(data.folder / "y.npy", np.zeros(7, dtype=np.int16))
    with pytest.raises(DataFormatError, match="y.npy"):
        load_synthetic_products(SMALL, progress=False)


@pytest.mark.parametrize("sampler", [NeighborSampler([4, 3]), LaborSampler([4, 3])])
@pytest.mark.parametrize("dependent", [False, True])
def test_sampling_the_mapped_csr_equals_sampling_its_graph(cache, sampler, dependent):
    """InEdges with implied edge ids (no [E] id array) sample what the Graph does."""
    from gnnforge.graph import Graph

    data = load_synthetic_products(SMALL, progress=False)
    edges = InEdges(data.rowptr, data.col, data.col[:0], data.num_nodes)
    rowptr = torch.from_numpy(np.asarray(data.rowptr, dtype=np.int64))
    graph = Graph(torch.from_numpy(np.asarray(data.col, dtype=np.int64)),
                  torch.repeat_interleave(torch.arange(data.num_nodes), rowptr.diff()),
                  data.num_nodes)
    key = VariateKey(12345, 678, 0.5, True) if dependent else VariateKey(12345)
    seeds = data.train[:64]
    mapped, built = sampler.sample(edges, seeds, key=key), sampler.sample(graph, seeds, key=key)
    for ours, theirs in zip(mapped, built):
        for field in ("src_nodes", "rowptr", "col", "edge_ids"):
            assert torch.equal(getattr(ours, field), getattr(theirs, field)), field


def test_listing_reads_the_meta_and_never_generates(cache, capsys):
    from gnnforge.data import generated_meta
    from gnnforge.data._cli import _products_meta
    from gnnforge.data._registry import find_dataset

    source = find_dataset("synthetic-products")
    assert source.options["num_nodes"] == PRODUCTS_NODES
    assert _products_meta(source)["stats"]["num_edges"] == "not generated yet"
    assert generated_meta(SMALL) is None and cache == []
    load_synthetic_products(SMALL, progress=False)
    assert generated_meta(SMALL)["num_nodes"] == SMALL


def test_the_registry_graph_matches_the_maps_and_refuses_huge_sizes(cache):
    from gnnforge.data import load_dataset
    from gnnforge.data._sources import _synthetic_products

    graph = load_dataset("synthetic-products", num_nodes=SMALL, use_cache=False,
                         progress=False).graph
    data = load_synthetic_products(SMALL, progress=False)
    assert graph.num_edges == data.num_edges
    assert int(graph.node_data["train_mask"].sum()) == data.train.numel()
    assert torch.equal(graph.node_data["x"], data.x)
    import gnnforge.data._sources as sources

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sources, "PRODUCTS_GRAPH_MAX_EDGES", 10)
        with pytest.raises(ValueError, match="load_synthetic_products"):
            _synthetic_products(None, SMALL, 0)



def test_cli_lists_and_details_it_without_generating(cache, capsys, monkeypatch):
    from gnnforge.cli import main
    from gnnforge.data import _cli as cli_module
    from gnnforge.data import _registry
    from gnnforge.data._sources import builtin_sources

    only = [s for s in builtin_sources() if s.name == "synthetic-products"]
    monkeypatch.setattr(cli_module, "shared_datasets_dir", lambda: None)
    monkeypatch.setattr(_registry, "shared_datasets_dir", lambda: None)
    monkeypatch.setattr(_registry, "builtin_sources", lambda: only)
    assert main(["datasets"]) == 0 and main(["datasets", "synthetic-products"]) == 0
    out = capsys.readouterr().out
    assert "synthetic-products" in out and "not generated yet" in out and cache == []


def test_a_generated_row_shows_the_measured_sizes(cache):
    import dataclasses

    from gnnforge.data._cli import _products_meta, _row
    from gnnforge.data._registry import find_dataset

    source = find_dataset("synthetic-products")
    small = dataclasses.replace(source, options={**source.options, "num_nodes": SMALL})
    data = load_synthetic_products(SMALL, progress=False)
    row = _row(small, _products_meta(small))
    assert row[:5] == ["synthetic-products", "mapped-csr", 1, SMALL, data.num_edges]
    assert row[9] == int(np.diff(data.rowptr).max()) and row[10:] == [0, 0, 0]
