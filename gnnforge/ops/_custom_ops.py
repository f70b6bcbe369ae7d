"""`gnnforge::gspmm` and `gnnforge::gsddmm`: the fast backends as torch.library custom ops.

Each op has a fake (shape-only) implementation, so torch.compile can trace through it, and
a registered backward written DGL-style with the same two ops (g-SpMM on the reversed
graph, g-SDDMM), so it saves only what the gradient needs and second derivatives work.
max/min gradients flow through the arg indices the forward records.

The kernel a backend name runs is looked up here (`kernel`: the CPU names through
`_auto_kernels`, 'torch' and 'triton' in `KERNELS`); which name runs is `_dispatch`'s
choice, made by the public functions above.

Eager calls skip the custom-op machinery: `spmm` runs the same kernel and backward
through a plain `torch.autograd.Function` (about 3x less per-call overhead, measured in
docs/kernels.md) unless torch.compile is tracing, which keeps the custom op.

The graph travels as a list of eight tensors (`GraphArrays`): CSR by destination
(rowptr, col, eids), CSC by source (colptr, row, ceids) and COO (src, dst, int64), at the
positions `_layout` names. The CSC and COO are empty tensors when no gradient will be
needed (a forward-only call on a new sampled block then never builds them). Operands
arrive padded (`_shapes`), and only copy_lhs / copy_rhs / add / mul / dot reach here: the
public layer rewrites sub and div.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from gnnforge.ops._auto_kernels import (
    extreme_grad_kernel,
    is_cpu_backend,
    mean_grad_kernel,
    sddmm_kernel,
    spmm_kernel,
)
from gnnforge.ops._edge_order import edge_ordered, reads_edge_rows
from gnnforge.ops._layout import COL, COLPTR, DST, EIDS, ROW, ROWPTR, SRC, reverse_arrays
from gnnforge.ops._native import available as native_available
from gnnforge.ops._native_binary import extreme_grad_native as binary_extreme_grad_native
from gnnforge.ops._shapes import broadcast_offsets, output_feature_shape, reduce_to_shape
from gnnforge.ops._torch_path import gsddmm_torch, gspmm_torch
from gnnforge.ops._triton import gsddmm_triton, gspmm_triton

__all__ = ["KERNELS", "eager", "kernel", "mean_scaled", "sddmm_op", "spmm", "spmm_op"]

# (op family, backend) -> kernel, for the backends that are not CPU kernel tables
# (`_auto_kernels` resolves 'auto', 'native[:VARIANT]', 'numba' and 'mkl').
KERNELS = {
    ("gspmm", "torch"): gspmm_torch,   # any device and dtype PyTorch's scatter supports
    ("gsddmm", "torch"): gsddmm_torch,
    ("gspmm", "triton"): gspmm_triton,   # CUDA (CPU under TRITON_INTERPRET=1); imports lazily
    ("gsddmm", "triton"): gsddmm_triton,
}


def kernel(family: str, backend: str) -> Callable:
    """The kernel of `family` ('gspmm' or 'gsddmm') for backend `backend`."""
    if is_cpu_backend(backend):
        return spmm_kernel(backend) if family == "gspmm" else sddmm_kernel(backend)
    return KERNELS[(family, backend)]


def _shape(tensor: Tensor | None) -> tuple[int, ...] | None:
    return None if tensor is None else tuple(tensor.shape[1:])


def _dtype(lhs: Tensor | None, rhs: Tensor | None) -> torch.dtype:
    if lhs is None or rhs is None:
        return (lhs if rhs is None else rhs).dtype
    return torch.promote_types(lhs.dtype, rhs.dtype)


# ----------------------------------------------------------------------------- g-SpMM


@torch.library.custom_op("gnnforge::gspmm", mutates_args=())
def spmm_op(arrays: list[Tensor], lhs: Tensor | None, rhs: Tensor | None, op: str,
            reduce: str, backend: str, record_args: bool) -> tuple[Tensor, Tensor, Tensor]:
    """(out [M, *F], arg_lhs, arg_rhs); see `_cpu.gspmm_cpu` for the arg contract.

    record_args=False skips the max/min arg indices (empty outputs): a forward that no
    gradient follows then runs a branch-free, vectorised max.
    """
    return _spmm_kernel(arrays, lhs, rhs, op, reduce, backend, record_args)


@spmm_op.register_fake
def _(arrays, lhs, rhs, op, reduce, backend, record_args):
    rows = arrays[ROWPTR].shape[0] - 1
    out_shape = output_feature_shape(op, _shape(lhs), _shape(rhs))
    operand = lhs if lhs is not None else rhs
    out = operand.new_empty((rows, *out_shape), dtype=_dtype(lhs, rhs))
    extreme = reduce in ("max", "min") and record_args
    arg_dtype = _arg_dtype(arrays, op, backend)

    def winners(side: Tensor | None) -> Tensor:
        # [M, prod(F)] winners for each operand a max/min reads; a 1-D empty int64 tensor
        # for an operand it does not read (copy ops) and whenever none are recorded.
        if extreme and side is not None:
            return operand.new_empty((rows, math.prod(out_shape)), dtype=arg_dtype)
        return operand.new_empty((0,), dtype=torch.int64)

    return out, winners(lhs), winners(rhs)


def _arg_dtype(arrays: list[Tensor], op: str, backend: str) -> torch.dtype:
    """dtype of the recorded max/min winners: the index dtype on the native and auto
    backends (auto converts a numba winner's), int64 elsewhere."""
    if backend == "auto" or backend.startswith("native"):
        return arrays[ROWPTR].dtype
    return torch.int64


def eager(*tensors: Tensor | None) -> bool:
    """True outside torch.compile / fake-tensor tracing: plain tensors (or Parameters).

    Any other Tensor subclass (FakeTensor, FunctionalTensor, user subclasses) takes the
    custom op, which PyTorch knows how to trace and dispatch.
    """
    return (not torch.compiler.is_compiling()
            and all(t is None or type(t) in _PLAIN for t in tensors))


_PLAIN = (Tensor, torch.nn.Parameter)


def spmm(arrays: list[Tensor], lhs: Tensor | None, rhs: Tensor | None, op: str, reduce: str,
         backend: str, record_args: bool) -> tuple[Tensor, Tensor, Tensor]:
    """`spmm_op`'s result and gradients, by the cheapest route that keeps both.

    Traced (torch.compile): the custom op. Eager with a gradient to record: the
    autograd.Function (measured 63 us vs 106 us per tiny call). Eager without one (plain
    forward, or inside a backward): the kernel itself (19 us vs 37 us).
    """
    if not eager(lhs, rhs):
        return spmm_op(arrays, lhs, rhs, op, reduce, backend, record_args)
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (lhs, rhs)):
        function = (_SpmmFunction if torch._C._are_functorch_transforms_active()
                    else _SpmmFunctionNoBind)
        return function.apply(arrays, lhs, rhs, op, reduce, backend, record_args)
    return _spmm_kernel(arrays, lhs, rhs, op, reduce, backend, record_args)


