"""synthetic-products in the user cache: generated once, then read into memory or mapped.

`load_synthetic_products(num_nodes, seed)` returns a `MappedProducts`: the CSR by
destination (int32 `col`), the features and the labels from the files `generate_products`
wrote. Where rowptr, col and x fit comfortably in memory they are read into it once,
front to back, in transparent huge pages (`_in_memory.read_into_memory`; `prefetch`);
where they do not they stay copy-on-write memory maps, so loading costs no copy of the
structure and sampling reads only the pages it touches. The folder is
`cache_dir()/synthetic-products/n{num_nodes}-seed{seed}`; a folder whose meta.json names
another generator version or other parameters is regenerated. A generation writes into a
temporary folder renamed into place after meta.json (the last file) is written, so an
interrupted one is never taken for a complete dataset.

The maps of `col` and `x` are advised random access (madvise MADV_RANDOM): minibatches
read scattered neighbour lists and 400-byte feature rows, and the kernel's default
readahead would read up to 128 KiB around each missed page, most of it never used, which
matters once the files do not fit in memory (benchmarks/larger_than_memory.py measures
it). `GNNFORGE_MMAP_ADVICE=normal` keeps the kernel's default. Without readahead a cold page
cache costs one storage read per page touched, which is one more reason to read the files
in where they fit.
"""

from __future__ import annotations

import json
import mmap
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from gnnforge.data._errors import DataFormatError
from gnnforge.data._in_memory import Warmup, read_into_memory
from gnnforge.data._paths import cache_dir
from gnnforge.data._synthetic_products import (GENERATOR_VERSION, PRODUCTS_NODES, ProductsSpec,
                                               generate_products)

__all__ = ["MappedProducts", "generated_meta", "load_synthetic_products", "products_folder"]

_ARRAYS = ("rowptr", "col", "x", "y", "train", "val", "test")
_RANDOM_ACCESS = ("col", "x")             # read in scattered pieces by every minibatch
_IN_MEMORY = ("rowptr", "col", "x")       # read in where they fit; the rest is copied
ADVICE_ENV = "GNNFORGE_MMAP_ADVICE"


@dataclass(frozen=True)
class MappedProducts:
    """A synthetic-products graph backed by files.

    Attributes:
        rowptr: [N + 1] int32 (int64 past 2**31 edges), CSR by destination.
        col: [E] int32: source of each in-edge; rows sorted. The graph is symmetric, so
            these are also the out-neighbours.
        x: [N, F] float32 tensor. rowptr, col and x are in memory (huge pages) when
            `warmup` read them, else copy-on-write memory maps of their files.
        y: [N] int64 labels (converted from the stored int16: 8 bytes per node).
        train, val, test: sorted int64 node ids.
        meta: meta.json (parameters, generator version, sizes, degree statistics).
        folder: where the files are.
        warmup: whether the load read rowptr, col and x into memory, and how long it
            took (`load_synthetic_products`' `prefetch`).
    """

    rowptr: np.ndarray
    col: np.ndarray
    x: Tensor
    y: Tensor
    train: Tensor
    val: Tensor
    test: Tensor
    meta: dict[str, Any]
    folder: Path
    warmup: Warmup

    @property
    def num_nodes(self) -> int:
        return int(self.rowptr.shape[0] - 1)

    @property
    def num_edges(self) -> int:
        return int(self.col.shape[0])

    @property
    def data_bytes(self) -> int:
        """Bytes of structure (rowptr, col) and features (x)."""
        return int(self.rowptr.nbytes + self.col.nbytes + self.x.numel() * self.x.element_size())


def products_folder(spec: ProductsSpec) -> Path:
    """Where the dataset of `spec` lives (one folder per node count and seed)."""
    return cache_dir() / "synthetic-products" / f"n{spec.num_nodes}-seed{spec.seed}"


def load_synthetic_products(num_nodes: int = PRODUCTS_NODES, seed: int = 0, *,
                            progress: bool | None = None,
                            prefetch: bool | None = None) -> MappedProducts:
    """The synthetic-products graph of `num_nodes` nodes, generated on first use.

    Args:
        num_nodes: 1,024 .. 2**31 - 1 (default: ogbn-products' 2,449,029).
        seed: seed of every draw.
        progress: the generation's and the prefetch's progress bars (None: on a
            terminal only).
        prefetch: read rowptr, col and x into memory (front to back, in huge pages) instead
            of mapping them: True always, False never, None (default) when they take at
            most half of the memory this process may use (MemAvailable and its cgroups'
            headroom). The result's `warmup` says which.

    Raises:
        ValueError / TypeError: a bad `num_nodes` or `seed` (named).
        DataFormatError: a complete-looking folder whose files disagree with its meta.
    """
    spec = ProductsSpec(num_nodes=num_nodes, seed=seed)
    folder = products_folder(spec)
    if _current(folder, spec) is None:
        _generate(spec, folder, progress)
    return _open(folder, prefetch, progress)


