"""The native CPU backend's copy-reduce kernels: tensors in, `_native_src/spmm.cpp` on them.

The library covers the copy-reduce g-SpMMs here (copy_u / copy_e with sum, mean, max, min;
the backward of copy_u-sum is the same kernel on the CSC) and the CSC-pull gradients of
copy_u mean and max/min; the binary-message g-SpMMs and the g-SDDMMs are
`_native_binary`'s, beside this module, not below it. `_cpu_kernels` puts the two
together and runs numba's kernels for the few cases neither covers (`spmm_covered`,
`_native_binary.sddmm_covered`, ...), so `native` is a complete backend while this one
imports no other. Same contracts as `_cpu`; float32/float64 natively, bfloat16/float16
computed in float32 and rounded once.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from gnnforge.ops._buffers import pooled_empty
from gnnforge.ops._native_build import load

__all__ = ["available", "extreme_grad_native", "gspmm_deep", "gspmm_native",
           "gspmm_source_blocked", "mean_grad_native", "source_blocks_cover", "spmm_covered",
           "supports"]

_DTYPE_CODES = {torch.float32: 0, torch.float64: 1}
_REDUCE_CODES = {"sum": 0, "mean": 1, "max": 2, "min": 3}

# Below this many multiply-adds a call runs on the calling thread: waking the OpenMP
# workers costs more than it saves (measured in docs/kernels.md).
_PARALLEL_WORK = 2**18
# The float32 max/min kernels keep each lane's winning row in a 32-bit lane beside the
# value; rows past this (a source or edge count of 2^31 and more) are not covered.
_FLOAT32_WINNER_LIMIT = 2**31 - 1
# The max/min gradient's column scatter runs on one thread for rows this wide (measured).
_SERIAL_SCATTER_BYTES = 1024


# Kernel primitives (as `_kernel_class` names them) the library computes itself (add and
# mul, and the g-SDDMMs: `_native_binary`); the rest of the backend's ops (g-SpMM with dot)
# run numba's kernels (`_cpu_kernels`), so native variants are no candidates for them.
_NATIVE_PRIMITIVES = frozenset({"copy_lhs", "copy_rhs", "mean_grad", "extreme_grad", "add",
                                "mul", "add_heads", "mul_heads", "sddmm_add", "sddmm_mul",
                                "sddmm_dot"})


def supports(primitive: str, reduce: str) -> bool:
    """True when the library has its own kernel for `primitive` (any reduce)."""
    return primitive in _NATIVE_PRIMITIVES


def spmm_covered(lhs: Tensor | None, rhs: Tensor | None, op: str, reduce: str) -> bool:
    """Whether `gspmm_native` computes this copy-reduce call (else numba's kernel runs it)."""
    data = lhs if op == "copy_lhs" else rhs
    return not (reduce in ("max", "min") and data.dtype != torch.float64
                and data.shape[0] > _FLOAT32_WINNER_LIMIT)


def available(variant: str | None = None) -> bool:
    """True when the library (one variant; default the widest) is built and loaded."""
    return load(variant) is not None


def _threads(work: int) -> int:
    return torch.get_num_threads() if work >= _PARALLEL_WORK else 1


def _extreme_grad_threads(edges: int, width: int, dtype: torch.dtype) -> int:
    """Threads for the max/min gradient (a column-split scatter for rows of >= 64 bytes).

    Rows of 1 KiB or more (F >= 256 float32) run on one thread: the second thread was
    measured slower there (kernel alone, int32 winners, 2 threads vs 1: Pubmed F=256
    7.47 vs 6.86 ms, R-MAT F=256 75.9 vs 66.2 ms), while at F=64 it helps on R-MAT
    (15.3 vs 17.6 ms); docs/kernels.md. Small calls run on one thread like every kernel.
    """
    if width * (4 if dtype == torch.float32 else 8) >= _SERIAL_SCATTER_BYTES:
        return 1
    return _threads(edges * width)


def _empty(rows: int, width: int, dtype: torch.dtype) -> Tensor:
    return pooled_empty((rows, width), dtype)


def _rows(tensor: Tensor) -> Tensor:
    if tensor.dtype not in _DTYPE_CODES:
        tensor = tensor.to(torch.float32)
    return tensor.reshape(tensor.shape[0], math.prod(tensor.shape[1:])).contiguous()


def gspmm_native(rowptr: Tensor, col: Tensor, eids: Tensor, lhs: Tensor | None,
                 rhs: Tensor | None, op: str, reduce: str,
                 record_args: bool = True, variant: str | None = None
                 ) -> tuple[Tensor, Tensor, Tensor]:
    """Copy-reduce g-SpMM on CPU (op 'copy_lhs' or 'copy_rhs'); same contract as
    `_cpu.gspmm_cpu`, but max/min winners are in the index dtype, for calls `spmm_covered`
    accepts (binary ops: `_native_binary.gspmm_binary_native`).

    `variant` names the instruction-set build of the library (`_native_build`); None is
    the host's widest.
    """
    if op == "copy_lhs":
        data, index = lhs, col
    else:
        data, index = rhs, eids
    # The common case (2-D contiguous float32/64) goes straight through: this path is
    # most of the cost of a small call (docs/kernels.md).
    plain = data.dim() == 2 and data.dtype in _DTYPE_CODES and data.is_contiguous()
    x = data if plain else _rows(data)
    rows, width = rowptr.shape[0] - 1, x.shape[1]
    out = _empty(rows, width, x.dtype)
    extreme = record_args and reduce in ("max", "min")
    # Winners are recorded in the index dtype: int32 whenever the graph's indices are
    # (half the bytes of int64 for the forward to write and the gradient to read).
    arg = (_empty(rows, width, rowptr.dtype) if extreme
           else torch.empty(0, dtype=torch.int64))
    if rows and width:
        load(variant).gf_spmm_copy(_DTYPE_CODES[x.dtype], rowptr.dtype == torch.int64,
                            rowptr.data_ptr(), index.data_ptr(), x.data_ptr(), out.data_ptr(),
                            arg.data_ptr() if extreme else None, rows, width,
                            _REDUCE_CODES[reduce], _threads(index.shape[0] * width))
    if not plain:
        out = out.reshape(rows, *data.shape[1:])
        if out.dtype != data.dtype:
            out = out.to(data.dtype)
    empty = torch.empty(0, dtype=torch.int64)
    if not extreme:
        return out, arg, empty
    return (out, arg, empty) if op == "copy_lhs" else (out, empty, arg)


def source_blocks_cover(op: str, reduce: str) -> bool:
    """Whether `gspmm_source_blocked` computes this call (copy_u sum and mean)."""
    return op == "copy_lhs" and reduce in ("sum", "mean")


def gspmm_source_blocked(rowptr: Tensor, col: Tensor, lhs: Tensor, reduce: str,
                         block_bytes: int, variant: str | None = None) -> Tensor:
    """copy_u sum (mean) over `lhs` in passes over ranges of source rows of at most
    `block_bytes` each: the output of `gspmm_native` with the same bits.

    A one-pass pull gathers rows from all of `lhs`; where `lhs` is larger than the
    last-level cache nearly every gather misses it. One pass per source range gathers from
    that range only (it stays in cache when `block_bytes` fits) at the price of reading and
    writing the output once per pass: on synthetic-products 2^21 at F=64 (512 MiB of
    rows, 260 MiB of L3) eight ranges ran 1.6x faster than one pass (docs/kernels.md).
    Each row's in-edges are still added in their stored order, so the bits are those of
    the one-pass kernel.
    """
    def run(x: Tensor, out: Tensor) -> None:
        block_rows = max(1, block_bytes // max(1, x.shape[1] * x.element_size()))
        load(variant).gf_spmm_sum_blocked(
            _DTYPE_CODES[x.dtype], rowptr.dtype == torch.int64, rowptr.data_ptr(),
            col.data_ptr(), x.data_ptr(), out.data_ptr(), out.shape[0], x.shape[1],
            int(reduce == "mean"), _threads(col.shape[0] * x.shape[1]), x.shape[0], block_rows)
    return _copy_sum(lhs, rowptr.shape[0] - 1, run)


def gspmm_deep(rowptr: Tensor, col: Tensor, lhs: Tensor, reduce: str,
               variant: str | None = None) -> Tensor:
    """copy_u sum (mean) over `lhs` with the deep prefetch: rows twice as many in-edges
    ahead and into L2 (`gf_spmm_sum_deep`). The output of `gspmm_native` with the same bits
    (the same adds in the same order); faster where `lhs` is far past the last-level cache,
    slower where the cache holds it, so the trials time it per graph (docs/kernels.md)."""
    def run(x: Tensor, out: Tensor) -> None:
        load(variant).gf_spmm_sum_deep(
            _DTYPE_CODES[x.dtype], rowptr.dtype == torch.int64, rowptr.data_ptr(),
            col.data_ptr(), x.data_ptr(), out.data_ptr(), out.shape[0], x.shape[1],
            int(reduce == "mean"), _threads(col.shape[0] * x.shape[1]))
    return _copy_sum(lhs, rowptr.shape[0] - 1, run)


def _copy_sum(lhs: Tensor, rows: int, run: Callable[[Tensor, Tensor], None]) -> Tensor:
    """[rows, *lhs.shape[1:]] in lhs's dtype from `run(x, out)`, which fills out [rows, F]
    from x, lhs as 2-D contiguous float32/64 rows (not called when rows or F is 0)."""
    x = lhs if lhs.dim() == 2 and lhs.dtype in _DTYPE_CODES and lhs.is_contiguous() \
        else _rows(lhs)
    out = _empty(rows, x.shape[1], x.dtype)
    if rows and x.shape[1]:
        run(x, out)
    if x is not lhs:
        out = out.reshape(rows, *lhs.shape[1:])
        if out.dtype != lhs.dtype:
            out = out.to(lhs.dtype)
    return out


def mean_grad_native(colptr: Tensor, row: Tensor, rowptr: Tensor, grad: Tensor,
                     num_src: int, variant: str | None = None,
                     block_bytes: int | None = None) -> Tensor:
    """Gradient of copy_u mean w.r.t. x; same contract as `_cpu.mean_grad_cpu`.

    `block_bytes`: gather from ranges of rows of `grad` of at most that many bytes, one
    pass each, as `gspmm_source_blocked` does (the same bits); None for one pass.
    """
    values = _rows(grad)
    out = _empty(num_src, values.shape[1], values.dtype)
    block_rows = 0 if block_bytes is None else \
        max(1, block_bytes // max(1, values.shape[1] * values.element_size()))
    if num_src and out.shape[1]:
        load(variant).gf_mean_grad(_DTYPE_CODES[values.dtype], colptr.dtype == torch.int64,
                            colptr.data_ptr(), row.data_ptr(), rowptr.data_ptr(),
                            values.data_ptr(), out.data_ptr(), num_src, rowptr.shape[0] - 1,
                            out.shape[1], _threads(row.numel() * out.shape[1]), block_rows)
    return out.to(grad.dtype)


def extreme_grad_native(colptr: Tensor, row: Tensor, arg: Tensor, grad: Tensor,
                        num_src: int, variant: str | None = None) -> Tensor:
    """Gradient of copy_u max/min w.r.t. x; same contract as `_cpu.extreme_grad_cpu`.

    `arg` may be int32 or int64 (the kernel reads it in the index dtype of colptr/row).
    """
    values = _rows(grad)
    arg = arg.to(colptr.dtype).contiguous()
    out = _empty(num_src, values.shape[1], values.dtype)
    if num_src and out.shape[1]:
        load(variant).gf_extreme_grad(_DTYPE_CODES[values.dtype], colptr.dtype == torch.int64,
                               colptr.data_ptr(), row.data_ptr(), arg.data_ptr(),
                               values.data_ptr(), out.data_ptr(), num_src, arg.shape[0],
                               out.shape[1],
                               _extreme_grad_threads(row.numel(), out.shape[1], values.dtype))
    return out.to(grad.dtype)