def _spmm_kernel(arrays, lhs, rhs, op, reduce, backend, record_args):
    col, eids = arrays[COL], arrays[EIDS]
    if is_cpu_backend(backend) and reads_edge_rows(rhs, reduce, eids):
        # Wide edge rows summed: read them in storage order where the edge list is
        # grouped by destination (_edge_order).
        col, eids = edge_ordered(arrays[ROWPTR], col, eids) or (col, eids)
    return kernel("gspmm", backend)(arrays[ROWPTR], col, eids, lhs, rhs, op, reduce,
                                    record_args)


def _spmm_setup(ctx, inputs, output):
    arrays, lhs, rhs, op, reduce, backend, record_args = inputs
    if isinstance(ctx, torch.autograd.function.FunctionCtx):
        # The arg outputs get no gradient; without this autograd fills [M, K] int64 zeros
        # for them on every backward (measured 6 ms per call on R-MAT F=16).
        ctx.mark_non_differentiable(output[1], output[2])
        ctx.set_materialize_grads(False)
    ctx.op, ctx.reduce, ctx.backend, ctx.record_args = op, reduce, backend, record_args
    ctx.lhs_shape, ctx.rhs_shape = _shape(lhs), _shape(rhs)
    ctx.lhs_rows = None if lhs is None else lhs.shape[0]
    ctx.rhs_rows = None if rhs is None else rhs.shape[0]
    keep_lhs = lhs if op in ("mul", "dot") else None
    keep_rhs = rhs if op in ("mul", "dot") else None
    ctx.save_for_backward(*arrays, keep_lhs, keep_rhs, output[1], output[2])


