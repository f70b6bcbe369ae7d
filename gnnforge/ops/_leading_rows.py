"""`leading_rows(x, rows)`: x[:rows], whose gradient is built in a reused buffer;
`with_leading_rows(aggregate, x, rows)`: an aggregation of x beside x[:rows], one gradient.

A sampled block's destination nodes lead its source nodes, so a layer's root term reads
the first rows of its input. Slicing's own backward (`slice_backward`) fills a fresh
zero tensor of the input's full size and copies the gradient into its first rows: for
layer 2 of the products-sized GraphSAGE step, a [58.5k, 256] zero fill that page-faulted
22 ms (one thread) to place 6k rows. Here the gradient goes into a reused buffer
(`_buffers`), and only the rows past `rows` are zeroed.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from gnnforge.ops._buffers import pooled_empty, worth_pooling

__all__ = ["leading_rows", "with_leading_rows"]


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
        return _padded(grad, tuple(ctx.shape)), None


def _padded(grad: Tensor, shape: tuple[int, ...]) -> Tensor:
    """[shape] grad in the leading rows, zeros after them, in a reused buffer."""
    out = pooled_empty(shape, grad.dtype)
    out[grad.shape[0]:].zero_()
    out[:grad.shape[0]].copy_(grad)
    return out


def with_leading_rows(aggregate: Callable[[Tensor], Tensor], x: Tensor,
                      rows: int) -> tuple[Tensor, Tensor]:
    """(`aggregate(x)`, `leading_rows(x, rows)`), whose x-gradient adds the rows' gradient
    into the aggregation's in place.

    A sampled layer reads its input twice, aggregated over the edges and its destinations'
    rows for the root term. Taken apart, autograd sums two full [N, F] gradients: the
    aggregation's and the rows' (zeros past `rows`), a zero fill of the tail and a full add.
    Here the aggregation's gradient (a tensor its backward made for it) takes the rows'
    gradient in its first rows, and nothing else is written. products-sized GraphSAGE,
    layer 2 ([58.5k, 256], 6k destinations), torch.profiler at two threads: the fill and
    the add were 3.3 and 3.8 ms of a step.

    `aggregate` is differentiable, linear or not; it runs once, on a detached x, and its
    backward runs inside this one (a second derivative runs it again, on x itself). Without
    a gradient to x this is the two calls apart.
    """
    if not 0 <= rows <= x.shape[0]:
        raise ValueError(f"with_leading_rows: rows must lie in [0, {x.shape[0]}] (x's rows), "
                         f"got {rows}")
    if not (x.requires_grad and torch.is_grad_enabled()) or rows == x.shape[0]:
        return aggregate(x), leading_rows(x, rows)
    return _WithLeadingRows.apply(x, rows, aggregate)


class _WithLeadingRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, rows: int, aggregate: Callable[[Tensor], Tensor]
                ) -> tuple[Tensor, Tensor]:
        with torch.enable_grad():
            inner = x.detach().requires_grad_()
            aggregated = aggregate(inner)
        ctx.save_for_backward(x)
        ctx.inner, ctx.aggregated, ctx.rows, ctx.aggregate = inner, aggregated, rows, aggregate
        return aggregated.detach(), x[:rows]

    @staticmethod
    def backward(ctx, grad_aggregated: Tensor | None, grad_rows: Tensor | None
                 ) -> tuple[Tensor | None, None, None]:
        inner, rows = ctx.inner, ctx.rows
        higher = torch.is_grad_enabled()  # create_graph: every step differentiable
        grad = None
        if grad_aggregated is not None and higher:
            # The gradient's own dependence on x (a nonlinear aggregate's) needs x in the
            # graph: the aggregation is run again on the saved x.
            (x,) = ctx.saved_tensors
            (grad,) = torch.autograd.grad(ctx.aggregate(x), x, grad_aggregated,
                                          create_graph=True, allow_unused=True)
        elif grad_aggregated is not None:
            # The inner graph is kept, as the outer one may be (retain_graph).
            (grad,) = torch.autograd.grad(ctx.aggregated, inner, grad_aggregated,
                                          retain_graph=True, allow_unused=True)
        if grad_rows is None:
            return grad, None, None
        if grad is None:
            grad = _padded(grad_rows, tuple(inner.shape))
        elif higher or not grad.is_contiguous() or _shares_memory(grad, grad_aggregated):
            grad = grad + F.pad(grad_rows, (0, 0) * (grad_rows.dim() - 1)
                                + (0, inner.shape[0] - rows))
        else:
            grad[:rows] += grad_rows
        return grad, None, None


def _shares_memory(a: Tensor, b: Tensor) -> bool:
    """Whether a may be b's memory (an aggregation that returned its input's gradient). An
    expanded gradient (a reduction over all rows) is caught by the contiguity test above."""
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