def generated_meta(num_nodes: int = PRODUCTS_NODES, seed: int = 0) -> dict[str, Any] | None:
    """The meta of the generated dataset, or None when it is not (or not currently)
    generated; generates nothing."""
    spec = ProductsSpec(num_nodes=num_nodes, seed=seed)
    meta = _current(products_folder(spec), spec)
    return None if meta is None else {**meta, "folder": str(products_folder(spec))}


def _current(folder: Path, spec: ProductsSpec) -> dict[str, Any] | None:
    """The folder's meta when it was written by this generator version for `spec`."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    if meta.get("version") != GENERATOR_VERSION or meta.get("spec") != spec.as_dict():
        return None
    return meta


def _generate(spec: ProductsSpec, folder: Path, progress: bool | None) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(folder)
    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        generate_products(spec, tmp, progress=progress)
        if folder.exists():  # another version or other parameters: replaced
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _remove_abandoned(folder: Path) -> None:
    """Temporary folders of generations whose process is gone (killed mid-way)."""
    for tmp in folder.parent.glob(f"{folder.name}.tmp*"):
        pid = tmp.name.rsplit(".tmp", 1)[1]
        if not pid.isdigit() or not _alive(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _open(folder: Path, prefetch: bool | None, progress: bool | None) -> MappedProducts:
    meta = json.loads((folder / "meta.json").read_text())
    # Copy-on-write maps: writable for torch.from_numpy, and nothing reaches the files.
    arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="c") for name in _ARRAYS}
    _check(folder, meta, arrays)
    advice = map_advice()  # checked whether or not the maps stay
    read, warmup = read_into_memory([folder / f"{name}.npy" for name in _IN_MEMORY],
                                    prefetch=prefetch, progress=progress)
    if read is not None:
        arrays.update(zip(_IN_MEMORY, read))
    else:
        for name in _RANDOM_ACCESS:
            _advise(arrays[name], advice)
    return MappedProducts(
        rowptr=arrays["rowptr"], col=arrays["col"], x=torch.from_numpy(arrays["x"]),
        y=torch.from_numpy(np.asarray(arrays["y"], dtype=np.int64)),
        **{name: torch.from_numpy(np.asarray(arrays[name], dtype=np.int64))
           for name in ("train", "val", "test")},
        meta=meta, folder=folder, warmup=warmup)


def map_advice() -> int | None:
    """The madvise value for the randomly read maps: MADV_RANDOM unless
    GNNFORGE_MMAP_ADVICE=normal; None where the platform has no madvise.

    Raises:
        ValueError: when GNNFORGE_MMAP_ADVICE is set to something else (named).
    """
    value = os.environ.get(ADVICE_ENV, "random")
    if value not in ("random", "normal"):
        raise ValueError(f"{ADVICE_ENV} must be 'random' or 'normal', got {value!r}")
    return getattr(mmap, f"MADV_{value.upper()}", None)


def _advise(array: np.ndarray, advice: int | None) -> None:
    """madvise the map under `array` (an np.memmap), when there is one and a value."""
    mapped = getattr(array, "_mmap", None)
    if advice is not None and mapped is not None and len(mapped):
        mapped.madvise(advice)


def _check(folder: Path, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Shapes and dtypes against the meta, and the CSR's bounds (cheap: no pass over col
    beyond its first and last rows)."""
    n, e, spec = meta["num_nodes"], meta["num_edges"], meta["spec"]
    expected = {"rowptr": ((n + 1,), None), "col": ((e,), np.int32),
                "x": ((n, spec["num_features"]), np.float32), "y": ((n,), np.int16),
                **{name: ((size,), np.int64) for name, size in meta["split"].items()}}
    for name, (shape, dtype) in expected.items():
        array = arrays[name]
        if array.shape != shape or (dtype is not None and array.dtype != dtype):
            raise DataFormatError(folder / f"{name}.npy",
                                  f"shape {array.shape} dtype {array.dtype}, meta.json says "
                                  f"{shape} {dtype}; delete {folder} to regenerate it")
    rowptr = arrays["rowptr"]
    if rowptr[0] != 0 or rowptr[-1] != e:
        raise DataFormatError(folder / "rowptr.npy", f"runs {rowptr[0]}..{rowptr[-1]}, "
                              f"expected 0..{e}; delete {folder} to regenerate it")
