"""Binary-message g-SpMM and g-SDDMM on the native library (`binary.cpp`, `sddmm.cpp`).

DGL's broadcasting of the two operands is collapsed here into an output row of H x D
elements (heads x features) in which each operand is a vector along D or one scalar per
head, possibly shared by all heads: every case the layers use (vector [E, F], edge scalar
[E] / [E, 1], per-head [E, H, 1] x [N, H, D], two-sided [N, 1, D] + [E, H, 1]). A broadcast
that needs more than two such groups of dimensions, and g-SpMM with `dot`, are not covered
(`spmm_covered`, `sddmm_covered`): `_cpu_kernels` runs numba's kernels for them, so this
backend imports no other. Same contracts as `_cpu.gspmm_cpu` /
`_cpu.gsddmm_cpu`, except that max/min winners are in the index dtype of the CSR (int32
whenever the graph's indices are, int64 otherwise). float32/float64 natively; other float
dtypes are computed in float32 and rounded once.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch
from torch import Tensor

from gnnforge.ops._buffers import pooled_empty
from gnnforge.ops._native_build import load
from gnnforge.ops._shapes import broadcast_offsets, output_feature_shape

__all__ = ["Layout", "extreme_grad_native", "gsddmm_binary_native", "gspmm_binary_native",
           "plan_layout", "sddmm_covered", "spmm_covered"]

_DTYPE_CODES = {torch.float32: 0, torch.float64: 1}
_OP_CODES = {"add": 0, "mul": 1, "dot": 2}
_REDUCE_CODES = {"sum": 0, "mean": 1, "max": 2, "min": 3}
# Below this many multiply-adds a call runs on the calling thread (as in `_native`).
_PARALLEL_WORK = 2**18


class Layout(NamedTuple):
    """How the kernels read two operands for an [H, D] output row.

    Operand `a` (lhs, or rhs when `swapped`) is a vector along D: element (h, d) of a row
    at h * a_hs + d; `b` at h * b_hs + d when `b_vector`, else h * b_hs. For dot, D is the
    reduced length and both are vectors.
    """

    heads: int
    width: int
    swapped: bool
    a_hs: int
    b_hs: int
    b_vector: bool


def _groups(lhs_shape, rhs_shape, out_shape) -> list[tuple[int, bool, bool]]:
    """Output dims > 1 merged into runs with the same (lhs has it, rhs has it) pattern."""
    groups: list[tuple[int, bool, bool]] = []
    for left, right, size in zip(lhs_shape, rhs_shape, out_shape):
        if size == 1:
            continue
        pattern = (left == size, right == size)
        if groups and groups[-1][1:] == pattern:
            groups[-1] = (groups[-1][0] * size, *pattern)
        else:
            groups.append((size, *pattern))
    return groups


def _head_stride(has_head: bool, has_width: bool, width: int) -> int:
    return (width if has_width else 1) if has_head else 0


# Cached: a pure function of (op, shapes) that costs tens of microseconds per call in Python
# (torch.broadcast_shapes), about 5% of a 1.5 ms Pubmed u_mul_e_sum; shapes here are ints.
@functools.lru_cache(maxsize=1024)
def plan_layout(op: str, lhs_shape: tuple[int, ...], rhs_shape: tuple[int, ...]
                ) -> Layout | None:
    """The [H, D] layout of `op(lhs, rhs)` for padded feature shapes, or None (numba's)."""
    out_shape = _output_shape(op, lhs_shape, rhs_shape)
    if op == "dot":
        groups = _groups(lhs_shape[:-1], rhs_shape[:-1], out_shape[:-1])
        if len(groups) > 1:
            return None
        heads, has_l, has_r = groups[0] if groups else (1, False, False)
        length = lhs_shape[-1]
        return Layout(heads, length, False, length if has_l else 0, length if has_r else 0,
                      True)
    groups = _groups(lhs_shape, rhs_shape, out_shape)
    if len(groups) > 2:
        return None
    if not groups:
        return Layout(1, 1, False, 0, 0, True)
    head = groups[0] if len(groups) == 2 else (1, False, False)
    width, l_vector, r_vector = groups[-1]
    l_hs = _head_stride(head[1], l_vector, width)
    r_hs = _head_stride(head[2], r_vector, width)
    if l_vector:
        return Layout(head[0], width, False, l_hs, r_hs, r_vector)
    return Layout(head[0], width, True, r_hs, l_hs, False)


@functools.lru_cache(maxsize=1024)
def _output_shape(op: str, lhs_shape: tuple[int, ...], rhs_shape: tuple[int, ...]
                  ) -> tuple[int, ...]:
    return output_feature_shape(op, lhs_shape, rhs_shape)


def _compute(tensor: Tensor, dtype: torch.dtype) -> Tensor:
    return tensor.to(dtype).contiguous()


def _threads(work: int) -> int:
    return torch.get_num_threads() if work >= _PARALLEL_WORK else 1


def _stride(tensor: Tensor) -> int:
    return math.prod(tensor.shape[1:])


def _empty_index() -> Tensor:
    return torch.empty(0, dtype=torch.int64)


def spmm_covered(lhs: Tensor, rhs: Tensor, op: str) -> bool:
    """Whether `gspmm_binary_native` computes u_op_e for these operands (add or mul, in a
    broadcast `plan_layout` collapses)."""
    return op in ("add", "mul") and plan_layout(op, tuple(lhs.shape[1:]),
                                                 tuple(rhs.shape[1:])) is not None


def sddmm_covered(lhs: Tensor, rhs: Tensor, op: str) -> bool:
    """Whether `gsddmm_binary_native` computes op(lhs, rhs) for these operands."""
    return op in _OP_CODES and plan_layout(op, tuple(lhs.shape[1:]),
                                            tuple(rhs.shape[1:])) is not None


def gspmm_binary_native(rowptr: Tensor, col: Tensor, eids: Tensor, lhs: Tensor, rhs: Tensor,
                        op: str, reduce: str, record_args: bool = True,
                        variant: str | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """u_op_e g-SpMM (op add or mul) over CSR by destination; `_cpu.gspmm_cpu`'s contract.

    Args:
        rowptr, col, eids: CSR by destination (int32 or int64, one dtype).
        lhs: [N, *F_u] source rows; rhs: [E, *F_e] edge rows (padded, broadcastable).
        op: 'add' or 'mul' (`spmm_covered` must hold).
        reduce: 'sum', 'mean', 'max' or 'min'.
        record_args: for max/min, record the winning source node and edge id.
        variant: instruction-set build of the library (`_native_build`); None the default.

    Returns:
        (out [M, *F], arg_lhs, arg_rhs): for max/min with record_args the [M, prod(F)]
        winners in rowptr's dtype (-1 for rows without in-edges), else empty int64.
    """
    layout = plan_layout(op, tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))
    assert op in ("add", "mul") and layout is not None, "callers check spmm_covered"
    out_shape = _output_shape(op, tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))
    dtype = torch.promote_types(lhs.dtype, rhs.dtype)
    compute = dtype if dtype in _DTYPE_CODES else torch.float32
    left, right = _compute(lhs, compute), _compute(rhs, compute)
    rows, width = rowptr.shape[0] - 1, math.prod(out_shape)
    out = pooled_empty((rows, width), compute)
    extreme = record_args and reduce in ("max", "min")
    arg_lhs = pooled_empty((rows, width), rowptr.dtype) if extreme else _empty_index()
    arg_rhs = pooled_empty((rows, width), rowptr.dtype) if extreme else _empty_index()
    if rows and width:
        a, b, index_a, index_b, arg_a, arg_b = (left, right, col, eids, arg_lhs, arg_rhs)
        if layout.swapped:
            a, b, index_a, index_b, arg_a, arg_b = (right, left, eids, col, arg_rhs, arg_lhs)
        load(variant).gf_spmm_binary(
            _DTYPE_CODES[compute], rowptr.dtype == torch.int64, _OP_CODES[op],
            _REDUCE_CODES[reduce], layout.b_vector, rowptr.data_ptr(), index_a.data_ptr(),
            index_b.data_ptr(), a.data_ptr(), _stride(a), layout.a_hs, b.data_ptr(),
            _stride(b), layout.b_hs, out.data_ptr(), arg_a.data_ptr() if extreme else None,
            arg_b.data_ptr() if extreme else None, rows, layout.heads, layout.width,
            _threads(col.shape[0] * width))
    out = out.reshape(rows, *out_shape)
    return (out if compute == dtype else out.to(dtype)), arg_lhs, arg_rhs