def _spmm_backward(ctx, grad_out, _grad_arg_lhs, _grad_arg_rhs):
    *arrays, lhs, rhs, arg_lhs, arg_rhs = ctx.saved_tensors
    if ctx.reduce in ("max", "min"):
        if not ctx.record_args:  # the kernels would read winners that were never written
            raise RuntimeError(f"gnnforge::gspmm: {ctx.op} {ctx.reduce} ran with "
                               f"record_args=False, which records no winners to "
                               f"differentiate through; call it with record_args=True")
        grad_lhs, grad_rhs = _extreme_grads(ctx, arrays, grad_out, lhs, rhs, arg_lhs, arg_rhs)
    else:
        grad_lhs, grad_rhs = _sum_grads(ctx, arrays, grad_out, lhs, rhs)
    return [None] * 8, grad_lhs, grad_rhs, None, None, None, None


def _sum_grads(ctx, arrays, grad_out, lhs, rhs):
    op, backend = ctx.op, ctx.backend
    if (ctx.reduce == "mean" and op == "copy_lhs" and is_cpu_backend(backend)
            and not torch.is_grad_enabled() and eager(grad_out)):
        rows = grad_out.reshape(grad_out.shape[0], math.prod(grad_out.shape[1:]))
        grad = mean_grad_kernel(backend)(arrays[COLPTR], arrays[ROW], arrays[ROWPTR], rows,
                                         ctx.lhs_rows)
        return reduce_to_shape(grad.reshape(-1, *grad_out.shape[1:]), ctx.lhs_shape), None
    if ctx.reduce == "mean":
        grad_out = mean_scaled(arrays, grad_out)
    grad_lhs = grad_rhs = None
    if ctx.needs_input_grad[1]:
        reverse = reverse_arrays(arrays)
        if op in ("copy_lhs", "add"):
            grad = spmm(reverse, grad_out, None, "copy_lhs", "sum", backend, False)[0]
        else:  # mul, dot: d lhs[u] = sum over out-edges of grad[v] * rhs[e]
            grad = spmm(reverse, grad_out, rhs, "mul", "sum", backend, False)[0]
        grad_lhs = reduce_to_shape(grad, ctx.lhs_shape)
    if ctx.needs_input_grad[2]:
        if op in ("copy_rhs", "add"):
            grad = grad_out.index_select(0, arrays[DST])
        elif (op == "mul" and tuple(grad_out.shape[1:]) == ctx.lhs_shape
              and _scalar_groups(ctx.rhs_shape, ctx.lhs_shape) is not None):
            grad = _grouped_dot(arrays, lhs, grad_out, ctx.rhs_shape, backend)
        else:  # mul, dot: d rhs[e] = lhs[u] * grad[v]
            grad = sddmm_op(arrays, lhs, grad_out, "mul", "u", "v", backend)
        grad_rhs = reduce_to_shape(grad, ctx.rhs_shape)
    return grad_lhs, grad_rhs


