"""GINE's edge message and sum in one pass: out_v = sum_{e=(u,v)} relu(x_u + table[code_e]).

The unfused form gathers x[src] into [E, F], adds the edge features, applies ReLU (a
third [E, F]), sums to destinations, and backward walks those [E, F] tensors again and
scatters the gathered gradient into x with a serial index_add. Here forward pulls over
CSR by destination and writes each output row once; backward recomputes the ReLU mask
per edge and accumulates straight into grad_x and grad_table, so no [E, F] tensor is
ever built. Edge features come as rows of a small table indexed per edge (`code`): a
molecule's bond features take only 60 distinct values, so the bond embedding is a
[60, F] table and never expanded to [E, F]; plain [E, F] edge features use code = edge id.

CPU, float32/float64, numba (serial: one output row per row, deterministic).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
import torch
from torch import Tensor

from gnnforge.ops._dispatch import choose
from gnnforge.ops._edge_softmax import native_variant
from gnnforge.ops._graph_arrays import index_dtype
from gnnforge.ops._native_gine import gine_backward_native, gine_forward_native

__all__ = ["fused_gine_available", "gine_message_sum"]

_JIT = dict(nogil=True, cache=True, boundscheck=False)


@numba.njit(**_JIT)
def _forward(rowptr, col, eids, code, x, table, scale, out):  # pragma: no cover - compiled
    width = x.shape[1]
    for v in range(rowptr.shape[0] - 1):
        if scale != 0:
            for f in range(width):
                out[v, f] = scale * x[v, f]
        for j in range(rowptr[v], rowptr[v + 1]):
            u, c = col[j], code[eids[j]]
            for f in range(width):
                m = x[u, f] + table[c, f]
                if m > 0:
                    out[v, f] += m


@numba.njit(**_JIT)
def _backward(rowptr, col, eids, code, x, table, scale, grad, grad_x,
              grad_table):  # pragma: no cover - compiled
    width = x.shape[1]
    for v in range(rowptr.shape[0] - 1):
        if scale != 0:
            for f in range(width):
                grad_x[v, f] += scale * grad[v, f]
        for j in range(rowptr[v], rowptr[v + 1]):
            u, c = col[j], code[eids[j]]
            for f in range(width):
                if x[u, f] + table[c, f] > 0:
                    g = grad[v, f]
                    grad_x[u, f] += g
                    grad_table[c, f] += g


def fused_gine_available(x: Tensor, table: Tensor) -> bool:
    """True when the fused kernel handles these operands (CPU, same float32/64 dtype, 2-D)."""
    return (x.device.type == "cpu" and table.device.type == "cpu" and x.dim() == 2
            and table.dim() == 2 and x.dtype == table.dtype
            and x.dtype in (torch.float32, torch.float64))


def gine_message_sum(graph: Any, x: Tensor, table: Tensor, code: Tensor | None = None,
                     self_weight: Tensor | None = None) -> Tensor:
    """[num_dst, F] sum over in-edges e = (u, v) of relu(x[u] + table[code[e]]), plus
    self_weight * x[v] when given (GINE's (1 + eps) x_v term, fused into the same pass).

    Args:
        graph: Graph, GraphBatch or block (the `csr()` kernel protocol; destination v is
            source row v, as for GIN).
        x: [num_src_nodes, F] float32/float64 CPU.
        table: [K, F] edge feature rows, same dtype.
        code: [E] int64 row of `table` per edge (edge-id order); None: table is [E, F].
        self_weight: a one-element tensor (differentiable), or None for no self term.

    Raises:
        ValueError: on mismatched widths or row counts, or a code outside the table.
    """
    if table.shape[-1] != x.shape[-1]:
        raise ValueError(f"gine_message_sum: table width {table.shape[-1]} != x width "
                         f"{x.shape[-1]}")
    identity = code is None
    if code is None:
        if table.shape[0] != graph.num_edges:
            raise ValueError(f"gine_message_sum: table has {table.shape[0]} rows for "
                             f"{graph.num_edges} edges and no code was given")
        code = torch.arange(graph.num_edges)
    elif code.shape != (graph.num_edges,):
        raise ValueError(f"gine_message_sum: code must be [{graph.num_edges}], got "
                         f"{tuple(code.shape)}")
    rowptr, col, eids = graph.csr()
    if self_weight is None:
        self_weight = x.new_zeros(1)
    elif self_weight.numel() != 1 or graph.num_dst_nodes > x.shape[0]:
        raise ValueError(f"gine_message_sum: self_weight must have one element and x one row "
                         f"per destination, got {tuple(self_weight.shape)} and {x.shape[0]} rows "
                         f"for {graph.num_dst_nodes} destinations")
    code = code.to(torch.int64)
    variant = native_variant(choose("gspmm", x.device).backend)
    # The native backward pulls over the CSC; a CSR-only view (a packed batch's real-node
    # prefix) keeps the numba kernels.
    if variant is not None and _eager(x, table, self_weight) and hasattr(graph, "csc"):
        if code.numel() and (int(code.min()) < 0 or int(code.max()) >= table.shape[0]):
            raise ValueError(f"gine_message_sum: code values must lie in [0, "
                             f"{table.shape[0]}), got [{int(code.min())}, {int(code.max())}]")
        forced = choose("gspmm", x.device).index_dtype
        return _NativeGineMessageSum.apply(x, table, self_weight,
                                           None if identity else code.contiguous(), graph,
                                           index_dtype(graph, forced), variant or None)
    if _eager(x, table, self_weight):
        return _GineMessageSum.apply(x, table, self_weight, code, rowptr, col, eids)
    # Traced: the custom op, on the same kernels as the eager path (the native library's
    # when it is the chosen backend, with the CSC its backward pulls over; else numba's).
    if variant is None:
        csc = (rowptr.new_empty(0),) * 3
    else:
        indices = index_dtype(graph, choose("gspmm", x.device).index_dtype)
        (rowptr, col, eids), csc = graph.csr(indices), graph.csc(indices)
    return gine_op(x, table, self_weight, code, rowptr, col, eids, *csc,
                   "numba" if variant is None else f"native:{variant}")


def _eager(*tensors: Tensor) -> bool:
    """Plain tensors outside torch.compile: the autograd.Function (less per-call overhead);
    traced or fake tensors take the custom op, which torch.compile sees through."""
    return not torch.compiler.is_compiling() and all(type(t) in _PLAIN for t in tensors)


_PLAIN = (Tensor, torch.nn.Parameter)


def _run_forward(x, table, self_weight, code, rowptr, col, eids) -> Tensor:
    x, table = x.contiguous(), table.contiguous()
    out = x.new_zeros(rowptr.numel() - 1, x.shape[1])
    _forward(*_numpy(rowptr, col, eids, code, x, table), float(self_weight), out.numpy())
    return out


def _run_backward(grad, x, table, self_weight, code, rowptr, col, eids):
    x, table, grad = x.contiguous(), table.contiguous(), grad.contiguous()
    grad_x, grad_table = torch.zeros_like(x), torch.zeros_like(table)
    _backward(*_numpy(rowptr, col, eids, code, x, table), float(self_weight), grad.numpy(),
              grad_x.numpy(), grad_table.numpy())
    return grad_x, grad_table


def _check_code(code: Tensor, table: Tensor) -> None:
    # Checked inside the op, so traced calls are checked too: the kernels do not
    # bounds-check, and under torch.compile a data-dependent test outside an op would break
    # the graph.
    if code.numel() and (int(code.min()) < 0 or int(code.max()) >= table.shape[0]):
        raise ValueError(f"gine_message_sum: code values must lie in [0, {table.shape[0]}), "
                         f"got [{int(code.min())}, {int(code.max())}]")


def _native(backend: str) -> tuple[bool, str | None]:
    """(native?, variant) of the op's backend string ('numba' or 'native:VARIANT')."""
    if backend == "numba":
        return False, None
    return True, backend.split(":", 1)[1] or None


def _weight_grad(grad: Tensor, x: Tensor, self_weight: Tensor) -> Tensor:
    """d/dw sum_v <grad_v, w x_v> over the destination rows."""
    rows = grad.shape[0]
    return torch.vdot(grad.reshape(-1), x[:rows].reshape(-1)).reshape(
        self_weight.shape).to(self_weight.dtype)


class _GineMessageSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, table, self_weight, code, rowptr, col, eids):
        _check_code(code, table)
        ctx.save_for_backward(x, table, self_weight, code, rowptr, col, eids)
        return _run_forward(x, table, self_weight, code, rowptr, col, eids)

    @staticmethod
    def backward(ctx, grad):
        x, table, self_weight, code, rowptr, col, eids = ctx.saved_tensors
        grad_x, grad_table = _run_backward(grad, x, table, self_weight, code, rowptr, col, eids)
        grad_weight = _weight_grad(grad, x, self_weight) if ctx.needs_input_grad[2] else None
        return grad_x, grad_table, grad_weight, None, None, None, None


