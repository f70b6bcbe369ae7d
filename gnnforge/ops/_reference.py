"""Reference g-SpMM / g-SDDMM in plain PyTorch: the specification every backend must match.

Gather-then-scatter with `index_select` / `index_add_` / `scatter_reduce`: simple, on any
device, differentiable by PyTorch's own autograd, and O(E x F) memory, which is exactly
what the fast backends avoid. Operands arrive already padded by `_shapes.pad_operands`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnforge._static_shapes import lazy_device
from gnnforge.ops._degree import in_degree
from gnnforge.ops._static_extreme import extreme_static

__all__ = ["edge_message_ref", "gsddmm_ref", "gspmm_ref"]


def edge_message_ref(op: str, lhs: Tensor | None, rhs: Tensor | None) -> Tensor:
    """`op(lhs, rhs)` row by row for operands already gathered to the same rows."""
    if op == "copy_lhs":
        return lhs
    if op == "copy_rhs":
        return rhs
    if op == "add":
        return lhs + rhs
    if op == "sub":
        return lhs - rhs
    if op == "mul":
        return lhs * rhs
    if op == "div":
        return lhs / rhs
    return (lhs * rhs).sum(dim=-1, keepdim=True)  # dot


def gspmm_ref(graph, op: str, reduce: str, lhs: Tensor | None, rhs: Tensor | None) -> Tensor:
    """out[v] = reduce over edges e = (u, v) of op(lhs[u], rhs[e]); 0 where v has no in-edge."""
    src, dst = graph.coo()
    gathered = None if lhs is None else lhs.index_select(0, src)  # [E, *F]
    message = edge_message_ref(op, gathered, rhs)                # [E, *F]
    shape = (graph.num_dst_nodes, *message.shape[1:])
    if reduce in ("sum", "mean"):
        out = message.new_zeros(shape).index_add(0, dst, message)
        if reduce == "mean":
            degree = in_degree(graph).clamp(min=1)
            out = out / degree.to(out.dtype).reshape(-1, *[1] * (out.dim() - 1))
        return out
    return _extreme_ref(dst, message, shape, "amax" if reduce == "max" else "amin")


def _extreme_ref(dst: Tensor, message: Tensor, shape: tuple[int, ...], reduce: str) -> Tensor:
    """scatter_reduce max/min, 0 where a row has no edge, gradient split evenly over ties.

    PyTorch's scatter_reduce backward counts the initial value among the ties even with
    include_self=False, so on a zero-initialised output a tie at exactly 0 lost a share
    (two tied edges got 1/3 each). The initial value here is made to differ from each
    row's result (1 where the result is 0, else 0), so only the edges share the gradient;
    rows without edges keep 0. On XLA, which lowers only the include_self=True form, one
    scatter from the reduction's identity (`_static_extreme`).
    """
    if lazy_device(message):
        return extreme_static(dst, message, shape, reduce)
    index = dst.reshape(-1, *[1] * (message.dim() - 1)).expand_as(message)
    with torch.no_grad():
        result = message.new_zeros(shape).scatter_reduce(0, index, message, reduce=reduce,
                                                         include_self=False)
        has_edge = torch.zeros(shape[0], dtype=torch.bool, device=dst.device)
        has_edge[dst] = True
        initial = ((result == 0) & has_edge.reshape(-1, *[1] * (result.dim() - 1)))
    return initial.to(message.dtype).scatter_reduce(0, index, message, reduce=reduce,
                                                    include_self=False)


def _pick(graph, data: Tensor, target: str) -> Tensor:
    src, dst = graph.coo()
    if target == "u":
        return data.index_select(0, src)
    if target == "v":
        return data.index_select(0, dst)
    return data


def gsddmm_ref(graph, op: str, lhs: Tensor | None, rhs: Tensor | None,
               lhs_target: str, rhs_target: str) -> Tensor:
    """out[e] = op(lhs[target(e)], rhs[target(e)]) for every edge e, in edge-id order."""
    left = None if lhs is None else _pick(graph, lhs, lhs_target)
    right = None if rhs is None else _pick(graph, rhs, rhs_target)
    return edge_message_ref(op, left, right)
