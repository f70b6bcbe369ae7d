"""Softmax over the in-edges of each destination node (GAT's attention normalisation)."""

from __future__ import annotations

import torch
from torch import Tensor

from gnnforge.ops._custom_ops import eager
from gnnforge.ops._dispatch import choose
from gnnforge.ops._generic import check_device, gsddmm, gspmm, index_dtype
from gnnforge.ops._native_softmax import edge_softmax_backward_native, edge_softmax_native

__all__ = ["edge_softmax"]


def edge_softmax(graph, logits: Tensor) -> Tensor:
    r"""Normalise edge logits over the incoming edges of every destination.

    .. math:: a_e = \frac{\exp(s_e - m_v)}{\sum_{e' \to v} \exp(s_{e'} - m_v)},\quad
              m_v = \max_{e' \to v} s_{e'}

    Built from g-SpMM (max, sum) and g-SDDMM (e_sub_v, e_div_v), so it runs on whichever
    backend is active; the backward is the softmax identity
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
    choice = choose("gspmm", check_device(graph, None, logits))
    if (choice.backend == "native" and eager(logits)
            and not torch._C._are_functorch_transforms_active()):
        return _NativeEdgeSoftmax.apply(graph, logits, index_dtype(graph, choice.index_dtype))
    return _EdgeSoftmax.apply(graph, logits)


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
    """The native backend's fused kernels (`_native_softmax`): one CSR pull each way.

    A backward that records a graph (second derivatives) takes the composed ops instead,
    which are differentiable.
    """

    @staticmethod
    def forward(ctx, graph, logits, index_dtype):
        rowptr, _, eids = graph.csr(index_dtype)
        out = edge_softmax_native(rowptr, eids, logits)
        ctx.graph, ctx.index_dtype = graph, index_dtype
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        if torch.is_grad_enabled():
            return None, _composed_backward(ctx.graph, out, grad), None
        rowptr, _, eids = ctx.graph.csr(ctx.index_dtype)
        return None, edge_softmax_backward_native(rowptr, eids, out, grad), None
