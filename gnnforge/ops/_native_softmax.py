"""Edge softmax on the native library (`softmax.cpp`): forward and backward, one CSR pull each.

The composed form (`_edge_softmax`) runs four kernels and three [E, *F] temporaries per
forward; here a destination's logits are gathered once, exponentiated in SIMD vectors and
written back normalised, and the backward `a * (g - sum_in(a * g))` is one pass.
float32/float64 natively; other float dtypes are computed in float32 and rounded once.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from gnnforge.ops._buffers import pooled_empty
from gnnforge.ops._native_build import load

__all__ = ["edge_softmax_backward_native", "edge_softmax_native"]

_DTYPE_CODES = {torch.float32: 0, torch.float64: 1}
_PARALLEL_WORK = 2**16  # per-edge work is an exp and a few loads: a lower cut than SpMM's


def _rows(tensor: Tensor) -> Tensor:
    compute = tensor.dtype if tensor.dtype in _DTYPE_CODES else torch.float32
    return tensor.to(compute).reshape(tensor.shape[0], math.prod(tensor.shape[1:])).contiguous()


def _threads(work: int) -> int:
    return torch.get_num_threads() if work >= _PARALLEL_WORK else 1


def edge_softmax_native(rowptr: Tensor, eids: Tensor, logits: Tensor,
                        variant: str | None = None) -> Tensor:
    """[E, *F] softmax of `logits` over the entries of each CSR row (a node's in-edges).

    Args:
        rowptr, eids: CSR by destination (int32 or int64); eids lists every edge once.
        logits: [E, *F] float, in edge-id order.
        variant: instruction-set build of the library (`_native_build`); None the default.
    """
    values = _rows(logits)
    out = pooled_empty(tuple(values.shape), values.dtype)
    if values.numel():
        load(variant).gf_edge_softmax(
            _DTYPE_CODES[values.dtype], rowptr.dtype == torch.int64, rowptr.data_ptr(),
            eids.data_ptr(), values.data_ptr(), out.data_ptr(), rowptr.shape[0] - 1,
            values.shape[1], _threads(values.numel()))
    return out.reshape(logits.shape).to(logits.dtype)


def edge_softmax_backward_native(rowptr: Tensor, eids: Tensor, attention: Tensor,
                                 grad: Tensor, variant: str | None = None) -> Tensor:
    """[E, *F] gradient of the logits: a * (g - sum over the destination's in-edges of a * g).

    Args:
        rowptr, eids: CSR by destination. attention: the forward's output a [E, *F].
        grad: [E, *F] gradient of a.
        variant: instruction-set build of the library; None the default.
    """
    values, upstream = _rows(attention), _rows(grad.to(attention.dtype))
    out = pooled_empty(tuple(values.shape), values.dtype)
    if values.numel():
        load(variant).gf_edge_softmax_backward(
            _DTYPE_CODES[values.dtype], rowptr.dtype == torch.int64, rowptr.data_ptr(),
            eids.data_ptr(), values.data_ptr(), upstream.data_ptr(), out.data_ptr(),
            rowptr.shape[0] - 1, values.shape[1], _threads(values.numel()))
    return out.reshape(attention.shape).to(grad.dtype)