def mean_scaled(arrays: list[Tensor], grad_out: Tensor) -> Tensor:
    """grad_out[v] / in-degree(v) (1 for rows without in-edges): copy-reduce mean's chain rule."""
    degree = (arrays[ROWPTR][1:] - arrays[ROWPTR][:-1]).clamp(min=1).to(grad_out.dtype)
    return grad_out / degree.reshape(-1, *[1] * (grad_out.dim() - 1))


def _scalar_groups(rhs_shape, lhs_shape) -> int | None:
    """H when rhs features are (f1..fk, 1, ..., 1) with lhs (f1..fk, ...) and a real tail."""
    for split in range(len(rhs_shape)):
        head, tail = rhs_shape[:split], rhs_shape[split:]
        if head == lhs_shape[:split] and all(s == 1 for s in tail) and lhs_shape[split:] != tail:
            return math.prod(head)
    return None


def _grouped_dot(arrays, lhs, grad_out, rhs_shape, backend):
    # d w[e, h] = <x[u, h, :], grad[v, h, :]>: a dot SDDMM, no E x D product materialised.
    heads = math.prod(rhs_shape)
    width = math.prod(lhs.shape[1:]) // max(heads, 1)
    left = lhs.reshape(lhs.shape[0], heads, width)
    right = grad_out.reshape(grad_out.shape[0], heads, width)
    grad = sddmm_op(arrays, left, right, "dot", "u", "v", backend)   # [E, H, 1]
    return grad.reshape(grad.shape[0], *rhs_shape)


def _extreme_grads(ctx, arrays, grad_out, lhs, rhs, arg_lhs, arg_rhs):
    out_shape = tuple(grad_out.shape[1:])
    grad_flat = grad_out.reshape(grad_out.shape[0], math.prod(out_shape))  # [M, K]
    if _native_binary_extreme(ctx, grad_flat, arrays, arg_rhs):
        return _extreme_grads_native(ctx, arrays, grad_flat, lhs, rhs, arg_lhs, arg_rhs,
                                     out_shape)
    grad_lhs = grad_rhs = None
    if ctx.needs_input_grad[1] and _pull_extreme_grad(ctx, grad_flat, arg_lhs):
        grad = extreme_grad_kernel(ctx.backend)(arrays[COLPTR], arrays[ROW], arg_lhs, grad_flat,
                                          ctx.lhs_rows)
        grad_lhs = reduce_to_shape(grad.reshape(-1, *out_shape), ctx.lhs_shape)
    elif ctx.needs_input_grad[1]:
        value = grad_flat
        if ctx.op == "mul":
            value = value * _gather_at(rhs, arg_rhs, out_shape)
        grad = _scatter_rows(value, arg_lhs, ctx.lhs_rows)
        grad_lhs = reduce_to_shape(grad.reshape(-1, *out_shape), ctx.lhs_shape)
    if ctx.needs_input_grad[2]:
        value = grad_flat
        if ctx.op == "mul":
            value = value * _gather_at(lhs, arg_lhs, out_shape)
        grad = _scatter_rows(value, arg_rhs, ctx.rhs_rows)
        grad_rhs = reduce_to_shape(grad.reshape(-1, *out_shape), ctx.rhs_shape)
    return grad_lhs, grad_rhs


def _native_binary_extreme(ctx, grad_flat: Tensor, arrays: list[Tensor], arg_rhs: Tensor) -> bool:
    """u_add/mul_e max/min on the native or auto backend, eager, no second derivative."""
    return ((ctx.backend == "auto" or ctx.backend.startswith("native"))
            and ctx.op in ("add", "mul") and not torch.is_grad_enabled()
            and arg_rhs.dtype == arrays[ROWPTR].dtype and arg_rhs.numel() > 0
            and eager(grad_flat, arg_rhs) and native_available())


