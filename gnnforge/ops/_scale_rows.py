"""`scale_rows(x, factor)`: x * factor (one factor per row), into reused buffers.

GCN's normalisation scales every row of its [N, 1, F] input and output by a degree
factor (D^-1/2 X before the aggregation, D^-1/2 after it; the backward does the same to
the gradients): four full-size products per layer and step. Each fresh output of torch's
`mul` page-faults its pages (glibc maps blocks of 32 MiB or more afresh), which made
those products 12.9 ns of the full-graph GCN step's time per edge at 2^19 nodes and 22.3
at 2^21, more than the layers' GEMMs (docs/kernels.md). Here the output and the gradient
come from the reused-buffer pool (`_buffers`), already faulted.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnforge.ops._buffers import pooled_empty, worth_pooling

__all__ = ["scale_rows"]


def scale_rows(x: Tensor, factor: Tensor) -> Tensor:
    """`x * factor` where factor broadcasts to x's shape (e.g. [N, 1, 1] against [N, 1, F]).

    The same values and gradients as the product; large eager CPU outputs (and x's
    gradient) come from reused buffers. A factor that requires grad, or one that would
    broadcast x to a larger shape, takes torch's product.
    """
    shape = torch.broadcast_shapes(x.shape, factor.shape)
    plain = (shape != x.shape or factor.dtype != x.dtype or x.device != factor.device
             or (factor.requires_grad and torch.is_grad_enabled())
             or not worth_pooling(x.device, x.numel() * x.element_size()))
    return x * factor if plain else _ScaleRows.apply(x, factor)


def _product(x: Tensor, factor: Tensor) -> Tensor:
    out = pooled_empty(tuple(x.shape), x.dtype)
    return torch.mul(x, factor, out=out)


class _ScaleRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, factor: Tensor) -> Tensor:
        ctx.save_for_backward(factor)
        return _product(x, factor)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, None]:
        (factor,) = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None
        return scale_rows(grad, factor), None  # differentiable again under create_graph
