"""The eager CPU fast path of `copy_u_sum` / `copy_u_mean`: few Python calls between kernels.

The generic route (`gspmm` -> checks -> `spmm` -> `_SpmmFunctionNoBind` -> kernel) is
correct for every op, shape and backend, but each call runs a few dozen small Python
functions. After a kernel that has streamed a large feature matrix through the caches,
all of that code and data is cold, and the route costs 0.2-0.4 ms per forward + backward
at Pubmed F=256 (about 5% of the call; measured in docs/kernels.md). The two most used
aggregations, on 2-D contiguous float32/float64 CPU tensors with the native backend
(default or `use_backend('native')`) and nothing traced, take this shorter route instead: one check, one autograd Function
whose forward and backward call the native kernels directly. Anything else returns None
and the caller takes the generic route. Second derivatives go through the generic,
differentiable ops (the backward is linear in the incoming gradient).
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnforge.ops._custom_ops import _PLAIN, mean_scaled, reverse_arrays, spmm
from gnnforge.ops._dispatch import _FORCED
from gnnforge.ops._generic import _arrays, _check_graph
from gnnforge.ops._native import available, gspmm_native, mean_grad_native

__all__ = ["copy_u_fast"]

_FLOATS = (torch.float32, torch.float64)


def copy_u_fast(graph, reduce: str, x) -> Tensor | None:
    """copy_u `reduce` ('sum' or 'mean') of x over graph, or None when not eligible."""
    _check_graph(graph)
    if not (type(x) in _PLAIN and x.dim() == 2
            and x.dtype in _FLOATS and x.device.type == "cpu" and x.is_contiguous()
            and x.shape[0] == graph.num_src_nodes and _native_chosen()
            and not torch.compiler.is_compiling() and available()):
        return None
    if torch.is_grad_enabled() and x.requires_grad:
        if torch._C._are_functorch_transforms_active():
            return None
        return _CopyU.apply(x, graph, reduce)
    arrays = _arrays(graph, None, csc=False, coo=False)
    return gspmm_native(arrays[0], arrays[1], arrays[2], x, None, "copy_lhs", reduce,
                        False)[0]


def _native_chosen() -> bool:
    forced = _FORCED.get()  # None: the CPU default, which is native when it is available
    return forced is None or (forced.backend == "native" and forced.index_dtype is None)


class _CopyU(torch.autograd.Function):
    """copy_u sum/mean with the native kernels in both directions."""

    @staticmethod
    def forward(ctx, x, graph, reduce):
        arrays = _arrays(graph, None, csc=True, coo=False)
        ctx.graph, ctx.reduce, ctx.rows = graph, reduce, x.shape[0]
        ctx.arrays = arrays
        return gspmm_native(arrays[0], arrays[1], arrays[2], x, None, "copy_lhs", reduce,
                            False)[0]

    @staticmethod
    def backward(ctx, grad):
        if torch.is_grad_enabled():  # a second derivative follows: differentiable ops
            return _differentiable_grad(ctx, grad), None, None
        rowptr, _, _, colptr, row = ctx.arrays[:5]
        grad = grad.contiguous()
        if ctx.reduce == "mean":
            return mean_grad_native(colptr, row, rowptr, grad, ctx.rows), None, None
        return gspmm_native(colptr, row, ctx.arrays[5], grad, None, "copy_lhs", "sum",
                            False)[0], None, None


def _differentiable_grad(ctx, grad: Tensor) -> Tensor:
    arrays = _arrays(ctx.graph, None, csc=True, coo=True)
    if ctx.reduce == "mean":
        grad = mean_scaled(arrays, grad)
    return spmm(reverse_arrays(arrays), grad, None, "copy_lhs", "sum", "native", False)[0]