def _extreme_grads_native(ctx, arrays, grad_flat, lhs, rhs, arg_lhs, arg_rhs, out_shape):
    """Both gradients from the recorded winners, no atomics (`binary_grad.cpp`)."""
    mul = ctx.op == "mul"
    variant = ctx.backend.split(":", 1)[1] if ctx.backend.startswith("native:") else None
    grad_lhs = grad_rhs = None
    if ctx.needs_input_grad[1]:
        grad = binary_extreme_grad_native(arrays[ROWPTR], arrays[EIDS], arg_lhs, arg_rhs,
                                          grad_flat, rhs if mul else None, out_shape,
                                          ctx.lhs_rows, source=True, variant=variant)
        grad_lhs = reduce_to_shape(grad.reshape(-1, *out_shape), ctx.lhs_shape)
    if ctx.needs_input_grad[2]:
        grad = binary_extreme_grad_native(arrays[ROWPTR], arrays[EIDS], arg_lhs, arg_rhs,
                                          grad_flat, lhs if mul else None, out_shape,
                                          ctx.rhs_rows, source=False, variant=variant)
        grad_rhs = reduce_to_shape(grad.reshape(-1, *out_shape), ctx.rhs_shape)
    return grad_lhs, grad_rhs


def _pull_extreme_grad(ctx, grad_flat: Tensor, arg: Tensor) -> bool:
    """copy_u max/min on a CPU backend, eager, no second derivative: the CSC kernel."""
    return (ctx.op == "copy_lhs" and is_cpu_backend(ctx.backend) and not torch.is_grad_enabled()
            and eager(grad_flat, arg))


def _gather_at(data: Tensor, rows: Tensor, out_shape) -> Tensor:
    """[M, K]: data's value at the winning row for each output feature (broadcast aware)."""
    offset = broadcast_offsets(tuple(data.shape[1:]), out_shape, False).to(rows.device)
    if data.shape[0] == 0:  # a graph without edges: every winner is -1
        return data.new_zeros(rows.shape)
    flat = data.reshape(-1)
    if flat.numel() == 0:  # no edges (or no source rows): every row has no winner (-1)
        return rows.new_zeros(rows.shape, dtype=data.dtype)
    width = math.prod(data.shape[1:])
    return flat[rows.long().clamp(min=0) * width + offset] * (rows >= 0)


def _scatter_rows(value: Tensor, rows: Tensor, num_rows: int) -> Tensor:
    """[num_rows, K]: value[v, k] added into row rows[v, k] (entries with -1 dropped)."""
    out = value.new_zeros(num_rows, value.shape[1])
    if num_rows == 0:  # nothing can have won (a graph without edges: every winner is -1)
        return out
    return out.scatter_add(0, rows.long().clamp(min=0), value * (rows >= 0))


spmm_op.register_autograd(_spmm_backward, setup_context=_spmm_setup)


class _SpmmFunction(torch.autograd.Function):
    """`spmm_op` without the custom-op dispatch: same kernel, setup and backward."""

    @staticmethod
    def forward(arrays, lhs, rhs, op, reduce, backend, record_args):
        return _spmm_kernel(arrays, lhs, rhs, op, reduce, backend, record_args)

    setup_context = staticmethod(_spmm_setup)

    @staticmethod
    def backward(ctx, grad_out, grad_arg_lhs, grad_arg_rhs):
        if grad_out is None:  # grads are not materialised (see _spmm_setup)
            return (None,) * 7
        _, grad_lhs, grad_rhs, *rest = _spmm_backward(ctx, grad_out, grad_arg_lhs,
                                                      grad_arg_rhs)
        return (None, grad_lhs, grad_rhs, *rest)


class _SpmmFunctionNoBind(torch.autograd.Function):
    """`_SpmmFunction` with the setup inside forward (PyTorch's older style).

    `Function.apply` binds the arguments through `inspect.signature` on every call when a
    separate `setup_context` exists (about 40 us per call on this machine); this class
    has none, so eager calls skip it. functorch transforms need `setup_context`, so
    `spmm` picks `_SpmmFunction` while one is active.
    """

    @staticmethod
    def forward(ctx, arrays, lhs, rhs, op, reduce, backend, record_args):
        output = _spmm_kernel(arrays, lhs, rhs, op, reduce, backend, record_args)
        _spmm_setup(ctx, (arrays, lhs, rhs, op, reduce, backend, record_args), output)
        return output

    backward = _SpmmFunction.backward


