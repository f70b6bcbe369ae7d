"""Triton g-SDDMM: one output row per edge, `out[e] = op(lhs[lhs_row[e]], rhs[rhs_row[e]])`.

Edges are independent, so an edge-parallel grid over blocks of BLOCK_E edges is already
balanced whatever the degrees. add/mul read a [BLOCK_E, BLOCK_F] tile of each operand at
the broadcast columns of every output feature; dot gives each program one output feature
(one head) and reduces its contiguous last dimension BLOCK_D at a time.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch import Tensor

from gnnforge.ops._shapes import output_feature_shape
from gnnforge.ops._triton._launch import (
    accumulator,
    check_runnable,
    device_offsets,
    feature_block,
    store_dtype,
)

__all__ = ["gsddmm_triton", "sddmm_kernel"]

_OP_CODES = {"add": 0, "mul": 1, "dot": 2}
_BLOCK_EDGES = 64
_MAX_BLOCK_D = 64


@triton.jit
def sddmm_kernel(lhs_row, rhs_row, lhs, rhs, lhs_offsets, rhs_offsets, out,
                 num_edges, width, lhs_width, rhs_width, length,
                 OP: tl.constexpr, LHS_OFFSETS: tl.constexpr, RHS_OFFSETS: tl.constexpr,
                 ACC: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr,
                 BLOCK_D: tl.constexpr):
    """Edges [pid0 * BLOCK_E, +BLOCK_E) x a feature block (add/mul) or one feature (dot).

    lhs [*, lhs_width] and rhs [*, rhs_width] row-major; for add/mul output feature f
    reads operand columns lhs_offsets[f] / rhs_offsets[f] (f when no offsets); for dot
    output feature k reads columns offsets[k] .. offsets[k] + length - 1.
    """
    edge = tl.program_id(0) * BLOCK_E + tl.arange(0, BLOCK_E)
    emask = edge < num_edges
    left_row = tl.load(lhs_row + edge, mask=emask, other=0).to(tl.int64)
    right_row = tl.load(rhs_row + edge, mask=emask, other=0).to(tl.int64)
    if OP == 2:
        feature = tl.program_id(1)
        left_base = left_row * lhs_width + tl.load(lhs_offsets + feature)
        right_base = right_row * rhs_width + tl.load(rhs_offsets + feature)
        acc = tl.zeros([BLOCK_E], ACC)
        for step in range(0, length, BLOCK_D):
            lane = step + tl.arange(0, BLOCK_D)
            mask = emask[:, None] & (lane < length)[None, :]
            left = tl.load(lhs + left_base[:, None] + lane[None, :], mask=mask, other=0)
            right = tl.load(rhs + right_base[:, None] + lane[None, :], mask=mask, other=0)
            acc += tl.sum(left.to(ACC) * right.to(ACC), axis=1)
        tl.store(out + edge.to(tl.int64) * width + feature, acc, mask=emask)
    else:
        feature = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
        fmask = feature < width
        mask = emask[:, None] & fmask[None, :]
        if LHS_OFFSETS:
            left_column = tl.load(lhs_offsets + feature, mask=fmask, other=0)
        else:
            left_column = feature.to(tl.int64)
        if RHS_OFFSETS:
            right_column = tl.load(rhs_offsets + feature, mask=fmask, other=0)
        else:
            right_column = feature.to(tl.int64)
        left = tl.load(lhs + left_row[:, None] * lhs_width + left_column[None, :],
                       mask=mask, other=0).to(ACC)
        right = tl.load(rhs + right_row[:, None] * rhs_width + right_column[None, :],
                        mask=mask, other=0).to(ACC)
        if OP == 0:
            value = left + right
        else:
            value = left * right
        tl.store(out + edge.to(tl.int64)[:, None] * width + feature[None, :], value, mask=mask)


def gsddmm_triton(lhs_row: Tensor, rhs_row: Tensor, lhs: Tensor, rhs: Tensor,
                  op: str) -> Tensor:
    """out[e] = op(lhs[lhs_row[e]], rhs[rhs_row[e]]) for op in add, mul, dot.

    Args:
        lhs_row, rhs_row: [E] int32/int64 row of each operand that edge e reads.
        lhs, rhs: [*, *F] float operands, feature shapes broadcast (`_shapes`).

    Returns:
        [E, *F_out] in the promoted dtype (last dimension 1 for dot).
    """
    out_shape = output_feature_shape(op, tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))
    dtype = torch.promote_types(lhs.dtype, rhs.dtype)
    num_edges, width = lhs_row.numel(), math.prod(out_shape)
    out = torch.empty(num_edges, width, dtype=store_dtype(dtype, lhs_row.device),
                      device=lhs_row.device)
    if out.numel() == 0:
        return out.to(dtype).reshape(num_edges, *out_shape)
    dot = op == "dot"
    if dot and lhs.shape[-1] == 0:  # an empty dot product
        return out.zero_().to(dtype).reshape(num_edges, *out_shape)
    check_runnable(sddmm_kernel, out)
    left, right = (t.to(dtype).reshape(t.shape[0], -1).contiguous() for t in (lhs, rhs))
    left_offsets = device_offsets(tuple(lhs.shape[1:]), out_shape, dot, out.device)
    right_offsets = device_offsets(tuple(rhs.shape[1:]), out_shape, dot, out.device)
    length = lhs.shape[-1] if dot else 1
    block_f = 1 if dot else feature_block(width)
    block_d = min(_MAX_BLOCK_D, max(16, triton.next_power_of_2(length))) if dot else 1
    grid = (triton.cdiv(num_edges, _BLOCK_EDGES), width if dot else triton.cdiv(width, block_f))
    sddmm_kernel[grid](
        lhs_row, rhs_row, left, right,
        out if left_offsets is None else left_offsets,
        out if right_offsets is None else right_offsets, out,
        num_edges, width, left.shape[1], right.shape[1], length,
        OP=_OP_CODES[op], LHS_OFFSETS=left_offsets is not None,
        RHS_OFFSETS=right_offsets is not None, ACC=accumulator(dtype),
        BLOCK_E=_BLOCK_EDGES, BLOCK_F=block_f, BLOCK_D=block_d)
    return out.to(dtype).reshape(num_edges, *out_shape)

