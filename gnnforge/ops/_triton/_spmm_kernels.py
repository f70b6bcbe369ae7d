"""The Triton g-SpMM kernel: a pull over CSR by destination, in work items of `_schedule`.

One kernel, two launches. The first (COMBINE=False) runs one program per (work item,
feature block). A work item is a whole row or, for a row longer than `piece` entries, one
piece of it (`_schedule`). The program walks its CSR entries BLOCK_E at a time, gathers a
[BLOCK_E, BLOCK_F] tile of messages `op(lhs[col[j]], rhs[eids[j]])` and folds it into a
[BLOCK_F] accumulator. Whole rows are finished (mean scaling, empty rows set to 0, max/min
winners translated to source node and edge id) and written once; pieces of split rows
write their partial and its winning CSR entries into scratch rows. The second launch
(COMBINE=True, one program per split row) folds a split row's partials in CSR order the
same way and finishes the row. No atomics, so every result is deterministic.

max/min winners: the first CSR entry holding the extreme value (strict comparison between
steps, smallest entry index within a step), the rule of the CPU kernels. Pieces follow
CSR order, so the smallest entry among equal partials is again the row's first extreme.

Everything is written inline in one function: Triton's interpreter (the CI path)
re-patches the language on every call of a nested @triton.jit helper, which cost more
than the kernel's own work (measured 5 ms per call under load).

Codes (constexpr): OP 0 copy_lhs, 1 copy_rhs, 2 add, 3 mul, 4 exp(rhs - lhs[row])
(edge softmax's denominator: lhs is read at the destination row, not at the source);
REDUCE 0 sum, 1 mean, 2 max, 3 min.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["OP_CODES", "REDUCE_CODES", "spmm_pull"]

OP_CODES = {"copy_lhs": 0, "copy_rhs": 1, "add": 2, "mul": 3, "exp_sub_row": 4}
REDUCE_CODES = {"sum": 0, "mean": 1, "max": 2, "min": 3}


@triton.jit
def spmm_pull(rowptr, col, eids, work_row, work_start, work_slot, first_slot,
              lhs, rhs, lhs_offsets, rhs_offsets,
              out, arg_lhs, arg_rhs, partial, partial_arg,
              piece, width, lhs_width, rhs_width,
              COMBINE: tl.constexpr, OP: tl.constexpr, REDUCE: tl.constexpr,
              RECORD: tl.constexpr, LHS_OFFSETS: tl.constexpr, RHS_OFFSETS: tl.constexpr,
              ACC: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr):
    """One work item (or split row when COMBINE) x one feature block.

    Args (pointers unless noted):
        rowptr, col, eids: CSR by destination, int32 or int64.
        work_row: [I] row of each program (-1: nothing to do). work_start: [I] first CSR
            entry of each item; work_slot: [I] its scratch row (-1: not split; all -1
            for the combine launch, which writes finished rows).
            first_slot: [M] first scratch row of each split row (COMBINE only).
        lhs [N, lhs_width], rhs [E, rhs_width]: row-major operands. Output feature f
            reads lhs column lhs_offsets[f] (f without LHS_OFFSETS), rhs likewise.
        out [M, width]; arg_lhs, arg_rhs [M, width] int64 (RECORD);
        partial [slots, width] in ACC, partial_arg [slots, width] int64.
        piece, width, lhs_width, rhs_width: integers.
    """
    row = tl.load(work_row + tl.program_id(0))
    if row >= 0:
        feature = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
        fmask = feature < width
        row_start = tl.load(rowptr + row).to(tl.int64)
        row_end = tl.load(rowptr + row + 1).to(tl.int64)
        if COMBINE:
            start = tl.load(first_slot + row)
            end = start + (row_end - row_start + piece - 1) // piece
        else:
            start = tl.load(work_start + tl.program_id(0))
            end = tl.minimum(row_end, start + piece)
            if LHS_OFFSETS:
                lhs_column = tl.load(lhs_offsets + feature, mask=fmask, other=0)
            else:
                lhs_column = feature.to(tl.int64)
            if RHS_OFFSETS:
                rhs_column = tl.load(rhs_offsets + feature, mask=fmask, other=0)
            else:
                rhs_column = feature.to(tl.int64)
            if OP == 4:  # the destination row's value, the same for every entry
                at_row = tl.load(lhs + row * lhs_width + lhs_column, mask=fmask, other=0)
                at_row = at_row.to(ACC)[None, :]
        if REDUCE == 2:
            acc = tl.full([BLOCK_F], float("-inf"), ACC)
        elif REDUCE == 3:
            acc = tl.full([BLOCK_F], float("inf"), ACC)
        else:
            acc = tl.zeros([BLOCK_F], ACC)
        best = tl.full([BLOCK_F], -1, tl.int64)
        for step in range(start, end, BLOCK_E):
            position = step + tl.arange(0, BLOCK_E).to(tl.int64)
            pmask = position < end
            mask = pmask[:, None] & fmask[None, :]
            if COMBINE:  # a tile of partials and (RECORD) their winning entries
                where = position[:, None] * width + feature[None, :]
                message = tl.load(partial + where, mask=mask, other=0)
                if RECORD:
                    entry = tl.load(partial_arg + where, mask=mask, other=-1)
                    mask = mask & (entry >= 0)
            else:  # a tile of messages, entry = the CSR position
                entry = position[:, None]
                if OP == 0 or OP == 2 or OP == 3:
                    source = tl.load(col + position, mask=pmask, other=0).to(tl.int64)
                    left = tl.load(lhs + source[:, None] * lhs_width + lhs_column[None, :],
                                   mask=mask, other=0).to(ACC)
                if OP != 0:
                    edge = tl.load(eids + position, mask=pmask, other=0).to(tl.int64)
                    right = tl.load(rhs + edge[:, None] * rhs_width + rhs_column[None, :],
                                    mask=mask, other=0).to(ACC)
                if OP == 0:
                    message = left
                elif OP == 1:
                    message = right
                elif OP == 2:
                    message = left + right
                elif OP == 3:
                    message = left * right
                else:
                    message = tl.exp(right - at_row)
            if REDUCE <= 1:
                acc += tl.sum(tl.where(mask, message, 0.0), axis=0)
            else:
                if REDUCE == 2:
                    masked = tl.where(mask, message, float("-inf"))
                    tile = tl.max(masked, axis=0)
                else:
                    masked = tl.where(mask, message, float("inf"))
                    tile = tl.min(masked, axis=0)
                if RECORD:
                    hit = mask & (masked == tile[None, :])
                    candidate = tl.min(tl.where(hit, entry, 9223372036854775807), axis=0)
                    if REDUCE == 2:
                        better = tile > acc
                    else:
                        better = tile < acc
                    # An extreme equal to the initial -inf/+inf still gets its winner.
                    better = better | ((best < 0) & (candidate < 9223372036854775807))
                    acc = tl.where(better, tile, acc)
                    best = tl.where(better, candidate, best)
                elif REDUCE == 2:
                    acc = tl.maximum(acc, tile)
                else:
                    acc = tl.minimum(acc, tile)
        slot = tl.load(work_slot + tl.program_id(0))  # all -1 for the combine launch
        if slot >= 0:  # a piece of a split row: the combine launch finishes it
            tl.store(partial + slot * width + feature, acc, mask=fmask)
            if RECORD:
                tl.store(partial_arg + slot * width + feature, best, mask=fmask)
        else:
            degree = row_end - row_start
            if REDUCE == 1:
                acc = acc / tl.maximum(degree, 1).to(ACC)
            if REDUCE >= 2:
                acc = tl.where(degree > 0, acc, 0.0)
            base = row * width + feature
            tl.store(out + base, acc, mask=fmask)
            if RECORD:
                found = best >= 0
                # Names distinct from the loop's: a value keeps one shape per name.
                if OP != 1:
                    winner = tl.load(col + best, mask=fmask & found, other=0).to(tl.int64)
                    tl.store(arg_lhs + base, tl.where(found, winner, -1), mask=fmask)
                if OP != 0:
                    winner_edge = tl.load(eids + best, mask=fmask & found, other=0)
                    tl.store(arg_rhs + base, tl.where(found, winner_edge.to(tl.int64), -1),
                             mask=fmask)
