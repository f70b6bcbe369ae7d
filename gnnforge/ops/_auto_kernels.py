"""The `auto` backend: per call, the CPU kernel measured fastest for its kernel class.

Each call is classified (`_kernel_class.classify`), the calibration's choice for the class
(`_calibration.choice`, with this module handing in the CPU kernels of `_cpu_kernels` as
the candidates) runs, refined on the real graph where candidates were close
(`_trials.run`, handed that choice). `tune` measures the common classes up front. Also
resolves every CPU backend name ('auto', 'native[:VARIANT]', 'numba', 'mkl') to its
kernels, for the custom ops' kernel table (`_custom_ops.kernel`). Under 'auto',
copy max/min winners are in the graph's index dtype whichever candidate ran (the custom
op's fake implementation declares them so).

The top of kernel selection: vocabulary < record < calibration and trials (side by side)
< this module, which joins them to the CPU kernels.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TypeVar

import torch
from torch import Tensor

from gnnforge.ops import _calibration, _cpu_kernels, _trials, _tuning_record
from gnnforge.ops._cpu import gsddmm_cpu
from gnnforge.ops._cpu_kernels import fixed_extreme_grad, fixed_mean_grad, fixed_sddmm, fixed_spmm
from gnnforge.ops._kernel_class import KernelClass, classify
from gnnforge.ops._native import available as native_available

__all__ = ["extreme_grad_kernel", "forget", "gsddmm_auto", "gspmm_auto", "is_cpu_backend",
           "mean_grad_kernel", "sddmm_kernel", "spmm_kernel", "tune"]

Result = TypeVar("Result")

_COPY_OPS = ("copy_lhs", "copy_rhs")
_NATIVE_SDDMM_OPS = ("add", "mul", "dot")


def is_cpu_backend(name: str) -> bool:
    """True for the names this module resolves (CPU kernels)."""
    return name in ("auto", "native", "numba", "mkl") or name.startswith("native:")


def spmm_kernel(name: str) -> Callable:
    """The g-SpMM kernel of CPU backend `name`."""
    return gspmm_auto if name == "auto" else fixed_spmm(name)


def sddmm_kernel(name: str) -> Callable:
    """The g-SDDMM kernel of CPU backend `name` (the measured fastest for auto)."""
    return gsddmm_auto if name == "auto" else fixed_sddmm(name)


def mean_grad_kernel(name: str) -> Callable:
    """The copy_u-mean gradient kernel of CPU backend `name`."""
    return _mean_grad_auto if name == "auto" else fixed_mean_grad(name)


def extreme_grad_kernel(name: str) -> Callable:
    """The copy_u max/min gradient kernel of CPU backend `name`."""
    return _extreme_grad_auto if name == "auto" else fixed_extreme_grad(name)


def forget() -> None:
    """Drop this process's view of the record and the choices refined on real inputs
    (tests; after GNNFORGE_ISA changes)."""
    _tuning_record.forget()
    _trials.forget()


def tune(classes: list[KernelClass] | None = None, force: bool = False,
         progress: bool = False) -> dict[str, dict]:
    """Measure the CPU kernels of some kernel classes now and record the winners.

    Args:
        classes: which classes; default `_calibration.common_classes()`.
        force: measure again even where a choice is recorded (with the default
            classes: the common ones and every class the record holds).
        progress: show a progress bar.

    Returns:
        `measured_classes()` after tuning.
    """
    return _calibration.tune(_cpu_kernels, classes, force, progress)


def _run(kernel_class: KernelClass, graph: _trials.GraphKey, work: int,
         call: Callable[[str], Result]) -> Result:
    """`call(name)` for the candidate to run: the calibration's choice for the class,
    refined on `graph` by the trials (which also time its source-blocked forms)."""
    calibrated = _calibration.choice(kernel_class, _cpu_kernels)
    return _trials.run(kernel_class, calibrated, graph, work, call,
                       functools.partial(_cpu_kernels.forms, kernel_class, calibrated))


def _class(primitive: str, reduce: str, data: Tensor, index: Tensor, width: int,
           gathered_rows: int) -> KernelClass:
    """The kernel class of a call gathering `gathered_rows` rows of `width` from `data`."""
    return classify(primitive, reduce, data.dtype, index.dtype, width,
                    gathered_rows * width * data.dtype.itemsize)


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
            else width                     # per-head classes: one head's row (_kernel_class)
        kernel_class = classify(primitive, reduce, data.dtype, rowptr.dtype, class_width,
                                gathered_bytes)
    out, arg_lhs, arg_rhs = _run(
        kernel_class, _graph_key(rowptr, col), col.shape[0] * width,
        lambda name: fixed_spmm(name)(rowptr, col, eids, lhs, rhs, op, reduce, record_args))
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
    return _run(kernel_class, _graph_key(lhs_row, rhs_row), lhs_row.shape[0] * width,
                lambda name: fixed_sddmm(name)(lhs_row, rhs_row, lhs, rhs, op))


def _mean_grad_auto(colptr: Tensor, row: Tensor, rowptr: Tensor, grad: Tensor,
                    num_src: int) -> Tensor:
    return _gradient_auto("mean_grad", fixed_mean_grad, colptr, row, rowptr, grad, num_src)


def _extreme_grad_auto(colptr: Tensor, row: Tensor, arg: Tensor, grad: Tensor,
                       num_src: int) -> Tensor:
    return _gradient_auto("extreme_grad", fixed_extreme_grad, colptr, row, arg, grad, num_src)


def _gradient_auto(primitive: str, fixed: Callable[[str], Callable], colptr: Tensor,
                   row: Tensor, third: Tensor, grad: Tensor, num_src: int) -> Tensor:
    """A copy_u gradient kernel over the CSC (`third`: the CSR rowptr for mean, the
    recorded winners for max/min) by the candidate measured fastest for its class."""
    width = math.prod(grad.shape[1:])
    kernel_class = _class(primitive, "-", grad, colptr, width, grad.shape[0])
    return _run(kernel_class, _graph_key(colptr, row), row.shape[0] * width,
                lambda name: fixed(name)(colptr, row, third, grad, num_src))