def gsddmm_binary_native(lhs_row: Tensor, rhs_row: Tensor, lhs: Tensor, rhs: Tensor, op: str,
                         variant: str | None = None) -> Tensor:
    """out[e] = op(lhs[lhs_row[e]], rhs[rhs_row[e]]), op add, mul or dot; `_cpu.gsddmm_cpu`'s
    contract, where `sddmm_covered` holds.

    Args:
        lhs_row, rhs_row: [E] integer rows each edge reads (source, destination or edge id).
        lhs, rhs: padded, broadcastable operands.
        op: 'add', 'mul' or 'dot'.
        variant: instruction-set build of the library; None the default.
    """
    layout = plan_layout(op, tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))
    assert op in _OP_CODES and layout is not None, "callers check sddmm_covered"
    out_shape = _output_shape(op, tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))
    dtype = torch.promote_types(lhs.dtype, rhs.dtype)
    compute = dtype if dtype in _DTYPE_CODES else torch.float32
    left, right = _compute(lhs, compute), _compute(rhs, compute)
    edges, width = lhs_row.shape[0], math.prod(out_shape)
    out = pooled_empty((edges, width), compute)
    if edges and width:
        # Kept in variables: a temporary's memory would be freed before the call.
        index_l, index_r = lhs_row.contiguous(), rhs_row.to(lhs_row.dtype).contiguous()
        a, b, index_a, index_b = (right, left, index_r, index_l) if layout.swapped else \
            (left, right, index_l, index_r)
        load(variant).gf_sddmm(
            _DTYPE_CODES[compute], lhs_row.dtype == torch.int64, _OP_CODES[op],
            layout.b_vector, index_a.data_ptr(), index_b.data_ptr(),
            a.data_ptr(), _stride(a), layout.a_hs, b.data_ptr(), _stride(b), layout.b_hs,
            out.data_ptr(), edges, layout.heads, layout.width,
            _threads(edges * width * (layout.width if op == "dot" else 1)))
    out = out.reshape(edges, *out_shape)
    return out if compute == dtype else out.to(dtype)


