"""Compiled CPU kernels (numba) on raw arrays; `_cpu.py` is their only caller.

Every g-SpMM kernel pulls over CSR by destination: row v reads the features of its
in-neighbours and writes its own output row once, so threads own disjoint output rows
and need no atomics or locks. Rows are split into `num_chunks` contiguous chunks of equal
work (in-edges plus one per row), found by binary search on `rowptr[r] + r` inside the
parallel loop, so a power-law hub row does not leave one thread with most of the work and
no per-call index array is built. A row's output (at most a few KiB) stays in L1 while its
in-edges accumulate and is written once. Feature-dimension blocking (an outer loop over
column blocks sized so x[:, block] fits the last-level cache) was measured and lost 3-6x
on this machine: see docs/kernels.md.

Kernels are compiled lazily on first call per dtype combination and cached on disk
(`cache=True`), so a fresh checkout pays the compile once.
"""

from __future__ import annotations

import numba
from numba import prange

__all__ = [
    "OP_CODES",
    "REDUCE_CODES",
    "extreme_grad_copy",
    "mean_grad_copy",
    "sddmm_dot",
    "sddmm_general",
    "spmm_copy",
    "spmm_general",
    "spmm_scaled",
]

OP_CODES = {"add": 0, "sub": 1, "mul": 2, "div": 3, "dot": 4, "copy_lhs": 5, "copy_rhs": 6}
REDUCE_CODES = {"sum": 0, "mean": 1, "max": 2, "min": 3}

_JIT = dict(nogil=True, cache=True, boundscheck=False)


@numba.njit(**_JIT)
def _chunk_start(rowptr, num_rows, chunk, num_chunks):
    """First row of `chunk`: the smallest r with rowptr[r] + r >= chunk's share of work."""
    total = rowptr[num_rows] + num_rows
    target = (total * chunk) // num_chunks
    low, high = 0, num_rows
    while low < high:
        middle = (low + high) // 2
        if rowptr[middle] + middle < target:
            low = middle + 1
        else:
            high = middle
    return low


@numba.njit(parallel=True, **_JIT)
def spmm_copy(rowptr, index, x, out, arg, reduce, num_chunks):
    """out[v, f] = reduce over j in row v of x[index[j], f]; arg records the winning row.

    Args:
        rowptr: [M+1] row pointer. index: [nnz] row of `x` each entry reads (source node
            for copy_u, edge id for copy_e). x: [R, K]. out: [M, K], fully overwritten.
        arg: [M, K] int64 for max/min (the row of x that won, -1 for empty rows); [M, 0]
            to skip recording. Ignored for sum/mean. reduce: code from REDUCE_CODES.
    """
    num_rows = out.shape[0]
    for chunk in prange(num_chunks):
        first = _chunk_start(rowptr, num_rows, chunk, num_chunks)
        last = _chunk_start(rowptr, num_rows, chunk + 1, num_chunks)
        if reduce <= 1:
            _sum_rows(rowptr, index, x, out, first, last, reduce == 1)
        else:
            _extreme_rows(rowptr, index, x, out, arg, first, last, reduce == 2)


# Plain 2-D indexing over the full row width on purpose: row views (`out[v]`) and
# feature-block loops with runtime bounds measured 3-6x slower (LLVM stops vectorising).
@numba.njit(inline="always", **_JIT)
def _sum_rows(rowptr, index, x, out, first, last, mean):
    width = out.shape[1]
    for v in range(first, last):
        start, end = rowptr[v], rowptr[v + 1]
        for f in range(width):
            out[v, f] = 0
        for j in range(start, end):
            source = index[j]
            for f in range(width):
                out[v, f] += x[source, f]
        if mean and end > start:
            scale = 1.0 / (end - start)
            for f in range(width):
                out[v, f] *= scale


@numba.njit(inline="always", **_JIT)
def _extreme_rows(rowptr, index, x, out, arg, first, last, is_max):
    if arg.shape[1] == 0:
        _extreme_values(rowptr, index, x, out, first, last, is_max)
        return
    width = out.shape[1]
    for v in range(first, last):
        start, end = rowptr[v], rowptr[v + 1]
        if end == start:
            for f in range(width):
                out[v, f] = 0
                arg[v, f] = -1
            continue
        source = index[start]
        for f in range(width):
            out[v, f] = x[source, f]
            arg[v, f] = source
        for j in range(start + 1, end):
            source = index[j]
            for f in range(width):
                value = x[source, f]
                if value > out[v, f] if is_max else value < out[v, f]:
                    out[v, f] = value
                    arg[v, f] = source


