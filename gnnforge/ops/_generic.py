"""The two public primitives, `gspmm` and `gsddmm`: validation, then dispatch.

A public call checks the graph and operands once, pads operand ranks (DGL broadcasting,
see `_shapes`), picks a backend from `_dispatch` and runs either the reference (plain
PyTorch, autograd by PyTorch) or a fast backend through the `_custom_ops` custom ops.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnforge.ops._custom_ops import sddmm_op, spmm
from gnnforge.ops._dispatch import choose
from gnnforge.ops._graph_arrays import check_device, check_graph, graph_arrays
from gnnforge.ops._reference import gsddmm_ref, gspmm_ref
from gnnforge.ops._shapes import (
    check_op,
    check_reduce,
    check_target,
    output_feature_shape,
    pad_operands,
)

__all__ = ["gsddmm", "gspmm"]

def gspmm(graph, op: str, reduce: str, lhs: Tensor | None = None,
          rhs: Tensor | None = None) -> Tensor:
    r"""Generalised sparse-dense matrix product: messages on edges reduced onto destinations.

    .. math:: \mathrm{out}[v] = \bigoplus_{e = (u, v)} \mathrm{op}(\mathrm{lhs}[u], \mathrm{rhs}[e])

    with :math:`\oplus` the `reduce`. Rows without in-edges get 0 (also for max/min).

    Args:
        graph: a `Graph` or anything with the kernel protocol (`num_src_nodes`,
            `num_dst_nodes`, `num_edges`, `coo()`, `csr()`, `csc()`; see gnnforge/graph.py).
        op: 'copy_lhs', 'copy_rhs', 'add', 'sub', 'mul', 'div' or 'dot' (dot: sum and
            mean only).
        reduce: 'sum', 'mean', 'max' or 'min'.
        lhs: [num_src_nodes, *F_u] float source-node data (unused for copy_rhs).
        rhs: [num_edges, *F_e] float edge data in edge-id order (unused for copy_lhs).
            F_u and F_e broadcast like DGL's (e.g. [E] or [E, 1] with [N, F];
            [E, H, 1] with [N, H, D]).

    Returns:
        [num_dst_nodes, *F] with F the broadcast feature shape (last dim 1 for dot); 1-D
        when every operand used was 1-D. Differentiable w.r.t. lhs and rhs.

    Raises:
        TypeError / ValueError: naming the argument that is missing, of the wrong type,
            shape, dtype or device.

    Reference: Wang et al., "Deep Graph Library", 2019 (g-SpMM); Md et al., "Deep Graph
    Library Optimizations for Intel x86 Architecture", 2020 (pull kernels on CSR).
    """
    check_graph(graph)
    check_op(op)
    check_reduce(reduce)
    if op == "dot" and reduce in ("max", "min"):
        raise ValueError(f"gspmm: op='dot' supports reduce 'sum' and 'mean', got {reduce!r}")
    lhs = _operand("lhs", lhs, op != "copy_rhs", graph.num_src_nodes, "num_src_nodes")
    rhs = _operand("rhs", rhs, op != "copy_lhs", graph.num_edges, "num_edges")
    squeeze = all(t is None or t.dim() == 1 for t in (lhs, rhs))
    lhs, rhs = pad_operands(lhs, rhs)
    output_feature_shape(op, _features(lhs), _features(rhs))  # raises on bad broadcast
    device = check_device(graph, lhs, rhs)
    choice = choose("gspmm", device)
    if choice.backend == "reference":
        out = gspmm_ref(graph, op, reduce, lhs, rhs)
    else:
        op, rhs = _rewrite(op, rhs)
        need_grad = _needs_grad(lhs, rhs)
        arrays = graph_arrays(graph, choice.index_dtype, csc=need_grad, coo=need_grad)
        out = spmm(arrays, lhs, rhs, op, reduce, choice.backend, need_grad)[0]
    return out.squeeze(-1) if squeeze else out


def gsddmm(graph, op: str, lhs: Tensor | None, rhs: Tensor | None, lhs_target: str = "u",
           rhs_target: str = "v") -> Tensor:
    r"""Generalised sampled dense-dense matrix product: one message per edge.

    .. math:: \mathrm{out}[e] = \mathrm{op}(\mathrm{lhs}[t_l(e)], \mathrm{rhs}[t_r(e)])

    where a target t is the edge's source 'u', destination 'v' or the edge 'e' itself.

    Args:
        graph: a `Graph` or anything with the kernel protocol.
        op: 'copy_lhs', 'copy_rhs', 'add', 'sub', 'mul', 'div' or 'dot'.
        lhs, rhs: float data with first dimension num_src_nodes ('u'), num_dst_nodes
            ('v') or num_edges ('e') per its target; features broadcast as in `gspmm`.
            The one a copy op does not read may be None.
        lhs_target, rhs_target: 'u', 'v' or 'e'.

    Returns:
        [num_edges, *F] in edge-id order; 1-D when every operand used was 1-D.

    Raises:
        TypeError / ValueError: naming the offending argument.
    """
    check_graph(graph)
    check_op(op)
    check_target("lhs_target", lhs_target)
    check_target("rhs_target", rhs_target)
    lhs = _operand("lhs", lhs, op != "copy_rhs", *_target_size(graph, lhs_target))
    rhs = _operand("rhs", rhs, op != "copy_lhs", *_target_size(graph, rhs_target))
    squeeze = all(t is None or t.dim() == 1 for t in (lhs, rhs))
    lhs, rhs = pad_operands(lhs, rhs)
    output_feature_shape(op, _features(lhs), _features(rhs))
    device = check_device(graph, lhs, rhs)
    choice = choose("gsddmm", device)
    if choice.backend == "reference":
        out = gsddmm_ref(graph, op, lhs, rhs, lhs_target, rhs_target)
    elif op in ("copy_lhs", "copy_rhs"):
        # A gather is already optimal and differentiable; no kernel needed.
        out = _gather(graph, *((lhs, lhs_target) if op == "copy_lhs" else (rhs, rhs_target)))
    else:
        op, rhs = _rewrite(op, rhs)
        arrays = graph_arrays(graph, choice.index_dtype, csc=_needs_grad(lhs, rhs), coo=True)
        out = sddmm_op(arrays, lhs, rhs, op, lhs_target, rhs_target, choice.backend)
    return out.squeeze(-1) if squeeze else out


# ----------------------------------------------------------------------------- helpers


def _operand(name: str, value, used: bool, rows: int, what: str) -> Tensor | None:
    if not used:
        return None
    if not isinstance(value, Tensor):
        raise TypeError(f"{name}: this op reads it, so it must be a tensor, got "
                        f"{type(value).__name__}")
    if not value.is_floating_point():
        raise TypeError(f"{name}: expected a floating-point tensor, got dtype {value.dtype}")
    if value.dim() == 0 or value.shape[0] != rows:
        raise ValueError(f"{name}: first dimension must be {what}={rows}, got shape "
                         f"{tuple(value.shape)}")
    return value


def _target_size(graph, target: str) -> tuple[int, str]:
    if target == "u":
        return graph.num_src_nodes, "num_src_nodes"
    if target == "v":
        return graph.num_dst_nodes, "num_dst_nodes"
    return graph.num_edges, "num_edges"


def _features(tensor: Tensor | None) -> tuple[int, ...] | None:
    return None if tensor is None else tuple(tensor.shape[1:])


def _rewrite(op: str, rhs: Tensor | None) -> tuple[str, Tensor | None]:
    # x - y = x + (-y) and x / y = x * (1 / y): the fast path and its gradients then need
    # only add and mul (DGL does the same); the negation/reciprocal costs one pass over rhs.
    if op == "sub":
        return "add", -rhs
    if op == "div":
        return "mul", rhs.reciprocal()
    return op, rhs


def _needs_grad(*tensors: Tensor | None) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _gather(graph, data: Tensor, target: str) -> Tensor:
    src, dst = graph.coo()
    if target == "e":
        return data.clone()
    return data.index_select(0, src if target == "u" else dst)