def extreme_grad_native(rowptr: Tensor, eids: Tensor, arg_lhs: Tensor, arg_rhs: Tensor,
                        grad: Tensor, other: Tensor | None, out_shape: tuple[int, ...],
                        rows: int, source: bool, variant: str | None = None) -> Tensor:
    """One gradient of a binary max/min g-SpMM from its recorded winners (`binary_grad.cpp`).

    Args:
        rowptr, eids: the forward CSR by destination (int32 or int64).
        arg_lhs, arg_rhs: [M, K] winning source node and edge id per output element.
        grad: [M, K] gradient of the output.
        other: mul's other operand (edge rows for the source gradient, source rows for the
            edge gradient), padded; None for add.
        out_shape: the output's feature shape (K elements), to broadcast `other`.
        rows: N (source gradient) or E (edge gradient), the rows of the result.
        source: which of the two.
        variant: instruction-set build of the library; None the default.

    Returns:
        [rows, K] in grad's dtype, before summing over the operand's broadcast dimensions.
    """
    values = _compute(grad, grad.dtype if grad.dtype in _DTYPE_CODES else torch.float32)
    winners_u = arg_lhs.to(rowptr.dtype).contiguous()
    winners_e = arg_rhs.to(rowptr.dtype).contiguous()
    width = values.shape[1]
    factor = None if other is None else _compute(other, values.dtype)
    offset = (broadcast_offsets(tuple(other.shape[1:]), out_shape, False)
              if other is not None else torch.empty(0, dtype=torch.int64))
    out = pooled_empty((rows, width), values.dtype)
    if rows and width:
        load(variant).gf_extreme_binary_grad(
            _DTYPE_CODES[values.dtype], rowptr.dtype == torch.int64, source,
            rowptr.data_ptr(), eids.data_ptr(), winners_u.data_ptr(), winners_e.data_ptr(),
            values.data_ptr(), None if factor is None else factor.data_ptr(),
            0 if factor is None else _stride(factor), offset.data_ptr(), out.data_ptr(),
            values.shape[0], rows, width, _threads(values.numel()))
    return out.to(grad.dtype)
