"""Row splitting: the work list that keeps a power-law hub row from serialising a launch.

A pull kernel gives each destination row to one program. On a power-law graph one row can
hold a large share of all edges, and the launch then lasts as long as that one program.
So rows are cut into pieces of at most `piece` CSR entries: a row of degree d becomes
max(1, ceil(d / piece)) work items. Rows of one piece (nearly all of them) are reduced and
written by their item directly; the items of a split row write partial results into a
scratch buffer, and a second launch combines each split row's partials in CSR order, so
every result (max/min winners included) is deterministic and equal to a sequential pull.

Everything is computed with tensor ops on the graph's device and sized from bounds known
on the host (rows, entries, piece), so building the list never waits for the GPU:

    items        <= rows + entries // piece      (sum of floor((d - 1) / piece) + 1)
    split slots  <= 2 * entries // piece         (ceil(d / piece) < 2 d / piece for d > piece)
    split rows   <= entries // (piece + 1)

Unused tail slots of each list hold -1 and their programs return at once.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor
from torch.utils.weak import WeakIdKeyDictionary

__all__ = ["RowSchedule", "cached_row_schedule", "row_schedule"]


class RowSchedule(NamedTuple):
    """The work list of one CSR (all int64 on the CSR's device).

    item_row:   [I] destination row of work item i (-1: unused slot).
    item_start: [I] first CSR entry of the item.
    item_slot:  [I] scratch row of the item's partial result (-1: the row is not split).
    split_rows: [R] the split rows in ascending order (-1: unused slot).
    no_slot:    [R] all -1: the combine launch's items write finished rows.
    first_slot: [M] first scratch row of each split row (its partials are consecutive).
    num_slots:  bound on the scratch rows (host int).
    """

    item_row: Tensor
    item_start: Tensor
    item_slot: Tensor
    split_rows: Tensor
    no_slot: Tensor
    first_slot: Tensor
    num_slots: int


def row_schedule(rowptr: Tensor, entries: int, piece: int) -> RowSchedule:
    """Cut the rows of `rowptr` into items of at most `piece` entries.

    Args:
        rowptr: [M+1] int32/int64 CSR row pointer.
        entries: number of CSR entries (the length of `col`; passed so that nothing
            reads rowptr[-1] back from the device).
        piece: most CSR entries one work item reduces.
    """
    device = rowptr.device
    rows = rowptr.numel() - 1
    starts = rowptr[:-1].long()
    degree = rowptr[1:].long() - starts
    pieces = ((degree + piece - 1) // piece).clamp(min=1)                    # [M]
    ends = torch.cumsum(pieces, 0)                                           # [M] inclusive
    bound = rows + entries // piece
    items = torch.arange(bound, device=device)
    row = torch.searchsorted(ends, items, right=True)                         # M: past the end
    valid = row < rows
    row = row.clamp(max=max(rows - 1, 0))
    piece_of_row = items - (ends[row] - pieces[row]) if rows else items
    split = pieces > 1                                                        # [M]
    split_pieces = torch.where(split, pieces, 0)
    first_slot = torch.cumsum(split_pieces, 0) - split_pieces                 # [M] exclusive
    if rows:
        item_row = torch.where(valid, row, -1)
        item_start = starts[row] + piece_of_row * piece
        item_slot = torch.where(valid & split[row], first_slot[row] + piece_of_row, -1)
    else:
        item_row = item_start = item_slot = items  # bound == 0: empty
    split_bound = entries // (piece + 1)
    ordinal = torch.cumsum(split.long(), 0) - 1
    split_rows = torch.full((split_bound + 1,), -1, dtype=torch.int64, device=device)
    # Rows that are not split all land in the extra last slot, which is dropped.
    split_rows.scatter_(0, torch.where(split, ordinal, split_bound),
                        torch.arange(rows, device=device))
    split_rows[split_bound] = -1
    return RowSchedule(item_row, item_start, item_slot, split_rows[:split_bound],
                       torch.full((split_bound,), -1, dtype=torch.int64, device=device),
                       first_slot,
                       max(1, 2 * entries // piece))


# rowptr tensor -> (its version, entries, piece, schedule). A graph caches its CSR/CSC
# tensors, so every layer and every epoch passes the same rowptr object: the list is
# built once per graph instead of a dozen small launches per call. Weak keys compared by
# identity: an entry goes when its rowptr does; the version check catches in-place changes.
_CACHE = WeakIdKeyDictionary()


def cached_row_schedule(rowptr: Tensor, entries: int, piece: int) -> RowSchedule:
    """`row_schedule`, remembered for this rowptr tensor (same version, entries, piece)."""
    key = (rowptr._version, entries, piece)
    hit = _CACHE.get(rowptr)
    if hit is not None and hit[0] == key:
        return hit[1]
    schedule = row_schedule(rowptr, entries, piece)
    _CACHE[rowptr] = (key, schedule)
    return schedule
