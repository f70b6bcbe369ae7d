"""The MKL candidate: copy_u sum/mean as PyTorch's CSR sparse-dense product.

torch.sparse.mm on a CSR matrix runs MKL's sparse BLAS on x86 builds of PyTorch (its own
loop elsewhere). MKL dispatches on the CPU at run time, so on machines where our
compiled variants are slow it can win; `_calibration` times it as one candidate for copy_u
sum and mean (`covered`). `_cpu_kernels` runs every other op on numba's kernels, so `mkl`
is a complete backend when forced, while this module imports no other backend.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import Tensor

__all__ = ["covered", "gspmm_mkl", "supports"]

_FLOATS = (torch.float32, torch.float64)


def supports(op: str, reduce: str) -> bool:
    """True for the ops this candidate computes itself: copy_lhs with sum or mean."""
    return op == "copy_lhs" and reduce in ("sum", "mean")


def covered(lhs: Tensor | None, op: str, reduce: str) -> bool:
    """Whether `gspmm_mkl` computes this call: copy_lhs sum/mean of float32/float64."""
    return supports(op, reduce) and lhs.dtype in _FLOATS


def gspmm_mkl(rowptr: Tensor, col: Tensor, eids: Tensor, lhs: Tensor | None,
              rhs: Tensor | None, op: str, reduce: str,
              record_args: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """g-SpMM on CPU; same contract as `_cpu.gspmm_cpu`. copy_lhs sum/mean via MKL, for
    calls `covered` accepts."""
    rows = rowptr.shape[0] - 1
    x = lhs.reshape(lhs.shape[0], math.prod(lhs.shape[1:])).contiguous()   # [N, K]
    matrix = _csr(rowptr, col, torch.ones(col.shape[0], dtype=x.dtype), (rows, x.shape[0]))
    # Computed in the input's dtype, as every other kernel: inside an autocast region
    # torch.sparse.mm would be cast to bfloat16, which MKL's CSR product does not implement.
    with torch.autocast("cpu", enabled=False):
        out = (torch.sparse.mm(matrix, x) if x.shape[0] and rows
               else x.new_zeros(rows, x.shape[1]))
    if reduce == "mean":
        degree = (rowptr[1:] - rowptr[:-1]).clamp(min=1).to(x.dtype)
        out = out / degree.unsqueeze(1)
    empty = torch.empty(0, dtype=torch.int64)
    return out.reshape(rows, *lhs.shape[1:]), empty, torch.empty(0, dtype=torch.int64)


def _csr(rowptr: Tensor, col: Tensor, values: Tensor, size: tuple[int, int]) -> Tensor:
    # The indices come from a validated Graph, so torch's invariant checks would only
    # repeat ours; PyTorch warns once that CSR support is beta, which says nothing to a user.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(rowptr, col, values, size, check_invariants=False)