# ----------------------------------------------------------------------------- custom ops


@torch.library.custom_op("gnnforge::gine_message_sum", mutates_args=())
def gine_op(x: Tensor, table: Tensor, self_weight: Tensor, code: Tensor, rowptr: Tensor,
            col: Tensor, eids: Tensor, colptr: Tensor, row: Tensor, ceids: Tensor,
            backend: str) -> Tensor:
    """[num_dst, F] the fused GINE message sum (see `gine_message_sum`).

    CSR by destination for the forward; CSC by source (empty for numba) for the native
    backward. backend: 'numba' or 'native:VARIANT' ('native:' the default build).
    """
    _check_code(code, table)
    native, variant = _native(backend)
    if native:
        out = gine_forward_native(rowptr, col, eids, code, x.contiguous(), table.contiguous(),
                                  float(self_weight), variant)
        return out.clone()  # a fresh tensor: pooled buffers are reused after release
    return _run_forward(x, table, self_weight, code, rowptr, col, eids)


@gine_op.register_fake
def _(x, table, self_weight, code, rowptr, col, eids, colptr, row, ceids, backend):
    return x.new_empty((rowptr.shape[0] - 1, x.shape[1]))


@torch.library.custom_op("gnnforge::gine_message_sum_backward", mutates_args=())
def gine_backward_op(grad: Tensor, x: Tensor, table: Tensor, self_weight: Tensor,
                     code: Tensor, rowptr: Tensor, col: Tensor, eids: Tensor, colptr: Tensor,
                     row: Tensor, ceids: Tensor, backend: str) -> tuple[Tensor, Tensor]:
    """(grad_x [N, F], grad_table [K, F]) of the fused GINE message sum."""
    native, variant = _native(backend)
    if native:
        grad_x, grad_table = gine_backward_native(
            (rowptr, col, eids), (colptr, row, ceids), code, x.contiguous(),
            table.contiguous(), float(self_weight), grad.contiguous(), variant)
        return grad_x.clone(), grad_table.clone()
    return _run_backward(grad, x, table, self_weight, code, rowptr, col, eids)


