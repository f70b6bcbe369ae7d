"""GINE's fused message and sum on the native library (`gine.cpp`): relu(x_u + e) summed
onto destinations, forward and backward, without any [E, F] tensor.

Edge features are rows of a table indexed per edge: `code` None means the table is the
[E, F] edge features themselves (row e for edge e), otherwise an [E] int64 row per edge of
a small table (a molecule's bond embedding). float32/float64, one dtype for x and table.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnforge.ops._buffers import pooled_empty
from gnnforge.ops._native_build import load

__all__ = ["gine_backward_native", "gine_forward_native"]

_DTYPE_CODES = {torch.float32: 0, torch.float64: 1}
_PARALLEL_WORK = 2**18


def _threads(work: int) -> int:
    return torch.get_num_threads() if work >= _PARALLEL_WORK else 1


def _pointer(tensor: Tensor | None):
    return None if tensor is None else tensor.data_ptr()


def gine_forward_native(rowptr: Tensor, col: Tensor, eids: Tensor, code: Tensor | None,
                        x: Tensor, table: Tensor, scale: float,
                        variant: str | None = None) -> Tensor:
    """[M, F]: scale * x[v] + sum over in-edges e = (u, v) of relu(x[u] + table[row(e)]).

    Args:
        rowptr, col, eids: CSR by destination (int32 or int64).
        code: [E] int64 table row per edge, or None (table is [E, F]).
        x: [N, F] contiguous float32/float64, destinations first. table: [K, F], same dtype.
        scale: the self term's weight (0 for none).
        variant: instruction-set build of the library; None the default.
    """
    rows, width = rowptr.shape[0] - 1, x.shape[1]
    out = pooled_empty((rows, width), x.dtype)
    if rows and width:
        load(variant).gf_gine_forward(
            _DTYPE_CODES[x.dtype], rowptr.dtype == torch.int64, rowptr.data_ptr(),
            col.data_ptr(), eids.data_ptr(), _pointer(code), x.data_ptr(), table.data_ptr(),
            float(scale), out.data_ptr(), rows, width, _threads(col.shape[0] * width))
    return out


def gine_backward_native(csr: tuple[Tensor, Tensor, Tensor], csc: tuple[Tensor, Tensor, Tensor],
                         code: Tensor | None, x: Tensor, table: Tensor, scale: float,
                         grad: Tensor, variant: str | None = None) -> tuple[Tensor, Tensor]:
    """(grad_x [N, F], grad_table [K, F]) of `gine_forward_native` for upstream `grad`.

    Args:
        csr: (rowptr, col, eids) by destination; csc: (colptr, row, ceids) by source, same
            index dtype.
        code, x, table, scale: as in the forward. grad: [M, F] contiguous, x's dtype.
        variant: instruction-set build of the library; None the default.
    """
    (rowptr, col, eids), (colptr, row, ceids) = csr, csc
    num_src, width = x.shape
    grad_x = pooled_empty((num_src, width), x.dtype)
    grad_table = pooled_empty(tuple(table.shape), x.dtype)
    if col.shape[0] == 0:
        # No edge writes the table gradient (and an empty `code` reads as null in C++,
        # the per-edge-row path): it is zero, not the pooled buffer's old contents.
        grad_table.zero_()
    if width and (num_src or table.shape[0]):
        load(variant).gf_gine_backward(
            _DTYPE_CODES[x.dtype], rowptr.dtype == torch.int64, rowptr.data_ptr(),
            col.data_ptr(), eids.data_ptr(), colptr.data_ptr(), row.data_ptr(),
            ceids.data_ptr(), _pointer(code), x.data_ptr(), table.data_ptr(), float(scale),
            grad.data_ptr(), grad_x.data_ptr(), grad_table.data_ptr(), num_src,
            grad.shape[0], table.shape[0], width, _threads(col.shape[0] * width))
    return grad_x, grad_table
