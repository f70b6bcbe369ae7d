"""Fused edge softmax on the Triton backend, as custom ops with autograd.

Forward, three launches and no [E, F] temporary besides the result:

    m_v = max over in-edges of s_e             (g-SpMM copy_e max, balanced pull)
    z_v = sum over in-edges of exp(s_e - m_v)  (the same pull, message exp(s_e - m_v))
    a_e = exp(s_e - m_dst(e)) / z_dst(e)       (edge-parallel)

Backward: t_v = sum over in-edges of a_e g_e (pull), then `a g - a t_dst` edge-parallel.
A backward that itself records a graph (double backward) runs the same formula through
differentiable steps instead: the same Triton pull, whose own gradient is a gather by
destination (`_InEdgeSum`), and PyTorch's elementwise ops. Only Triton kernels run here:
this backend does not import the CPU custom ops.

The composite in `gnnforge.ops.edge_softmax` needs five launches and three [E, F]
temporaries; this is the same math in fewer passes over the edges.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch import Tensor

from gnnforge.ops._layout import COL, DST, EIDS, ROWPTR
from gnnforge.ops._triton._launch import (
    accumulator,
    check_runnable,
    feature_block,
    store_dtype,
)
from gnnforge.ops._triton._spmm import gspmm_triton, spmm_launch

__all__ = ["edge_softmax_triton", "softmax_grad_op", "softmax_op"]

_BLOCK_EDGES = 64


@triton.jit
def edge_normalise(dst, values, row_a, row_b, other, out, num_edges, width,
                   BACKWARD: tl.constexpr, ACC: tl.constexpr, BLOCK_E: tl.constexpr,
                   BLOCK_F: tl.constexpr):
    """Forward: out[e] = exp(values[e] - row_a[dst[e]]) / row_b[dst[e]].

    Backward: out[e] = values[e] - other[e] * row_a[dst[e]]. All [*, width] row-major.
    """
    edge = tl.program_id(0) * BLOCK_E + tl.arange(0, BLOCK_E).to(tl.int64)
    feature = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    emask = edge < num_edges
    mask = emask[:, None] & (feature < width)[None, :]
    node = tl.load(dst + edge, mask=emask, other=0).to(tl.int64)
    at_edge = edge[:, None] * width + feature[None, :]
    at_node = node[:, None] * width + feature[None, :]
    value = tl.load(values + at_edge, mask=mask, other=0).to(ACC)
    first = tl.load(row_a + at_node, mask=mask, other=0).to(ACC)
    if BACKWARD:
        weight = tl.load(other + at_edge, mask=mask, other=0).to(ACC)
        result = value - weight * first
    else:
        second = tl.load(row_b + at_node, mask=mask, other=1).to(ACC)
        result = tl.exp(value - first) / second
    tl.store(out + at_edge, result, mask=mask)


def _normalise(dst: Tensor, values: Tensor, row_a: Tensor, row_b: Tensor, other: Tensor,
               backward: bool) -> Tensor:
    num_edges, width = values.shape
    out = torch.empty(num_edges, width, dtype=store_dtype(values.dtype, values.device),
                      device=values.device)
    if out.numel() == 0:
        return out.to(values.dtype)
    check_runnable(edge_normalise, out)
    block_f = feature_block(width)
    grid = (triton.cdiv(num_edges, _BLOCK_EDGES), triton.cdiv(width, block_f))
    edge_normalise[grid](dst, values, row_a, row_b, other, out, num_edges, width,
                         BACKWARD=backward, ACC=accumulator(values.dtype),
                         BLOCK_E=_BLOCK_EDGES, BLOCK_F=block_f)
    return out.to(values.dtype)


def _row_dtype(dtype: torch.dtype) -> torch.dtype:
    # Row maxima and sums stay in the accumulator type: a bfloat16 denominator would
    # round every weight of the row the same wrong way.
    return torch.float64 if dtype == torch.float64 else torch.float32


def _pull(arrays: list[Tensor], lhs: Tensor | None, rhs: Tensor, op: str, reduce: str,
          dtype: torch.dtype) -> Tensor:
    out, _, _ = spmm_launch(arrays[ROWPTR], arrays[COL], arrays[EIDS], lhs, rhs, op, reduce,
                            False, rhs.shape[1], None, None, dtype)
    return out


@torch.library.custom_op("gnnforge::triton_edge_softmax", mutates_args=())
def softmax_op(arrays: list[Tensor], logits: Tensor) -> Tensor:
    """[E, K] softmax of `logits` [E, K] over the in-edges of each destination."""
    row_dtype = _row_dtype(logits.dtype)
    peak = _pull(arrays, None, logits, "copy_rhs", "max", row_dtype)              # [M, K]
    total = _pull(arrays, peak, logits, "exp_sub_row", "sum", row_dtype)          # [M, K]
    return _normalise(arrays[DST], logits, peak, total, logits, backward=False)


@softmax_op.register_fake
def _(arrays, logits):
    return torch.empty_like(logits)


@torch.library.custom_op("gnnforge::triton_edge_softmax_grad", mutates_args=())
def softmax_grad_op(arrays: list[Tensor], out: Tensor, grad: Tensor) -> Tensor:
    """d logits = a g - a (sum over the destination's in-edges of a g); a = `out`."""
    weighted = out * grad                                                        # [E, K]
    total = _pull(arrays, None, weighted, "copy_rhs", "sum", _row_dtype(out.dtype))
    return _normalise(arrays[DST], weighted, total, total, out, backward=True)


@softmax_grad_op.register_fake
def _(arrays, out, grad):
    return torch.empty_like(out)


class _InEdgeSum(torch.autograd.Function):
    """[M, K] sums of edge rows [E, K] over each destination's in-edges (Triton's copy_e
    sum), differentiable: the gradient of edge e is the gradient of its destination row."""

    @staticmethod
    def forward(ctx, arrays: list[Tensor], rows: Tensor) -> Tensor:
        ctx.save_for_backward(arrays[DST])
        return gspmm_triton(arrays[ROWPTR], arrays[COL], arrays[EIDS], None, rows, "copy_rhs",
                            "sum", False)[0]

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[None, Tensor]:
        (dst,) = ctx.saved_tensors
        return None, grad.index_select(0, dst)                                  # [E, K]


def _setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[0], output)


def _backward(ctx, grad):
    *arrays, out = ctx.saved_tensors
    if not torch.is_grad_enabled():
        return [None] * 8, softmax_grad_op(arrays, out, grad.contiguous())
    # Double backward: the same formula through differentiable ops.
    weighted = out * grad
    total = _InEdgeSum.apply(arrays, weighted)                                  # [M, K]
    return [None] * 8, weighted - out * total.index_select(0, arrays[DST])


softmax_op.register_autograd(_backward, setup_context=_setup)


def edge_softmax_triton(arrays: list[Tensor], logits: Tensor) -> Tensor:
    """Edge softmax of logits [E, *F] (any float dtype) over GraphArrays; [E, *F]."""
    flat = logits.reshape(logits.shape[0], math.prod(logits.shape[1:])).contiguous()
    return softmax_op(arrays, flat).reshape(logits.shape)
