"""Edge rows in storage order for pull kernels over edge lists grouped by destination.

A pull (CSR by destination) kernel reads each row's sources in ascending order, so the
edge operand of `u_op_e` / `copy_e` is gathered at `eids[k]`: scattered reads of [F]
rows. When the edge list itself is stored grouped by destination (PyG's `sort_edge_index`
by column, DGL's in-CSR order, our benchmarks' graphs), row v's edges are exactly the
edge ids rowptr[v]:rowptr[v+1], only in another order. Reading them in edge-id order
(`eids' = arange`, `col'` = each edge's source) walks the edge rows sequentially and the
sources in edge order instead: on Pubmed u_mul_e_sum with [E, 64] edge features 1.04 ms
vs 1.50 ms (docs/kernels.md). The sum within a row is the same set in another order, so
results agree to rounding.

The check and the remapped arrays are computed once per `eids` tensor (a graph's cached
CSR) and held as long as that tensor lives.
"""

from __future__ import annotations

import weakref

import torch
from torch import Tensor

__all__ = ["MIN_EDGE_ROW_ELEMENTS", "edge_ordered", "reads_edge_rows"]

# Edge rows narrower than a cache line gain nothing from sequential reads (scalar weights
# [E, 1] and per-head [E, H, 1] are gathered 4-32 bytes at a time either way).
MIN_EDGE_ROW_ELEMENTS = 16

_CACHE: dict[int, tuple[weakref.ref, tuple[Tensor, Tensor] | None]] = {}


def reads_edge_rows(rhs: Tensor | None, reduce: str, eids: Tensor) -> bool:
    """Whether a g-SpMM reads wide edge rows by `eids` and sums them (sum or mean)."""
    return (rhs is not None and reduce in ("sum", "mean") and rhs.dim() >= 2
            and rhs.shape[0] == eids.shape[0] and eids.shape[0] > 0
            and rhs[0].numel() >= MIN_EDGE_ROW_ELEMENTS)


def edge_ordered(rowptr: Tensor, col: Tensor, eids: Tensor) -> tuple[Tensor, Tensor] | None:
    """(col', eids') reading every row's edges in edge-id order, or None when the edge
    list is not grouped by destination (or already is in that order)."""
    key = id(eids)
    entry = _CACHE.get(key)
    if entry is not None and entry[0]() is eids:
        return entry[1]
    result = _remap(rowptr, col, eids)
    _CACHE[key] = (weakref.ref(eids, lambda _ref, key=key: _CACHE.pop(key, None)), result)
    return result


def _remap(rowptr: Tensor, col: Tensor, eids: Tensor) -> tuple[Tensor, Tensor] | None:
    if eids.device.type != "cpu" or col.shape[0] != eids.shape[0]:
        return None
    positions = torch.arange(eids.shape[0], dtype=eids.dtype)
    if torch.equal(eids, positions):
        return None  # already read in edge-id order
    rows = torch.repeat_interleave(torch.arange(rowptr.shape[0] - 1, dtype=torch.int64),
                                   (rowptr[1:] - rowptr[:-1]).long())
    starts, ends = rowptr[:-1].long()[rows], rowptr[1:].long()[rows]
    ids = eids.long()
    if not bool(((ids >= starts) & (ids < ends)).all()):
        return None  # some edge id lies outside its row's range: not grouped by destination
    sources = torch.empty_like(col)
    sources[ids] = col
    return sources, positions
