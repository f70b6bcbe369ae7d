"""Softmax over the in-edges of each destination node (GAT's attention normalisation)."""

from __future__ import annotations

import torch
from torch import Tensor

from gnnforge.ops._dispatch import choose
from gnnforge.ops._generic import _arrays, gsddmm, gspmm
from gnnforge.ops._triton import edge_softmax_triton

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
        return edge_softmax_triton(_arrays(graph, choice.index_dtype, need_grad, True), logits)
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
        weighted = out * grad                                                   # [E, *F]
        total = gspmm(ctx.graph, "copy_rhs", "sum", None, weighted)            # [M, *F]
        return None, weighted - gsddmm(ctx.graph, "mul", out, total, "e", "v")
