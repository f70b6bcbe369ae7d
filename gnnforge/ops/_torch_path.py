"""The device-agnostic backend ("torch"): PyTorch ops over CSR, used for CUDA tensors.

Same interface as `_cpu` (kernels on CSR arrays, max/min arg indices), built from
`index_select` + `index_add_` / `scatter_reduce_` over chunks of CSR entries. Chunking
bounds the per-edge message buffer to `_CHUNK_BYTES` whatever E is, so no E x F tensor
exists for a reduce-to-node op. It runs on CPU tensors too, which is how the tests check
it when no GPU is present.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from gnnforge.ops._reference import edge_message_ref
from gnnforge.ops._shapes import output_feature_shape

__all__ = ["gsddmm_torch", "gspmm_torch"]

_CHUNK_BYTES = 64 * 2**20


def _chunks(num_entries: int, width: int, itemsize: int) -> list[tuple[int, int]]:
    step = max(1, _CHUNK_BYTES // max(1, width * itemsize))
    return [(start, min(start + step, num_entries)) for start in range(0, num_entries, step)]


def _message(op, lhs, rhs, col, eids, start, end):
    left = None if lhs is None else lhs.index_select(0, col[start:end].long())
    right = None if rhs is None else rhs.index_select(0, eids[start:end].long())
    message = edge_message_ref(op, left, right)
    return message.reshape(end - start, math.prod(message.shape[1:]))  # [chunk, K]


def gspmm_torch(rowptr: Tensor, col: Tensor, eids: Tensor, lhs: Tensor | None,
                rhs: Tensor | None, op: str, reduce: str,
                record_args: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """g-SpMM with PyTorch ops; same contract as `_cpu.gspmm_cpu`."""
    num_rows = rowptr.numel() - 1
    out_shape = output_feature_shape(op, None if lhs is None else tuple(lhs.shape[1:]),
                                     None if rhs is None else tuple(rhs.shape[1:]))
    operand = lhs if rhs is None else rhs if lhs is None else None
    dtype = operand.dtype if operand is not None else torch.promote_types(lhs.dtype, rhs.dtype)
    device = rowptr.device
    width = math.prod(out_shape)
    degree = rowptr[1:] - rowptr[:-1]
    row = torch.repeat_interleave(torch.arange(num_rows, device=device), degree.long())
    pieces = _chunks(col.numel(), width, torch.empty(0, dtype=dtype).element_size())
    empty = lambda: torch.empty(0, dtype=torch.int64, device=device)  # noqa: E731
    if reduce in ("sum", "mean"):
        out = torch.zeros(num_rows, width, dtype=dtype, device=device)
        for start, end in pieces:
            out.index_add_(0, row[start:end], _message(op, lhs, rhs, col, eids, start, end))
        if reduce == "mean":
            out /= degree.clamp(min=1).to(dtype).unsqueeze(1)
        return out.reshape(num_rows, *out_shape), empty(), empty()
    out = torch.full((num_rows, width), -math.inf if reduce == "max" else math.inf,
                     dtype=dtype, device=device)
    for start, end in pieces:
        index = row[start:end].unsqueeze(1).expand(-1, width)
        out.scatter_reduce_(0, index, _message(op, lhs, rhs, col, eids, start, end),
                            reduce="amax" if reduce == "max" else "amin")
    if not record_args:
        out[degree == 0] = 0
        return out.reshape(num_rows, *out_shape), empty(), empty()
    winner = torch.full((num_rows, width), -1, dtype=torch.int64, device=device)
    for start, end in pieces:
        index = row[start:end].unsqueeze(1).expand(-1, width)
        hit = _message(op, lhs, rhs, col, eids, start, end) == out.gather(0, index)
        entry = torch.arange(start, end, device=device).unsqueeze(1).expand(-1, width)
        winner.scatter_reduce_(0, index, torch.where(hit, entry, -1), reduce="amax")
    out[degree == 0] = 0
    arg_lhs = _winner_ids(winner, col) if lhs is not None else empty()
    arg_rhs = _winner_ids(winner, eids) if rhs is not None else empty()
    return out.reshape(num_rows, *out_shape), arg_lhs, arg_rhs


def _winner_ids(winner: Tensor, ids: Tensor) -> Tensor:
    """ids[winner] where a winner exists, -1 elsewhere (rows without in-edges)."""
    if ids.numel() == 0:
        return torch.full_like(winner, -1)
    return torch.where(winner >= 0, ids.long()[winner.clamp(min=0)], -1)


def gsddmm_torch(lhs_row: Tensor, rhs_row: Tensor, lhs: Tensor, rhs: Tensor, op: str) -> Tensor:
    """out[e] = op(lhs[lhs_row[e]], rhs[rhs_row[e]]); chunked so `dot` gathers stay bounded."""
    out_shape = output_feature_shape(op, tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))
    dtype = torch.promote_types(lhs.dtype, rhs.dtype)
    num_edges = lhs_row.numel()
    out = torch.empty(num_edges, *out_shape, dtype=dtype, device=lhs.device)
    gathered_width = max(math.prod(lhs.shape[1:]), math.prod(rhs.shape[1:]), 1)
    for start, end in _chunks(num_edges, gathered_width, out.element_size()):
        left = lhs.index_select(0, lhs_row[start:end].long())
        right = rhs.index_select(0, rhs_row[start:end].long())
        out[start:end] = edge_message_ref(op, left, right)
    return out
