"""The fast CPU backend: tensors in, numba kernels (`_numba_kernels`) on their arrays.

Picks the kernel for the message shape (plain copy, per-edge scalar weight, or the general
broadcast kernel) and hands raw arrays over.
bfloat16/float16 data is computed in float32 and rounded once at the end.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch
from torch import Tensor

from gnnforge.ops import _numba_kernels as kernels
from gnnforge.ops._shapes import broadcast_offsets, output_feature_shape

__all__ = ["extreme_grad_cpu", "gsddmm_cpu", "gspmm_cpu", "mean_grad_cpu"]

_COMPUTE_DTYPES = (torch.float32, torch.float64)



def _no_index() -> Tensor:
    # A fresh tensor each time: custom-op outputs must not alias one another.
    return torch.empty(0, dtype=torch.int64)


# Below this many multiply-adds (about 0.1 ms on one core) a call runs on the calling
# thread only: waking the worker threads costs tens of microseconds on an idle machine
# and whole scheduler slices on a loaded one (measured: 2 us single-threaded vs 3-30 ms
# parallel for a 6-edge graph under load). On the quiet machine Pubmed F=16 (1.4M
# multiply-adds) took 0.40 ms on one thread and 0.20 ms on two, so the cut sits well
# below that (it was 2**21 when tuned under load, where parallel calls lose).
_PARALLEL_WORK = 2**18


def _launch(kernel, rows: int, work: int, *args) -> None:
    """Call `kernel(*args, num_chunks)` with equal-work chunks, a few per thread.

    numba runs as many threads as torch is set to use (`torch.set_num_threads`, which
    OMP_NUM_THREADS and our distributed launcher set), never more.
    """
    threads = _numba_threads()           # first: starting the pool must not move torch's
    threads = threads if work >= _PARALLEL_WORK else 1
    previous = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        kernel(*args, max(1, min(rows, 4 * threads)))
    finally:
        numba.set_num_threads(previous)


_pool_started: list[bool] = []


def _numba_threads() -> int:
    """Threads for a parallel numba kernel: torch's count, capped by numba's pool.

    Starting numba's OpenMP pool sets the process-wide OpenMP thread count to
    NUMBA_NUM_THREADS (all cores), which silently raised torch.get_num_threads() from 1
    to all cores under OMP_NUM_THREADS=1; the pool is started once here and torch's
    count put back.
    """
    if not _pool_started:
        wanted = torch.get_num_threads()
        numba.get_num_threads()                      # starts the pool
        if torch.get_num_threads() != wanted:
            torch.set_num_threads(wanted)
        _pool_started.append(True)
    return max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS))


def _compute(tensor: Tensor) -> Tensor:
    if tensor.dtype not in _COMPUTE_DTYPES:
        tensor = tensor.to(torch.float32)
    return tensor.contiguous()


def _rows(tensor: Tensor) -> Tensor:
    return tensor.reshape(tensor.shape[0], math.prod(tensor.shape[1:]))


def _scalar_weight_heads(lhs: Tensor, rhs: Tensor, out_shape: tuple[int, ...]) -> int | None:
    """H when rhs is a per-edge scalar per leading group of lhs's features, else None.

    True for rhs features (f1..fk, 1, ..., 1) with lhs features equal to the output
    (u_mul_e with an edge scalar, or per-head weights [E, H, 1] with x [N, H, D]).
    """
    if tuple(lhs.shape[1:]) != out_shape:
        return None
    rhs_shape = tuple(rhs.shape[1:])
    for split in range(len(rhs_shape) + 1):
        head, tail = rhs_shape[:split], rhs_shape[split:]
        if head == out_shape[:split] and all(size == 1 for size in tail):
            return math.prod(head)
    return None


def gspmm_cpu(rowptr: Tensor, col: Tensor, eids: Tensor, lhs: Tensor | None,
              rhs: Tensor | None, op: str, reduce: str,
              record_args: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """g-SpMM on CPU over CSR by destination; see `gnnforge.ops.gspmm` for the math.

    Returns:
        (out [M, *F], arg_lhs, arg_rhs): for max/min the [M, prod(F)] int64 source node
        and edge id that won each output (-1 for rows without in-edges), else empty (also
        for copy ops when not `record_args`).
    """
    num_rows = rowptr.numel() - 1
    if op in ("copy_lhs", "copy_rhs"):
        return _spmm_copy(rowptr, col if op == "copy_lhs" else eids,
                          lhs if op == "copy_lhs" else rhs, op, reduce, num_rows, record_args)
    out_shape = output_feature_shape(op, tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))
    dtype = torch.promote_types(lhs.dtype, rhs.dtype)
    if op == "mul" and reduce in ("sum", "mean"):
        heads = _scalar_weight_heads(lhs, rhs, out_shape)
        if heads is not None:
            return _spmm_scaled(rowptr, col, eids, lhs, rhs, heads, reduce, num_rows, dtype)
    out, arg_lhs, arg_rhs = _spmm_general(rowptr, col, eids, lhs, rhs, op, reduce, num_rows,
                                          out_shape, dtype)
    return (out, arg_lhs, arg_rhs) if record_args else (out, _no_index(), _no_index())


def _spmm_copy(rowptr, index, data, op, reduce, num_rows, record_args):
    x = _rows(_compute(data))
    out = torch.empty(num_rows, x.shape[1], dtype=x.dtype)
    extreme = reduce in ("max", "min") and record_args
    arg = torch.empty(num_rows, x.shape[1] if extreme else 0, dtype=torch.int64)
    if num_rows and x.shape[1]:
        _launch(kernels.spmm_copy, num_rows, index.numel() * x.shape[1], rowptr.numpy(),
                index.numpy(), x.numpy(), out.numpy(), arg.numpy(), kernels.REDUCE_CODES[reduce])
    out = out.reshape(num_rows, *data.shape[1:]).to(data.dtype)
    if not extreme:
        return out, _no_index(), _no_index()
    return (out, arg, _no_index()) if op == "copy_lhs" else (out, _no_index(), arg)


def _spmm_scaled(rowptr, col, eids, lhs, rhs, heads, reduce, num_rows, dtype):
    width = math.prod(lhs.shape[1:]) // max(heads, 1)
    x = _compute(lhs.to(dtype)).reshape(lhs.shape[0], heads, width)        # [N, H, D]
    weight = _compute(rhs.to(dtype)).reshape(rhs.shape[0], heads)
    weight = weight.index_select(0, eids.to(torch.int64)).contiguous()      # [nnz, H] CSR order
    out = torch.empty(num_rows, heads, x.shape[2], dtype=x.dtype)
    if num_rows and out.numel():
        _launch(kernels.spmm_scaled, num_rows, col.numel() * math.prod(x.shape[1:]), rowptr.numpy(),
                col.numpy(), weight.numpy(), x.numpy(), out.numpy(), reduce == "mean")
    out = out.reshape(num_rows, *lhs.shape[1:]).to(dtype)
    return out, _no_index(), _no_index()


def _operand_plan(op, lhs, rhs, out_shape, dtype):
    dot = op == "dot"
    lhs_offset = broadcast_offsets(tuple(lhs.shape[1:]), out_shape, dot)
    rhs_offset = broadcast_offsets(tuple(rhs.shape[1:]), out_shape, dot)
    length = lhs.shape[-1] if dot else 1
    return (_rows(_compute(lhs.to(dtype))), _rows(_compute(rhs.to(dtype))),
            lhs_offset, rhs_offset, length)


def _spmm_general(rowptr, col, eids, lhs, rhs, op, reduce, num_rows, out_shape, dtype):
    left, right, lhs_offset, rhs_offset, length = _operand_plan(op, lhs, rhs, out_shape, dtype)
    width = math.prod(out_shape)
    out = torch.empty(num_rows, width, dtype=left.dtype)
    extreme = reduce in ("max", "min")
    arg_lhs = torch.empty(num_rows, width if extreme else 0, dtype=torch.int64)
    arg_rhs = torch.empty_like(arg_lhs)
    if num_rows and width:
        _launch(kernels.spmm_general, num_rows, col.numel() * width * length, rowptr.numpy(),
                col.numpy(), eids.numpy(), left.numpy(), right.numpy(), lhs_offset.numpy(),
                rhs_offset.numpy(), length, kernels.OP_CODES[op], kernels.REDUCE_CODES[reduce],
                out.numpy(), arg_lhs.numpy(), arg_rhs.numpy())
    out = out.reshape(num_rows, *out_shape).to(dtype)
    if not extreme:
        return out, _no_index(), _no_index()
    return out, arg_lhs, arg_rhs


def extreme_grad_cpu(colptr: Tensor, row: Tensor, arg: Tensor, grad: Tensor,
                     num_src: int) -> Tensor:
    """Gradient of copy_u max/min w.r.t. x: a pull over CSC reading the recorded winners.

    Args:
        colptr, row: CSC by source of the graph (destinations ascending per source).
        arg: [M, K] int64 winning source per output feature (-1: no in-edges).
        grad: [M, K] gradient of the output.
        num_src: N, rows of the result.

    Returns:
        [N, K] in grad's compute dtype (bfloat16/float16 computed in float32, cast back).
    """
    values = _compute(grad)
    out = torch.empty(num_src, values.shape[1], dtype=values.dtype)
    if num_src and out.shape[1]:
        _launch(kernels.extreme_grad_copy, num_src, row.numel() * out.shape[1],
                colptr.numpy(), row.numpy(), arg.numpy(), values.numpy(), out.numpy())
    return out.to(grad.dtype)


def mean_grad_cpu(colptr: Tensor, row: Tensor, rowptr: Tensor, grad: Tensor,
                  num_src: int) -> Tensor:
    """Gradient of copy_u mean w.r.t. x: a CSC pull scaling each grad row by 1/deg(v).

    Args:
        colptr, row: CSC by source of the graph. rowptr: [M+1] its CSR row pointer.
        grad: [M, K] gradient of the output.
        num_src: N, rows of the result.

    Returns:
        [N, K] in grad's dtype.
    """
    values = _compute(grad)
    out = torch.empty(num_src, values.shape[1], dtype=values.dtype)
    if num_src and out.shape[1]:
        degree = np.diff(rowptr.numpy())  # [M]: one pass over M, not over M x K
        inverse = (1.0 / np.maximum(degree, 1)).astype(values.numpy().dtype)
        _launch(kernels.mean_grad_copy, num_src, row.numel() * out.shape[1],
                colptr.numpy(), row.numpy(), inverse, values.numpy(), out.numpy())
    return out.to(grad.dtype)


def gsddmm_cpu(lhs_row: Tensor, rhs_row: Tensor, lhs: Tensor, rhs: Tensor,
               op: str) -> Tensor:
    """out[e] = op(lhs[lhs_row[e]], rhs[rhs_row[e]]) for binary ops, on CPU.

    Args:
        lhs_row, rhs_row: [E] int row of each operand that edge e reads (source, destination
            or the edge itself, chosen by the caller from the targets).
    """
    out_shape = output_feature_shape(op, tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))
    dtype = torch.promote_types(lhs.dtype, rhs.dtype)
    num_edges = lhs_row.numel()
    if op == "dot" and lhs.shape[1:] == rhs.shape[1:]:
        return _sddmm_dot(lhs_row, rhs_row, lhs, rhs, out_shape, dtype)
    left, right, lhs_offset, rhs_offset, length = _operand_plan(op, lhs, rhs, out_shape, dtype)
    out = torch.empty(num_edges, math.prod(out_shape), dtype=left.dtype)
    if out.numel():
        _launch(kernels.sddmm_general, num_edges, out.numel() * length, lhs_row.numpy(),
                rhs_row.numpy(), left.numpy(), right.numpy(), lhs_offset.numpy(),
                rhs_offset.numpy(), length, kernels.OP_CODES[op], out.numpy())
    return out.reshape(num_edges, *out_shape).to(dtype)


def _sddmm_dot(lhs_row, rhs_row, lhs, rhs, out_shape, dtype):
    width = lhs.shape[-1]
    heads = math.prod(lhs.shape[1:-1])
    left = _compute(lhs.to(dtype)).reshape(lhs.shape[0], heads, width)   # [N, H, D]
    right = _compute(rhs.to(dtype)).reshape(rhs.shape[0], heads, width)
    out = torch.empty(lhs_row.numel(), left.shape[1], dtype=left.dtype)
    if out.numel() and width:
        _launch(kernels.sddmm_dot, out.shape[0], out.numel() * width, lhs_row.numpy(),
                rhs_row.numpy(), left.numpy(), right.numpy(), out.numpy())
    elif out.numel():
        out.zero_()
    return out.reshape(lhs_row.numel(), *out_shape).to(dtype)
