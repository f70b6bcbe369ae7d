"""`leading_rows(x, rows)`: x[:rows], whose gradient is built in a reused buffer.

A sampled block's destination nodes lead its source nodes, so a layer's root term reads
the first rows of its input. Slicing's own backward (`slice_backward`) fills a fresh
zero tensor of the input's full size and copies the gradient into its first rows: for
layer 2 of the products-sized GraphSAGE step, a [58.5k, 256] zero fill that page-faulted
22 ms (one thread) to place 6k rows. Here the gradient goes into a reused buffer
(`_buffers`), and only the rows past `rows` are zeroed.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnforge.ops._buffers import pooled_empty, worth_pooling

__all__ = ["leading_rows"]


def leading_rows(x: Tensor, rows: int) -> Tensor:
    """`x[:rows]` (a view), differentiable; the gradient's unused rows are zeros.

    Raises:
        ValueError: when rows is negative or more than x has.
    """
    if not 0 <= rows <= x.shape[0]:
        raise ValueError(f"leading_rows: rows must lie in [0, {x.shape[0]}] (x's rows), "
                         f"got {rows}")
    if rows == x.shape[0]:
        return x
    if not (x.requires_grad and torch.is_grad_enabled()) or not worth_pooling(
            x.device, x.numel() * x.element_size()):
        return x[:rows]
    return _LeadingRows.apply(x, rows)


class _LeadingRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, rows: int) -> Tensor:
        ctx.shape, ctx.rows = x.shape, rows
        return x[:rows]

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        out = pooled_empty(tuple(ctx.shape), grad.dtype)
        out[ctx.rows:].zero_()
        out[:ctx.rows].copy_(grad)
        return out, None