# ----------------------------------------------------------------------------- g-SDDMM


def _target_rows(arrays: list[Tensor], target: str, num_edges: int, device) -> Tensor:
    if target == "u":
        return arrays[SRC]
    if target == "v":
        return arrays[DST]
    return torch.arange(num_edges, device=device)


@torch.library.custom_op("gnnforge::gsddmm", mutates_args=())
def sddmm_op(arrays: list[Tensor], lhs: Tensor, rhs: Tensor, op: str, lhs_target: str,
             rhs_target: str, backend: str) -> Tensor:
    """out [E, *F] = op(lhs[lhs_target(e)], rhs[rhs_target(e)]) for binary ops."""
    num_edges = arrays[SRC].shape[0]
    sddmm_kernel = kernel("gsddmm", backend)
    return sddmm_kernel(_target_rows(arrays, lhs_target, num_edges, lhs.device),
                  _target_rows(arrays, rhs_target, num_edges, lhs.device), lhs, rhs, op)


@sddmm_op.register_fake
def _(arrays, lhs, rhs, op, lhs_target, rhs_target, backend):
    out_shape = output_feature_shape(op, _shape(lhs), _shape(rhs))
    return lhs.new_empty((arrays[SRC].shape[0], *out_shape), dtype=_dtype(lhs, rhs))


def _sddmm_setup(ctx, inputs, output):
    arrays, lhs, rhs, op, lhs_target, rhs_target, backend = inputs
    ctx.op, ctx.backend = op, backend
    ctx.targets = (lhs_target, rhs_target)
    ctx.shapes = (_shape(lhs), _shape(rhs))
    keep = op in ("mul", "dot")
    ctx.save_for_backward(*arrays, lhs if keep else None, rhs if keep else None)


def _sddmm_backward(ctx, grad_out):
    *arrays, lhs, rhs = ctx.saved_tensors
    lhs_target, rhs_target = ctx.targets
    grad_lhs = grad_rhs = None
    if ctx.needs_input_grad[1]:
        grad = _operand_grad(ctx, arrays, grad_out, rhs, lhs_target, rhs_target)
        grad_lhs = reduce_to_shape(grad, ctx.shapes[0])
    if ctx.needs_input_grad[2]:
        grad = _operand_grad(ctx, arrays, grad_out, lhs, rhs_target, lhs_target)
        grad_rhs = reduce_to_shape(grad, ctx.shapes[1])
    return [None] * 8, grad_lhs, grad_rhs, None, None, None, None


def _operand_grad(ctx, arrays, grad_out, other, target, other_target):
    """Gradient of one operand of add/mul/dot (both commute), in broadcast feature shape.

    Edge-level gradients are summed onto the operand's nodes by a g-SpMM over the graph
    whose destinations are that operand's target: the graph itself for 'v', its reverse
    for 'u'.
    """
    backend = ctx.backend
    if target == "e":
        if ctx.op == "add":
            return grad_out
        return sddmm_op(arrays, grad_out, other, "mul", "e", other_target, backend)
    graph = arrays if target == "v" else reverse_arrays(arrays)
    if ctx.op == "add":
        return spmm(graph, None, grad_out, "copy_rhs", "sum", backend, False)[0]
    if other_target == target:
        return spmm(graph, None, grad_out, "copy_rhs", "sum", backend, False)[0] * other
    if other_target == "e":
        return spmm(graph, None, grad_out * other, "copy_rhs", "sum", backend, False)[0]
    return spmm(graph, other, grad_out, "mul", "sum", backend, False)[0]


sddmm_op.register_autograd(_sddmm_backward, setup_context=_sddmm_setup)
