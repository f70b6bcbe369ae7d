"""The CPU kernels by backend name, and the `auto` backend that picks one per kernel class.

Names: 'native' (the host's widest variant), 'native:VARIANT' (one instruction-set build,
see `_native_build`), 'numba', 'mkl' (copy_u sum/mean through torch.sparse.mm) and
'auto', which classifies each call (`_autotune.KernelClass`), asks `_autotune.choice`
for the fastest candidate measured on this machine and runs it. Every kernel here has the
contract of `_cpu.gspmm_cpu` / `mean_grad_cpu` / `extreme_grad_cpu`; under 'auto', copy
max/min winners are in the graph's index dtype whichever candidate ran (the custom op's
fake implementation declares them so).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
from torch import Tensor

from gnnforge.ops import _autotune, _trials
from gnnforge.ops._cpu import extreme_grad_cpu, gsddmm_cpu, gspmm_cpu, mean_grad_cpu
from gnnforge.ops._mkl import gspmm_mkl
from gnnforge.ops._native import available as native_available
from gnnforge.ops._native import extreme_grad_native, gsddmm_native, gspmm_native, mean_grad_native

__all__ = ["extreme_grad_kernel", "gsddmm_auto", "gspmm_auto", "is_cpu_backend", "mean_grad_kernel",
           "sddmm_kernel", "spmm_kernel"]

_COPY_OPS = ("copy_lhs", "copy_rhs")
_NATIVE_SDDMM_OPS = ("add", "mul", "dot")
_DTYPE_NAMES = {torch.float64: "float64"}  # everything else computes in float32


def is_cpu_backend(name: str) -> bool:
    """True for the names this module resolves (CPU kernels)."""
    return name in ("auto", "native", "numba", "mkl") or name.startswith("native:")


def _variant(name: str) -> str | None:
    return name.split(":", 1)[1] if name.startswith("native:") else None


@functools.lru_cache(maxsize=None)
def spmm_kernel(name: str) -> Callable:
    """The g-SpMM kernel of backend `name`."""
    if name == "auto":
        return gspmm_auto
    if name == "numba":
        return gspmm_cpu
    if name == "mkl":
        return gspmm_mkl
    return functools.partial(gspmm_native, variant=_variant(name))


@functools.lru_cache(maxsize=None)
def sddmm_kernel(name: str) -> Callable:
    """The g-SDDMM kernel of backend `name`: numba's for numba and mkl, the measured
    fastest for auto, else the native library's."""
    if name == "auto":
        return gsddmm_auto
    if name in ("numba", "mkl"):
        return gsddmm_cpu
    return functools.partial(gsddmm_native, variant=_variant(name))


@functools.lru_cache(maxsize=None)
def mean_grad_kernel(name: str) -> Callable:
    """The copy_u-mean gradient kernel of backend `name` (mkl has none: numba's)."""
    if name == "auto":
        return _mean_grad_auto
    if name in ("numba", "mkl"):
        return mean_grad_cpu
    return functools.partial(mean_grad_native, variant=_variant(name))


@functools.lru_cache(maxsize=None)
def extreme_grad_kernel(name: str) -> Callable:
    """The copy_u max/min gradient kernel of backend `name` (mkl has none: numba's)."""
    if name == "auto":
        return _extreme_grad_auto
    if name in ("numba", "mkl"):
        return extreme_grad_cpu
    return functools.partial(extreme_grad_native, variant=_variant(name))


def _class(primitive: str, reduce: str, data: Tensor, index: Tensor, width: int,
           gathered_rows: int) -> _autotune.KernelClass:
    """The kernel class of a call gathering `gathered_rows` rows of `width` from `data`."""
    return _classify(primitive, reduce, data.dtype, index.dtype, width,
                     gathered_rows * width * data.dtype.itemsize)


@functools.lru_cache(maxsize=4096)
def _classify(primitive: str, reduce: str, dtype: torch.dtype, index: torch.dtype, width: int,
              gathered_bytes: int) -> _autotune.KernelClass:
    # Cached: a call's selection costs one lookup here and one in `_autotune.choice`.
    return _autotune.KernelClass(primitive, reduce, _DTYPE_NAMES.get(dtype, "float32"),
                                 "int64" if index == torch.int64 else "int32",
                                 _autotune.width_class(width, dtype),
                                 _autotune.size_class(gathered_bytes))


def _graph_key(pointers: Tensor, indices: Tensor) -> _trials.GraphKey:
    """Identifies a call's graph structure for `_trials` (its index arrays' memory)."""
    return (pointers.data_ptr(), indices.data_ptr(), pointers.shape[0], indices.shape[0])