@numba.njit(inline="always", **_JIT)
def _extreme_values(rowptr, index, x, out, first, last, is_max):
    """max/min without arg indices (no gradient follows): branch-free, so it vectorises."""
    width = out.shape[1]
    for v in range(first, last):
        start, end = rowptr[v], rowptr[v + 1]
        if end == start:
            for f in range(width):
                out[v, f] = 0
            continue
        source = index[start]
        for f in range(width):
            out[v, f] = x[source, f]
        for j in range(start + 1, end):
            source = index[j]
            for f in range(width):
                if is_max:
                    out[v, f] = max(out[v, f], x[source, f])
                else:
                    out[v, f] = min(out[v, f], x[source, f])


@numba.njit(parallel=True, **_JIT)
def extreme_grad_copy(colptr, row, arg, grad, out, num_chunks):
    """Gradient of copy_u max/min: out[u, f] = sum of grad[v, f] over out-neighbours v of u
    whose recorded winner arg[v, f] is u.

    A pull over CSC by source (each thread owns its output rows, no atomics). Multi-edges
    u->v count once, as in the forward, which relies on the CSC listing each source's
    destinations in ascending order (the `csc()` contract), so repeats are adjacent.

    Args:
        colptr: [N+1], row: [E] destinations by source. arg: [M, K] int64 winners (-1 for
        rows without in-edges). grad: [M, K]. out: [N, K], fully overwritten.
    """
    num_rows, width = out.shape
    for chunk in prange(num_chunks):
        first = _chunk_start(colptr, num_rows, chunk, num_chunks)
        last = _chunk_start(colptr, num_rows, chunk + 1, num_chunks)
        for u in range(first, last):
            for f in range(width):
                out[u, f] = 0
            previous = -1
            for j in range(colptr[u], colptr[u + 1]):
                v = row[j]
                if v == previous:
                    continue
                previous = v
                for f in range(width):
                    if arg[v, f] == u:
                        out[u, f] += grad[v, f]


@numba.njit(parallel=True, **_JIT)
def mean_grad_copy(colptr, row, inverse_degree, grad, out, num_chunks):
    """Gradient of copy_u mean: out[u, f] = sum over out-edges u->v of grad[v, f] / deg(v).

    A pull over CSC by source that scales each gradient row as it reads it, so no scaled
    copy of grad is made.

    Args:
        colptr: [N+1], row: [E] destinations by source. inverse_degree: [M] 1/deg(v) in
        grad's dtype (a float64 scale would turn the inner loop into conversions).
        grad: [M, K]. out: [N, K], fully overwritten.
    """
    num_rows, width = out.shape
    for chunk in prange(num_chunks):
        first = _chunk_start(colptr, num_rows, chunk, num_chunks)
        last = _chunk_start(colptr, num_rows, chunk + 1, num_chunks)
        for u in range(first, last):
            for f in range(width):
                out[u, f] = 0
            for j in range(colptr[u], colptr[u + 1]):
                v = row[j]
                scale = inverse_degree[v]
                for f in range(width):
                    out[u, f] += grad[v, f] * scale


@numba.njit(parallel=True, **_JIT)
def spmm_scaled(rowptr, col, weight, x, out, mean, num_chunks):
    """out[v, h, :] = sum over j in row v of weight[j, h] * x[col[j], h, :] (/ deg if mean).

    The weighted SpMM behind u_mul_e with a per-edge (per-head) scalar. `weight` is
    [nnz, H] already in CSR entry order; x [N, H, D]; out [M, H, D].
    """
    num_rows, heads, width = out.shape
    for chunk in prange(num_chunks):
        first = _chunk_start(rowptr, num_rows, chunk, num_chunks)
        last = _chunk_start(rowptr, num_rows, chunk + 1, num_chunks)
        for v in range(first, last):
            start, end = rowptr[v], rowptr[v + 1]
            for h in range(heads):
                for f in range(width):
                    out[v, h, f] = 0
                for j in range(start, end):
                    scale = weight[j, h]
                    source = col[j]
                    for f in range(width):
                        out[v, h, f] += scale * x[source, h, f]
                if mean and end > start:
                    inverse = 1.0 / (end - start)
                    for f in range(width):
                        out[v, h, f] *= inverse