@gine_backward_op.register_fake
def _(grad, x, table, self_weight, code, rowptr, col, eids, colptr, row, ceids, backend):
    return torch.empty_like(x), torch.empty_like(table)


def _setup(ctx, inputs, output):
    *tensors, backend = inputs
    ctx.save_for_backward(*tensors)
    ctx.backend = backend


def _op_backward(ctx, grad):
    x, table, self_weight, code, *graph = ctx.saved_tensors
    grad_x, grad_table = gine_backward_op(grad, x, table, self_weight, code, *graph,
                                          ctx.backend)
    grad_weight = _weight_grad(grad, x, self_weight) if ctx.needs_input_grad[2] else None
    return grad_x, grad_table, grad_weight, None, None, None, None, None, None, None, None


gine_op.register_autograd(_op_backward, setup_context=_setup)


def _numpy(*tensors: Tensor) -> list[np.ndarray]:
    return [t.detach().numpy() for t in tensors]


class _NativeGineMessageSum(torch.autograd.Function):
    """The native library's kernels (`gnnforge.ops._native_gine`): parallel pulls both ways."""

    @staticmethod
    def forward(ctx, x, table, self_weight, code, graph, index_dtype, variant):
        x, table = x.contiguous(), table.contiguous()
        scale = float(self_weight)
        out = gine_forward_native(*graph.csr(index_dtype), code, x, table, scale, variant)
        ctx.save_for_backward(x, table, self_weight, code)
        ctx.graph, ctx.index_dtype, ctx.scale, ctx.variant = graph, index_dtype, scale, variant
        return out

    @staticmethod
    def backward(ctx, grad):
        x, table, self_weight, code = ctx.saved_tensors
        grad = grad.contiguous()
        grad_x, grad_table = gine_backward_native(
            ctx.graph.csr(ctx.index_dtype), ctx.graph.csc(ctx.index_dtype), code, x, table,
            ctx.scale, grad, ctx.variant)
        grad_weight = _weight_grad(grad, x, self_weight) if ctx.needs_input_grad[2] else None
        return grad_x, grad_table, grad_weight, None, None, None, None
