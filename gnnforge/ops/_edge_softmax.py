"""Softmax over the in-edges of each destination node (GAT's attention normalisation)."""

from __future__ import annotations

import torch
from torch import Tensor

from gnnforge.ops._custom_ops import eager
from gnnforge.ops._dispatch import choose
from gnnforge.ops._generic import gsddmm, gspmm
from gnnforge.ops._graph_arrays import check_device, graph_arrays, index_dtype
from gnnforge.ops._native import available as native_available
from gnnforge.ops._native_softmax import edge_softmax_backward_native, edge_softmax_native

__all__ = ["edge_softmax"]


def edge_softmax(graph, logits: Tensor) -> Tensor:
    r"""Normalise edge logits over the incoming edges of every destination.

    .. math:: a_e = \frac{\exp(s_e - m_v)}{\sum_{e' \to v} \exp(s_{e'} - m_v)},\quad
              m_v = \max_{e' \to v} s_{e'}

    Built from g-SpMM (max, sum) and g-SDDMM (e_sub_v, e_div_v), so it runs on whichever
    backend is active (the Triton backend runs a fused version: `_triton/_edge_softmax`);
    the backward is the softmax identity
    :math:`\partial s = a \odot (g - \sum_{e' \to v} a_{e'} g_{e'})`, which saves only a.

    Args:
        graph: a `Graph` or an object with the kernel protocol.
        logits: [E, *F] float, in edge-id order (e.g. [E, H] or [E, H, 1] per head).

    Returns:
        [E, *F] attention weights; for every destination and feature they sum to 1.

    Raises:
        TypeError / ValueError: logits not a float tensor with num_edges rows.
    """
    if not isinstance(logits, Tensor) or not logits.is_floating_point():
        raise TypeError(f"logits: expected a floating-point tensor, got "
                        f"{getattr(logits, 'dtype', type(logits).__name__)}")
    if logits.dim() == 0 or logits.shape[0] != graph.num_edges:
        raise ValueError(f"logits: first dimension must be num_edges={graph.num_edges}, got "
                         f"shape {tuple(logits.shape)}")
    choice = choose("gspmm", logits.device)
    if choice.backend == "triton":
        graph_device = graph.coo()[0].device
        if graph_device != logits.device:
            raise ValueError(f"logits are on {logits.device} but the graph is on "
                             f"{graph_device}; move one with .to()")
        need_grad = torch.is_grad_enabled() and logits.requires_grad
        arrays = graph_arrays(graph, choice.index_dtype, need_grad, True)
        # Loaded on first use, like the package's entries: importing it imports triton.
        from gnnforge.ops._triton._edge_softmax import edge_softmax_triton

        return edge_softmax_triton(arrays, logits)
    variant = native_variant(choice.backend)
    if variant is not None and eager(logits) and not torch._C._are_functorch_transforms_active():
        check_device(graph, None, logits)
        return _NativeEdgeSoftmax.apply(graph, logits, index_dtype(graph, choice.index_dtype),
                                        variant or None)
    return _EdgeSoftmax.apply(graph, logits)


def native_variant(backend: str) -> str | None:
    """The native variant a CPU backend runs fused kernels with ('' the default), or None.

    'native' and 'auto' (where the library built) use the default build, 'native:VARIANT'
    that variant; numba, mkl and the others the composed ops.
    """
    if backend.startswith("native:"):
        return backend.split(":", 1)[1]
    if backend == "native" or (backend == "auto" and _library_built()):
        return ""
    return None


@torch.compiler.assume_constant_result
def _library_built() -> bool:
    # A constant of the process: torch.compile takes it as one instead of tracing the
    # build's file reads (a graph break under fullgraph=True).
    return native_available()


class _EdgeSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, graph, logits):
        peak = gspmm(graph, "copy_rhs", "max", None, logits)                   # [M, *F]
        weights = torch.exp(gsddmm(graph, "sub", logits, peak, "e", "v"))      # [E, *F]
        total = gspmm(graph, "copy_rhs", "sum", None, weights)                 # [M, *F]
        out = gsddmm(graph, "div", weights, total, "e", "v")
        ctx.graph = graph
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return None, _composed_backward(ctx.graph, out, grad)


def _composed_backward(graph, out: Tensor, grad: Tensor) -> Tensor:
    weighted = out * grad                                                       # [E, *F]
    total = gspmm(graph, "copy_rhs", "sum", None, weighted)                    # [M, *F]
    return weighted - gsddmm(graph, "mul", out, total, "e", "v")


class _NativeEdgeSoftmax(torch.autograd.Function):
    """The native library's fused kernels (`_native_softmax`): one CSR pull each way.

    A backward that records a graph (second derivatives) takes the composed ops instead,
    which are differentiable.
    """

    @staticmethod
    def forward(ctx, graph, logits, index_dtype, variant):
        rowptr, _, eids = graph.csr(index_dtype)
        out = edge_softmax_native(rowptr, eids, logits, variant)
        ctx.graph, ctx.index_dtype, ctx.variant = graph, index_dtype, variant
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        if torch.is_grad_enabled():
            return None, _composed_backward(ctx.graph, out, grad), None, None
        rowptr, _, eids = ctx.graph.csr(ctx.index_dtype)
        return (None, edge_softmax_backward_native(rowptr, eids, out, grad, ctx.variant),
                None, None)