@numba.njit(inline="always", **_JIT)
def _message(op, lhs, lhs_row, lhs_at, rhs, rhs_row, rhs_at, length):
    if op == 0:
        return lhs[lhs_row, lhs_at] + rhs[rhs_row, rhs_at]
    if op == 1:
        return lhs[lhs_row, lhs_at] - rhs[rhs_row, rhs_at]
    if op == 2:
        return lhs[lhs_row, lhs_at] * rhs[rhs_row, rhs_at]
    if op == 3:
        return lhs[lhs_row, lhs_at] / rhs[rhs_row, rhs_at]
    total = lhs[lhs_row, lhs_at] * rhs[rhs_row, rhs_at]
    for d in range(1, length):
        total += lhs[lhs_row, lhs_at + d] * rhs[rhs_row, rhs_at + d]
    return total


@numba.njit(parallel=True, **_JIT)
def spmm_general(rowptr, col, eids, lhs, rhs, lhs_offset, rhs_offset, length, op, reduce,
                 out, arg_lhs, arg_rhs, num_chunks):
    """out[v, k] = reduce over entries j of row v of op(lhs[col[j]], rhs[eids[j]]) at k.

    lhs [N, L] and rhs [E, R] are flattened feature rows; lhs_offset/rhs_offset [K] give
    where output feature k reads each operand (the start of a `length`-long run for dot).
    op is a binary code of OP_CODES. For max/min, arg_lhs/arg_rhs [M, K] record the source
    node and edge id that won (-1 for rows without in-edges).
    """
    num_rows, width = out.shape
    for chunk in prange(num_chunks):
        first = _chunk_start(rowptr, num_rows, chunk, num_chunks)
        last = _chunk_start(rowptr, num_rows, chunk + 1, num_chunks)
        for v in range(first, last):
            start, end = rowptr[v], rowptr[v + 1]
            for k in range(width):
                out[v, k] = 0
            if end == start:
                if reduce >= 2:
                    for k in range(width):
                        arg_lhs[v, k] = -1
                        arg_rhs[v, k] = -1
                continue
            for j in range(start, end):
                source, edge = col[j], eids[j]
                for k in range(width):
                    value = _message(op, lhs, source, lhs_offset[k], rhs, edge, rhs_offset[k],
                                     length)
                    if reduce <= 1:
                        out[v, k] += value
                    elif j == start or (value > out[v, k] if reduce == 2 else value < out[v, k]):
                        out[v, k] = value
                        arg_lhs[v, k] = source
                        arg_rhs[v, k] = edge
            if reduce == 1:
                inverse = 1.0 / (end - start)
                for k in range(width):
                    out[v, k] *= inverse


@numba.njit(parallel=True, **_JIT)
def sddmm_general(lhs_row, rhs_row, lhs, rhs, lhs_offset, rhs_offset, length, op, out,
                  num_chunks):
    """out[e, k] = op(lhs[lhs_row[e]], rhs[rhs_row[e]]) at feature k, for every edge e."""
    num_edges, width = out.shape
    for chunk in prange(num_chunks):
        first = (num_edges * chunk) // num_chunks
        last = (num_edges * (chunk + 1)) // num_chunks
        for e in range(first, last):
            left, right = lhs_row[e], rhs_row[e]
            for k in range(width):
                out[e, k] = _message(op, lhs, left, lhs_offset[k], rhs, right, rhs_offset[k],
                                     length)


@numba.njit(parallel=True, **_JIT)
def sddmm_dot(lhs_row, rhs_row, lhs, rhs, out, num_chunks):
    """out[e, h] = sum_d lhs[lhs_row[e], h, d] * rhs[rhs_row[e], h, d]: u_dot_v and friends."""
    num_edges, heads = out.shape
    width = lhs.shape[2]
    for chunk in prange(num_chunks):
        first = (num_edges * chunk) // num_chunks
        last = (num_edges * (chunk + 1)) // num_chunks
        for e in range(first, last):
            left, right = lhs_row[e], rhs_row[e]
            for h in range(heads):
                total = lhs[left, h, 0] * rhs[right, h, 0]
                for d in range(1, width):
                    total += lhs[left, h, d] * rhs[right, h, d]
                out[e, h] = total
