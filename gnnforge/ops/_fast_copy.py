"""The eager CPU fast path of `copy_u_sum` / `copy_u_mean`: few Python calls between kernels.

The generic route (`gspmm` -> checks -> `spmm` -> `_SpmmFunctionNoBind` -> kernel) is
correct for every op, shape and backend, but each call runs a few dozen small Python
functions. After a kernel that has streamed a large feature matrix through the caches,
all of that code and data is cold, and the route costs 0.2-0.4 ms per forward + backward
at Pubmed F=256 (about 5% of the call; measured in docs/kernels.md). The two most used
aggregations, on 2-D contiguous float32/float64 CPU tensors with a CPU backend (the
default `auto`, or one forced without an index dtype) and nothing traced, take this
shorter route instead: one check, one autograd Function whose forward and backward call
that backend's kernels directly. Anything else returns None
and the caller takes the generic route. Second derivatives go through the generic,
differentiable ops (the backward is linear in the incoming gradient).
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnforge.ops._auto_kernels import is_cpu_backend, mean_grad_kernel, spmm_kernel
from gnnforge.ops._custom_ops import _PLAIN, mean_scaled, spmm
from gnnforge.ops._dispatch import forced
from gnnforge.ops._graph_arrays import check_graph, graph_arrays
from gnnforge.ops._layout import reverse_arrays

__all__ = ["copy_u_fast"]

_FLOATS = (torch.float32, torch.float64)


def copy_u_fast(graph, reduce: str, x) -> Tensor | None:
    """copy_u `reduce` ('sum' or 'mean') of x over graph, or None when not eligible."""
    if torch.compiler.is_compiling():  # traced: the custom ops (dynamo cannot read forced())
        return None
    check_graph(graph)
    backend = _cpu_backend()
    if not (backend and type(x) in _PLAIN and x.dim() == 2
            and x.dtype in _FLOATS and x.device.type == "cpu" and x.is_contiguous()
            and x.shape[0] == graph.num_src_nodes):
        return None
    if torch.is_grad_enabled() and x.requires_grad:
        if torch._C._are_functorch_transforms_active():
            return None
        return _CopyU.apply(x, graph, reduce, backend)
    arrays = graph_arrays(graph, None, csc=False, coo=False)
    return spmm_kernel(backend)(arrays[0], arrays[1], arrays[2], x, None, "copy_lhs", reduce,
                                False)[0]


def _cpu_backend() -> str | None:
    """The CPU backend in force ('auto' by default), or None when another one is forced."""
    choice = forced()
    if choice is None:
        return "auto"
    if is_cpu_backend(choice.backend) and choice.index_dtype is None:
        return choice.backend
    return None


class _CopyU(torch.autograd.Function):
    """copy_u sum/mean with one CPU backend's kernels in both directions."""

    @staticmethod
    def forward(ctx, x, graph, reduce, backend):
        arrays = graph_arrays(graph, None, csc=True, coo=False)
        ctx.graph, ctx.reduce, ctx.rows, ctx.backend = graph, reduce, x.shape[0], backend
        ctx.arrays = arrays
        return spmm_kernel(backend)(arrays[0], arrays[1], arrays[2], x, None, "copy_lhs",
                                    reduce, False)[0]

    @staticmethod
    def backward(ctx, grad):
        if torch.is_grad_enabled():  # a second derivative follows: differentiable ops
            return _differentiable_grad(ctx, grad), None, None, None
        rowptr, _, _, colptr, row = ctx.arrays[:5]
        grad = grad.contiguous()
        if ctx.reduce == "mean":
            return (mean_grad_kernel(ctx.backend)(colptr, row, rowptr, grad, ctx.rows),
                    None, None, None)
        return spmm_kernel(ctx.backend)(colptr, row, ctx.arrays[5], grad, None, "copy_lhs",
                                        "sum", False)[0], None, None, None


def _differentiable_grad(ctx, grad: Tensor) -> Tensor:
    arrays = graph_arrays(ctx.graph, None, csc=True, coo=True)
    if ctx.reduce == "mean":
        grad = mean_scaled(arrays, grad)
    return spmm(reverse_arrays(arrays), grad, None, "copy_lhs", "sum", ctx.backend, False)[0]
