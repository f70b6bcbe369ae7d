"""g-SpMM on tensors with the Triton kernels: operand layout, work list, launches.

Same contract as the CPU backends (`_cpu.gspmm_cpu`), so `_custom_ops` wraps it with the
same autograd. Operands of mixed float types are promoted first; sums accumulate in
float32 (float64 for float64 data) and bfloat16/float16 results are rounded once.
`dot` messages are one g-SDDMM over the CSR entries followed by a copy-reduce here (the
package's `gspmm_triton` composes them): the message tensor is [nnz, *F, 1], the size of
one scalar per edge and head.
"""

from __future__ import annotations

import functools
import math

import torch
import triton
from torch import Tensor

from gnnforge.ops._shapes import output_feature_shape
from gnnforge.ops._triton._launch import (
    accumulator,
    check_runnable,
    device_offsets,
    edge_block,
    feature_block,
    no_index,
    store_dtype,
)
from gnnforge.ops._triton._schedule import cached_row_schedule
from gnnforge.ops._triton._spmm_kernels import OP_CODES, REDUCE_CODES, spmm_pull

__all__ = ["PIECE_EDGES", "gspmm_triton", "spmm_launch"]

# Most CSR entries one program reduces before a row is split (see `_schedule`): long
# enough that a split row's partials are few (scratch <= 2 * nnz / PIECE_EDGES rows),
# short enough that a hub row of 10^5 edges becomes hundreds of parallel items.
PIECE_EDGES = 512
_BLOCK_SLOTS = 32  # partials folded per step of the combine


def gspmm_triton(rowptr: Tensor, col: Tensor, eids: Tensor, lhs: Tensor | None,
                 rhs: Tensor | None, op: str, reduce: str,
                 record_args: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """g-SpMM over CSR by destination on the GPU; see `gnnforge.ops.gspmm` for the math.

    Args:
        rowptr, col, eids: CSR by destination (int32 or int64, one dtype).
        lhs: [N, *F_u] source data or None. rhs: [E, *F_e] edge data (edge-id order) or None.
        op: copy_lhs, copy_rhs, add or mul (sub/div are rewritten by the caller; dot is
            a g-SDDMM then a copy-reduce: the package's `gspmm_triton`).
        reduce: sum, mean, max or min.
        record_args: record max/min winners (needed only for a gradient).

    Returns:
        (out [M, *F], arg_lhs, arg_rhs): for max/min with record_args the [M, prod(F)]
        int64 source node and edge id that won each output (-1 for rows without
        in-edges; only the ids of the operands the op reads), else empty tensors.
    """
    device = rowptr.device
    out_shape = output_feature_shape(op, None if lhs is None else tuple(lhs.shape[1:]),
                                     None if rhs is None else tuple(rhs.shape[1:]))
    used = [t for t in (lhs, rhs) if t is not None]
    dtype = functools.reduce(torch.promote_types, [t.dtype for t in used])
    offsets = [None if t is None
               else device_offsets(tuple(t.shape[1:]), out_shape, False, device)
               for t in (lhs, rhs)]
    out, arg_lhs, arg_rhs = spmm_launch(rowptr, col, eids, lhs, rhs, op, reduce,
                                        record_args and reduce in ("max", "min"),
                                        math.prod(out_shape), *offsets, dtype)
    return out.reshape(out.shape[0], *out_shape), arg_lhs, arg_rhs


def spmm_launch(rowptr: Tensor, col: Tensor, eids: Tensor, lhs: Tensor | None,
                rhs: Tensor | None, op: str, reduce: str, record: bool, width: int,
                lhs_offsets: Tensor | None, rhs_offsets: Tensor | None,
                dtype: torch.dtype) -> tuple[Tensor, Tensor, Tensor]:
    """Run the pull kernels: out [M, width] in `dtype` and the winners when `record`.

    `op` may also be 'exp_sub_row' (edge softmax: exp(rhs[e] - lhs[row]), lhs [M, width]).
    Offsets None mean output feature f reads operand column f.
    """
    device = rowptr.device
    rows, entries = rowptr.numel() - 1, col.numel()
    out = torch.empty(rows, width, dtype=store_dtype(dtype, device), device=device)
    arg_lhs = (torch.empty(rows, width, dtype=torch.int64, device=device)
               if record and lhs is not None and op != "exp_sub_row" else no_index(device))
    arg_rhs = (torch.empty(rows, width, dtype=torch.int64, device=device)
               if record and rhs is not None else no_index(device))
    if rows == 0 or width == 0:
        return out.to(dtype), arg_lhs, arg_rhs
    check_runnable(spmm_pull, out)
    left = _operand(lhs, dtype, out)
    right = _operand(rhs, dtype, out)
    schedule = cached_row_schedule(rowptr, entries, PIECE_EDGES)
    acc = accumulator(dtype)
    scratch_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    partial = torch.empty(schedule.num_slots, width, dtype=scratch_dtype, device=device)
    partial_arg = (torch.empty(schedule.num_slots, width, dtype=torch.int64, device=device)
                   if record else partial)
    block_f = feature_block(width)
    feature_blocks = triton.cdiv(width, block_f)
    common = dict(OP=OP_CODES[op], REDUCE=REDUCE_CODES[reduce], RECORD=record, ACC=acc,
                  LHS_OFFSETS=lhs_offsets is not None, RHS_OFFSETS=rhs_offsets is not None,
                  BLOCK_F=block_f)
    operands = (left, right, _or(lhs_offsets, out), _or(rhs_offsets, out),
                out, _or(arg_lhs, out), _or(arg_rhs, out), partial, partial_arg,
                PIECE_EDGES, width, left.shape[1], right.shape[1])
    spmm_pull[(schedule.item_row.numel(), feature_blocks)](
        rowptr, col, eids, schedule.item_row, schedule.item_start, schedule.item_slot,
        schedule.first_slot, *operands, COMBINE=False,
        BLOCK_E=edge_block(entries / rows, block_f), **common)
    if schedule.split_rows.numel():
        spmm_pull[(schedule.split_rows.numel(), feature_blocks)](
            rowptr, col, eids, schedule.split_rows, schedule.split_rows, schedule.no_slot,
            schedule.first_slot, *operands, COMBINE=True, BLOCK_E=_BLOCK_SLOTS, **common)
    return out.to(dtype), arg_lhs, arg_rhs


def _operand(tensor: Tensor | None, dtype: torch.dtype, placeholder: Tensor) -> Tensor:
    """[R, K] contiguous in `dtype`; an unused operand becomes a placeholder pointer."""
    if tensor is None:
        return placeholder
    tensor = tensor.to(dtype)
    return tensor.reshape(tensor.shape[0], math.prod(tensor.shape[1:])).contiguous()


def _or(tensor: Tensor | None, placeholder: Tensor) -> Tensor:
    # Kernels never dereference the pointers of disabled operands; any tensor will do.
    return placeholder if tensor is None or tensor.numel() == 0 else tensor