def _binary_primitive(op: str, lhs: Tensor, rhs: Tensor) -> str:
    """`op`, or `op_heads` for GAT's per-head broadcast ([N, H, D] with [E, H, 1], H and
    D > 1): its kernels rank differently (Pubmed, 8 heads x 8: native 7.8 ms, numba 4.7)."""
    small, large = sorted((lhs, rhs), key=lambda tensor: math.prod(tensor.shape[1:]))
    if (small.dim() == 3 and large.dim() == 3 and small.shape[2] == 1 and large.shape[2] > 1
            and small.shape[1] == large.shape[1] > 1):
        return f"{op}_heads"
    return op


def gspmm_auto(rowptr: Tensor, col: Tensor, eids: Tensor, lhs: Tensor | None,
               rhs: Tensor | None, op: str, reduce: str,
               record_args: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """g-SpMM by the candidate measured fastest for this call's kernel class."""
    if op in _COPY_OPS:
        data = lhs if op == "copy_lhs" else rhs
        width = math.prod(data.shape[1:])
        kernel_class = _class(op, reduce, data, rowptr, width, data.shape[0])
    else:
        data = lhs if rhs is None or lhs.dtype == torch.float64 else rhs
        width = max(math.prod(lhs.shape[1:]), math.prod(rhs.shape[1:]))
        primitive = _binary_primitive(op, lhs, rhs)
        gathered_bytes = max(lhs.shape[0], rhs.shape[0]) * width * data.dtype.itemsize
        class_width = max(lhs.shape[-1], rhs.shape[-1]) if primitive.endswith("_heads") \
            else width                     # per-head classes: one head's row (_autotune)
        kernel_class = _classify(primitive, reduce, data.dtype, rowptr.dtype, class_width,
                                 gathered_bytes)
    out, arg_lhs, arg_rhs = _trials.run(
        kernel_class, _graph_key(rowptr, col), col.shape[0] * width,
        lambda name: spmm_kernel(name)(rowptr, col, eids, lhs, rhs, op, reduce, record_args))
    # Winners in the index dtype (numba's are int64); the unread side stays empty int64.
    arg_lhs = arg_lhs.to(rowptr.dtype) if arg_lhs.dim() == 2 else arg_lhs
    arg_rhs = arg_rhs.to(rowptr.dtype) if arg_rhs.dim() == 2 else arg_rhs
    return out, arg_lhs, arg_rhs


def gsddmm_auto(lhs_row: Tensor, rhs_row: Tensor, lhs: Tensor, rhs: Tensor,
                op: str) -> Tensor:
    """g-SDDMM by the candidate measured fastest for this call's kernel class (the ops the
    native library lacks, sub and div, are numba's wherever they run)."""
    if op not in _NATIVE_SDDMM_OPS or not native_available():
        return gsddmm_cpu(lhs_row, rhs_row, lhs, rhs, op)
    data = lhs if lhs.dtype == torch.float64 else rhs
    width = max(math.prod(lhs.shape[1:]), math.prod(rhs.shape[1:]))
    kernel_class = _class(f"sddmm_{op}", "-", data, lhs_row, width,
                          max(lhs.shape[0], rhs.shape[0]))
    return _trials.run(kernel_class, _graph_key(lhs_row, rhs_row), lhs_row.shape[0] * width,
                       lambda name: sddmm_kernel(name)(lhs_row, rhs_row, lhs, rhs, op))


def _mean_grad_auto(colptr: Tensor, row: Tensor, rowptr: Tensor, grad: Tensor,
                    num_src: int) -> Tensor:
    width = math.prod(grad.shape[1:])
    kernel_class = _class("mean_grad", "-", grad, colptr, width, grad.shape[0])
    return _trials.run(kernel_class, _graph_key(colptr, row), row.shape[0] * width,
                       lambda name: mean_grad_kernel(name)(colptr, row, rowptr, grad, num_src))


def _extreme_grad_auto(colptr: Tensor, row: Tensor, arg: Tensor, grad: Tensor,
                       num_src: int) -> Tensor:
    width = math.prod(grad.shape[1:])
    kernel_class = _class("extreme_grad", "-", grad, colptr, width, grad.shape[0])
    return _trials.run(kernel_class, _graph_key(colptr, row), row.shape[0] * width,
                       lambda name: extreme_grad_kernel(name)(colptr, row, arg, grad, num_src))
