"""Representative inputs on which `_calibration` times the candidates of a kernel class.

One seeded power-law graph (2^14 nodes, 2^17 edges: in-degrees from a Zipf-like law with
a few hubs, sources skewed the same way, like the R-MAT and social graphs the kernels
serve) in both index dtypes, and features of the class's representative width. Small
enough that a class times in well under a second, large enough (features of 0.5-16 MiB,
past L2) that the memory behaviour, not call overhead, decides.

The kernels to run are handed in (`CandidateKernels`: `_cpu_kernels` is one), so the
calibration imports no backend and can be tested with fake kernels.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Protocol

import torch
from torch import Tensor

from gnnforge.ops._kernel_class import (
    REPRESENTATIVE_BYTES,
    REPRESENTATIVE_EDGES,
    REPRESENTATIVE_NODES,
    KernelClass,
    calibration_heads,
    representative_size,
)

__all__ = ["CandidateKernels", "runner"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}
_INDEX = {"int32": torch.int32, "int64": torch.int64}


@functools.lru_cache(maxsize=2)
def _graph(index: str, nodes: int = REPRESENTATIVE_NODES,
           edges: int = REPRESENTATIVE_EDGES) -> dict[str, Tensor]:
    """CSR, CSC and edge ids of a representative graph in index dtype `index`."""
    generator = torch.Generator().manual_seed(0)
    skew = torch.arange(1, nodes + 1, dtype=torch.float64).pow(-0.8)   # Zipf-like weights
    dst = torch.multinomial(skew, edges, replacement=True, generator=generator)
    src = torch.multinomial(skew, edges, replacement=True, generator=generator)
    src = torch.randperm(nodes, generator=generator)[src]   # source hubs apart from dst's
    arrays = {}
    for kind, (major, minor) in {"csr": (dst, src), "csc": (src, dst)}.items():
        order = torch.argsort(major * nodes + minor)
        counts = torch.bincount(major, minlength=nodes)
        pointer = torch.zeros(nodes + 1, dtype=torch.int64)
        pointer[1:] = torch.cumsum(counts, 0)
        arrays[kind] = (pointer.to(_INDEX[index]), minor[order].to(_INDEX[index]),
                        order.to(_INDEX[index]))
    return arrays


class CandidateKernels(Protocol):
    """The candidates of a kernel class and each one's kernels, by name: what calibration
    times. The layer above hands them in (the module `_cpu_kernels` is one)."""

    def candidates(self, kernel_class: KernelClass) -> list[str]: ...
    def fixed_spmm(self, name: str) -> Callable: ...
    def fixed_sddmm(self, name: str) -> Callable: ...
    def fixed_mean_grad(self, name: str) -> Callable: ...
    def fixed_extreme_grad(self, name: str) -> Callable: ...
    def fixed_gather(self, name: str) -> Callable: ...


def _features(rows: int, kernel_class: KernelClass) -> Tensor:
    return _seeded_features(rows, kernel_class.dtype, kernel_class.width_class)


@functools.lru_cache(maxsize=4)
def _seeded_features(rows: int, dtype_name: str, width_class: int) -> Tensor:
    """Seeded features, made once per shape: drawing them took half of `tune()`'s time."""
    dtype = _DTYPES[dtype_name]
    row_bytes = REPRESENTATIVE_BYTES[width_class]
    width = max(1, row_bytes // torch.empty(0, dtype=dtype).element_size())
    generator = torch.Generator().manual_seed(1)
    return torch.randn(rows, width, generator=generator, dtype=dtype)


def runner(name: str, kernel_class: KernelClass,
           kernels: CandidateKernels) -> Callable[[], object]:
    """A no-argument function running candidate `name` of `kernels` on `kernel_class`'s
    input once."""
    graph = _graph(kernel_class.index, *representative_size(kernel_class))
    rowptr, col, eids = graph["csr"]
    colptr, row, _ = graph["csc"]
    nodes, edges = rowptr.shape[0] - 1, col.shape[0]
    primitive, reduce = kernel_class.primitive, kernel_class.reduce
    if primitive == "mean_grad":
        grad = _features(nodes, kernel_class)
        kernel = kernels.fixed_mean_grad(name)
        return lambda: kernel(colptr, row, rowptr, grad, nodes)
    if primitive == "extreme_grad":
        grad = _features(nodes, kernel_class)
        values = _features(nodes, kernel_class)
        _, arg, _ = kernels.fixed_spmm("numba")(rowptr, col, eids, values, None, "copy_lhs",
                                                "max", True)
        arg = arg.to(rowptr.dtype)
        kernel = kernels.fixed_extreme_grad(name)
        return lambda: kernel(colptr, row, arg, grad, nodes)
    if primitive == "gather_rows":  # the in-edge sources as rows to gather, in edge order
        features, kernel = _features(nodes, kernel_class), kernels.fixed_gather(name)
        return lambda: kernel(features, col)
    if primitive.startswith("sddmm_"):
        return _sddmm_runner(kernels.fixed_sddmm(name), kernel_class, col,
                             _destinations(rowptr))
    kernel = kernels.fixed_spmm(name)
    if primitive.endswith("_heads"):
        return _heads_runner(kernel, kernel_class, rowptr, col, eids)
    lhs = None if primitive == "copy_rhs" else _features(nodes, kernel_class)
    rhs = None if primitive == "copy_lhs" else _features(edges, kernel_class)
    record = reduce in ("max", "min")
    return lambda: kernel(rowptr, col, eids, lhs, rhs, primitive, reduce, record)


def _destinations(rowptr: Tensor) -> Tensor:
    """The destination of each edge of a CSR, in its order."""
    return torch.repeat_interleave(torch.arange(rowptr.shape[0] - 1, dtype=rowptr.dtype),
                                   (rowptr[1:] - rowptr[:-1]).long())


def _sddmm_runner(kernel: Callable, kernel_class: KernelClass, sources: Tensor,
                  destinations: Tensor) -> Callable[[], object]:
    """u_OP_v over the representative graph's edges (source rows, destination rows)."""
    features = _features(representative_size(kernel_class)[0], kernel_class)
    op = kernel_class.primitive.removeprefix("sddmm_")
    return lambda: kernel(sources, destinations, features, features, op)


def _heads_runner(kernel: Callable, kernel_class: KernelClass, rowptr: Tensor, col: Tensor,
                  eids: Tensor) -> Callable[[], object]:
    """GAT's aggregation: [N, H, D] node rows times per-head edge weights [E, H, 1], one
    head's row D of the class's representative width (`calibration_heads`)."""
    nodes, edges = rowptr.shape[0] - 1, col.shape[0]
    dtype = _DTYPES[kernel_class.dtype]
    row_bytes = REPRESENTATIVE_BYTES[kernel_class.width_class]
    depth = max(2, row_bytes // dtype.itemsize)
    heads = calibration_heads(kernel_class)
    generator = torch.Generator().manual_seed(2)
    lhs = torch.randn(nodes, heads, depth, generator=generator, dtype=dtype)
    weights = torch.rand(edges, heads, 1, generator=generator, dtype=dtype)
    op = kernel_class.primitive.removesuffix("_heads")
    record = kernel_class.reduce in ("max", "min")
    return lambda: kernel(rowptr, col, eids, lhs, weights, op, kernel_class.reduce, record)
