"""Numba kernels of the samplers: one layer of NS, LABOR and random walks, and compaction.

All kernels work on raw numpy arrays of the CSR by destination (rowptr, col = in-neighbour,
eids = parent edge id, or an empty array when the parent's edge ids are the CSR positions
themselves, as in a graph stored as CSR: no [E] array of ids is then held) and return,
for the frontier (the layer's destination seeds, in order), the per-seed pick counts and
the picked sources / parent edge ids in seed order, which is already the CSR of the block.
Each call runs on one thread; `neighbor_picks` takes a range of destinations, so that
`gnnforge.sampling._neighbor` can run ranges on several threads (`_threads`).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from gnnforge.sampling._cache_hint import prefetch
from gnnforge.sampling._variates import variate

# Salts that keep the variates of different decisions independent under one key.
_SALT_VERTEX = 0  # LABOR r_t, keyed by vertex id
_SALT_EDGE = 1  # dependent NS, keyed by parent edge id
_SALT_DRAW = 2  # NS draws, keyed by (seed id, draw index + _SALT_DRAW)

# compact's probes run this many picks behind their prefetches: 8, 16, 32 and 64 gave
# 0.72, 0.53, 0.57 and 0.50 of the time without on a products input layer (2-core EPYC).
_PROBE_AHEAD = 32


@numba.njit(cache=True, nogil=True)
def neighbor_counts(rowptr, rows, fanout, replace):
    """(in-degree, picks) of each destination row of a uniform NS layer: min(fanout, d)
    without replacement (d when fanout < 0), `fanout` with it (0 when d = 0)."""
    degree = np.empty(rows.shape[0], dtype=np.int64)
    counts = np.empty(rows.shape[0], dtype=np.int64)
    for i in range(rows.shape[0]):
        d = rowptr[rows[i] + 1] - rowptr[rows[i]]
        degree[i] = d
        if fanout < 0 or (d <= fanout and not replace):
            counts[i] = d
        else:
            counts[i] = fanout if d > 0 else 0
    return degree, counts


@numba.njit(cache=True, nogil=True)
def neighbor_picks(rowptr, col, eids, rows, frontier, degree, counts, starts, fanout, replace,
                   key_a, key_b, mix, dependent, lo, hi, pos, src, eid):
    """Uniform neighbour sampling of destinations [lo, hi) of one layer.

    Destination i's picks go to [starts[i], starts[i] + counts[i]) of `pos` (CSR
    positions), `src` (col there, int64) and `eid` (the parent edge ids there; unwritten
    when `eids` is empty: the edge ids are then the CSR positions, `pos` itself).
    Disjoint ranges of destinations write disjoint ranges of the outputs, so ranges can
    run on threads at once (`gnnforge.sampling._neighbor`), and the picks do not depend on
    the split: every variate is keyed by (seed id, draw), never by position.

    `rows[i]` is the CSR row of destination `frontier[i]` (the same array for a whole
    graph; positions in a partition's owned rows otherwise); the variates are keyed by
    the global ids, so a partition draws exactly what the whole graph would.

    Without replacement a seed of degree d keeps all its in-edges when d <= fanout, else
    `fanout` distinct ones: by Floyd's algorithm (O(fanout) draws) for independent keys,
    or the `fanout` smallest per-edge variates (O(d)) for dependent keys, so that a slowly
    changing variate gives a slowly changing pick. With replacement: `fanout` uniform draws.
    fanout < 0 takes every in-edge.

    Two phases: first every pick's CSR position, then one tight gather of `col` and `eids`
    at those positions. The gathers are cache misses on large graphs; issued back to back
    with nothing in between, many are in flight at once (about 1.4x faster on R-MAT 2^17
    than gathering inside the drawing loop).
    """
    chosen = np.empty(max(fanout, 1), dtype=np.int64)
    for i in range(lo, hi):
        seed = frontier[i]
        start = np.int64(rowptr[rows[i]])
        d = degree[i]
        k = counts[i]
        out = starts[i]
        if k == d and not replace:
            for j in range(d):
                pos[out] = start + j
                out += 1
        elif replace:
            for j in range(k):
                u = variate(key_a, key_b, mix, dependent, seed, j + _SALT_DRAW)
                pos[out] = start + min(int(u * d), d - 1)
                out += 1
        elif dependent:
            keys = np.empty(d, dtype=np.float64)
            for j in range(d):
                keys[j] = variate(key_a, key_b, mix, dependent, _edge_id(eids, start + j),
                                   _SALT_EDGE)
            order = np.argsort(keys)
            for j in range(k):
                pos[out] = start + order[j]
                out += 1
        else:
            # Floyd: for j = d-k .. d-1 draw t in [0, j]; take t unless taken, then j.
            m = 0
            for j in range(d - k, d):
                u = variate(key_a, key_b, mix, dependent, seed, j - (d - k) + _SALT_DRAW)
                t = min(int(u * (j + 1)), j)
                for q in range(m):
                    if chosen[q] == t:
                        t = j
                        break
                chosen[m] = t
                m += 1
            for q in range(k):
                pos[out] = start + chosen[q]
                out += 1
    # Slices, so that the loops index from 0: numba then knows no index is negative and
    # drops its wrap-around select (which made this gather 1.6x slower).
    _gather_into(col, pos[starts[lo]:starts[hi]], src[starts[lo]:starts[hi]])
    if eids.shape[0] != 0:
        _gather_into(eids, pos[starts[lo]:starts[hi]], eid[starts[lo]:starts[hi]])


@numba.njit(cache=True, nogil=True)
def _gather_into(values, pos, out):
    """out[j] = values[pos[j]] (a tight loop: independent loads overlap)."""
    for j in range(pos.shape[0]):
        out[j] = values[pos[j]]


@numba.njit(cache=True, nogil=True, inline="always")
def _edge_id(eids, position):
    """The parent edge id at CSR `position`: eids[position], or the position itself when
    `eids` is empty (the edge ids are the CSR order)."""
    return np.int64(position) if eids.shape[0] == 0 else np.int64(eids[position])


# r_t comes from a per-vertex [N] float64 table (N hashes instead of one per in-edge read)
# on graphs this small (at most 512 KiB, a constant, and it stays in cache) when the layer
# reads at least N in-edges, and on any graph when it reads at least 8N: the table is then
# no larger than one byte per in-edge the layer reads anyway.
_TABLE_MAX_NODES = 1 << 16


@numba.njit(cache=True, nogil=True)
def labor_layer(rowptr, col, eids, rows, c, pi_edge, use_pi, num_nodes, key_a, key_b, mix,
                dependent, capacity=-1):
    """LABOR of one layer: edge t -> s kept iff r_t <= min(1, c_s * pi_t).

    `rows[i]` is the CSR row of destination i; `pi_edge` holds pi_t of every in-edge of
    the destinations in order (from `labor_importance`), so no array indexed by vertex id
    is needed; `num_nodes` is the graph's (global) vertex count.

    Returns the CSR pieces and each kept edge's weight, (1/p_ts) scaled so that a seed's
    weights sum to its number of kept edges (a plain mean of w * h is then the Hajek
    estimate of the full-neighbourhood mean).

    One pass over the destinations' in-edges writes the kept edges straight into output
    buffers sized by the expected number kept (sum of min(1, c_s pi_t)), grown by half
    when a draw exceeds it: memory follows the sampled edges, not the in-edges read (on
    R-MAT the frontier's in-degree sum grows with the graph through its hubs). r_t is
    hashed per edge, or read from a per-vertex table when the frontier reads at least one
    in-edge per vertex on a graph of at most `_TABLE_MAX_NODES` vertices, or at least 8
    per vertex on any graph (the table is then smaller than the in-edges read).
    `capacity` >= 0 replaces the expected count as the buffers' first size (tests use it
    to exercise the growth).
    """
    n = rows.shape[0]
    total = 0
    expected = 0.0
    m = 0
    for i in range(n):
        start, stop = rowptr[rows[i]], rowptr[rows[i] + 1]
        total += stop - start
        if use_pi:
            for _ in range(start, stop):
                expected += min(1.0, c[i] * pi_edge[m])
                m += 1
        else:
            expected += min(1.0, c[i]) * (stop - start)
    table = (num_nodes <= _TABLE_MAX_NODES and total >= num_nodes) or total >= 8 * num_nodes
    r = _vertex_variates(num_nodes, key_a, key_b, mix, dependent) if table \
        else np.empty(0, dtype=np.float64)
    if capacity < 0:
        capacity = min(total, int(expected + 4.0 * math.sqrt(expected)) + 16)
    src = np.empty(capacity, dtype=np.int64)
    eid = np.empty(capacity, dtype=np.int64)
    weight = np.empty(capacity if use_pi else 0, dtype=np.float64)  # LABOR-0: unweighted
    counts = np.zeros(n, dtype=np.int64)
    # Per destination, first the keep marks (a loop without stores that depend on the
    # draws, which the compiler vectorises: a fused loop that appends was 1.9x slower on
    # R-MAT 2^17), then the kept edges; the marks need one row's worth of bytes.
    widest = 0
    for i in range(n):
        widest = max(widest, rowptr[rows[i] + 1] - rowptr[rows[i]])
    marks = np.empty(widest, dtype=np.bool_)
    out = 0
    m = 0
    for i in range(n):
        start, stop = rowptr[rows[i]], rowptr[rows[i] + 1]
        kept = 0
        for j in range(stop - start):
            t = col[start + j]
            p = c[i] * (pi_edge[m + j] if use_pi else 1.0)
            u = r[t] if table else variate(key_a, key_b, mix, dependent, t, _SALT_VERTEX)
            marks[j] = u <= p
            kept += marks[j]
        if out + kept > capacity:  # more kept than expected: grow by half (rare)
            capacity = min(total, max(out + kept, capacity + capacity // 2 + 16))
            src, eid, weight = _grown(src, eid, weight, capacity, use_pi)
        first = out
        norm = 0.0
        for j in range(stop - start):
            if marks[j]:
                src[out] = col[start + j]
                eid[out] = _edge_id(eids, start + j)
                if use_pi:
                    weight[out] = 1.0 / min(1.0, c[i] * pi_edge[m + j])
                    norm += weight[out]
                out += 1
        m += stop - start
        counts[i] = kept
        if use_pi:
            for j in range(first, out):
                weight[j] *= kept / norm
    return counts, src[:out], eid[:out], weight[:out] if use_pi else weight


@numba.njit(cache=True, nogil=True)
def _grown(src, eid, weight, capacity, weighted):
    """The output buffers copied into larger ones of `capacity` entries."""
    size = src.shape[0]
    new_src = np.empty(capacity, dtype=np.int64)
    new_eid = np.empty(capacity, dtype=np.int64)
    new_weight = np.empty(capacity if weighted else 0, dtype=np.float64)
    new_src[:size] = src
    new_eid[:size] = eid
    if weighted:
        new_weight[:size] = weight
    return new_src, new_eid, new_weight


@numba.njit(cache=True, nogil=True)
def _vertex_variates(num_nodes, key_a, key_b, mix, dependent):
    """r_t of every vertex for one layer key."""
    r = np.empty(num_nodes, dtype=np.float64)
    for t in range(num_nodes):
        r[t] = variate(key_a, key_b, mix, dependent, t, _SALT_VERTEX)
    return r


@numba.njit(cache=True, nogil=True)
def _solve_c(local, start, d, k, pi):
    """c_s with sum_t 1 / min(1, c_s pi_t) = d^2 / k: the variance of NS with fanout k.

    `local[start:start + d]` are the local ids (into `pi`) of the seed's in-neighbours.
    Exact: with pi sorted descending, if the m largest are capped at 1 the rest give
    m + S_m / c = d^2/k with S_m = sum of 1/pi over the rest; take the first m whose c
    caps exactly those m.
    """
    target = d * d / k
    p = np.empty(d, dtype=np.float64)
    for j in range(d):
        p[j] = pi[local[start + j]]
    p = -np.sort(-p)
    suffix = np.zeros(d + 1, dtype=np.float64)
    for j in range(d - 1, -1, -1):
        suffix[j] = suffix[j + 1] + 1.0 / p[j]
    c = suffix[0] / target
    for m in range(d):
        c = suffix[m] / (target - m)
        if c * p[m] < 1.0 and (m == 0 or c * p[m - 1] >= 1.0):
            return c
    return c


@numba.njit(cache=True, nogil=True)
def _expected_vertices(offsets, local, c, pi, best):
    """Sum over touched t of min(1, pi_t * max_s c_s) = E[#sampled sources]; fills best.

    Vertices are summed in order of first appearance (the order of the frontier's edges).
    """
    n = c.shape[0]
    for e in range(local.shape[0]):
        best[local[e]] = 0.0
    for i in range(n):
        for e in range(offsets[i], offsets[i + 1]):
            best[local[e]] = max(best[local[e]], c[i])
    total = 0.0
    for e in range(local.shape[0]):
        t = local[e]
        if best[t] > 0.0:
            total += min(1.0, pi[t] * best[t])
            best[t] = -best[t]  # count each t once
    for e in range(local.shape[0]):
        best[local[e]] = abs(best[local[e]])
    return total


@numba.njit(cache=True, nogil=True)
def _frontier_edges(rowptr, col, rows):
    """(offsets [n+1], local [E], num_local): the destinations' in-edges and, per edge, a
    local id of its source (0..num_local-1 by sorted global id): batch-sized, no [N] array."""
    n = rows.shape[0]
    offsets = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        offsets[i + 1] = offsets[i] + rowptr[rows[i] + 1] - rowptr[rows[i]]
    sources = np.empty(offsets[n], dtype=np.int64)
    for i in range(n):
        start = rowptr[rows[i]]
        for e in range(offsets[i], offsets[i + 1]):
            sources[e] = col[start + e - offsets[i]]
    order = np.argsort(sources, kind="mergesort")
    local = np.empty(sources.shape[0], dtype=np.int64)
    count = 0
    for q in range(order.shape[0]):
        if q > 0 and sources[order[q]] != sources[order[q - 1]]:
            count += 1
        local[order[q]] = count
    return offsets, local, count + 1 if order.shape[0] else 0


@numba.njit(cache=True, nogil=True)
def labor_importance(rowptr, col, rows, fanout, iterations):
    """LABOR-* probabilities: fixed-point iterations on (pi, c), Balin & Catalyurek Sec. 3.

    Starts at LABOR-0 (pi = 1, c_s = k/d_s) and alternates pi_t <- pi_t * max_s c_s with
    re-solving every c_s for NS's variance, while the expected number of sampled vertices
    drops. An iteration that would raise it is undone, so the result never expects more
    vertices than LABOR-0. iterations < 0 runs until convergence. pi lives on the
    frontier's distinct in-neighbours only (local ids), so memory follows the batch.

    Returns:
        c: [n] per-seed scale; pi_edge: [E] pi_t of every in-edge of the destinations, in
        order (destination by destination, CSR order within one); expected: the expected
        number of sampled source vertices.
    """
    n = rows.shape[0]
    offsets, local, num_local = _frontier_edges(rowptr, col, rows)
    pi = np.ones(num_local, dtype=np.float64)
    best = np.zeros(num_local, dtype=np.float64)
    c = np.empty(n, dtype=np.float64)
    for i in range(n):
        d = offsets[i + 1] - offsets[i]
        c[i] = math.inf if d <= fanout else fanout / d
    expected = _expected_vertices(offsets, local, c, pi, best)
    step = 0
    while step < iterations or iterations < 0:
        step += 1
        old_c = c.copy()
        old_pi = pi.copy()
        # pi <- pi * max_s c_s on finite c (seeds with d <= k keep everything anyway)
        best[:] = 0.0
        for i in range(n):
            if math.isinf(c[i]):
                continue
            for e in range(offsets[i], offsets[i + 1]):
                best[local[e]] = max(best[local[e]], c[i])
        for t in range(num_local):
            if best[t] > 0.0:
                pi[t] *= best[t]
        for i in range(n):
            if not math.isinf(c[i]):
                c[i] = _solve_c(local, offsets[i], offsets[i + 1] - offsets[i], fanout, pi)
        now = _expected_vertices(offsets, local, c, pi, best)
        if not now < expected * (1.0 - 1e-3):  # also stops at expected == 0
            if now > expected:
                c[:] = old_c
                pi[:] = old_pi
            else:
                expected = now
            break
        expected = now
    pi_edge = np.empty(local.shape[0], dtype=np.float64)
    for e in range(local.shape[0]):
        pi_edge[e] = pi[local[e]]
    return c, pi_edge, expected


@numba.njit(cache=True, nogil=True)
def random_walk_layer(rowptr, col, frontier, walk_length, num_walks, restart_prob, top_k,
                      key_a, key_b, mix, dependent):
    """PinSAGE neighbours: the top_k most visited vertices of walks with restart from each seed.

    A walk moves to a uniform in-neighbour per step and returns to its seed with
    probability `restart_prob` after each step (and at a vertex without in-edges). Ties in
    visit count go to the smaller id; the seed itself is not its own neighbour.
    Returns counts, picked sources and their visit counts (the importance weights).
    """
    n = frontier.shape[0]
    budget = walk_length * num_walks
    visits = np.empty(max(budget, 1), dtype=np.int64)
    counts = np.zeros(n, dtype=np.int64)
    src = np.empty(n * top_k, dtype=np.int64)
    weight = np.empty(n * top_k, dtype=np.float64)
    out = 0
    for i in range(n):
        seed = frontier[i]
        m = 0
        for w in range(num_walks):
            cur = seed
            for step in range(walk_length):
                d = rowptr[cur + 1] - rowptr[cur]
                draw = 2 * (w * walk_length + step)
                if d == 0:
                    cur = seed
                    continue
                u = variate(key_a, key_b, mix, dependent, seed, draw + _SALT_DRAW)
                cur = col[rowptr[cur] + min(int(u * d), d - 1)]
                if cur != seed:
                    visits[m] = cur
                    m += 1
                restart = variate(key_a, key_b, mix, dependent, seed, draw + 1 + _SALT_DRAW)
                if restart < restart_prob:
                    cur = seed
        if m == 0:
            continue
        ids = np.sort(visits[:m])
        uniq = np.empty(m, dtype=np.int64)
        freq = np.empty(m, dtype=np.int64)
        u_count = 0
        for q in range(m):
            if u_count > 0 and uniq[u_count - 1] == ids[q]:
                freq[u_count - 1] += 1
            else:
                uniq[u_count] = ids[q]
                freq[u_count] = 1
                u_count += 1
        order = np.argsort(-freq[:u_count], kind="mergesort")  # stable: ties keep id order
        take = min(top_k, u_count)
        for q in range(take):
            src[out] = uniq[order[q]]
            weight[out] = freq[order[q]]
            out += 1
        counts[i] = take
    return counts, src[:out], weight[:out]


@numba.njit(cache=True, nogil=True)
def compact(frontier, picked):
    """Local ids: frontier -> 0..n-1 (in order), then new sources in first-seen order.

    An open-addressing hash map (linear probing, load <= 1/2) of 2 (n + E) + 1 slots:
    memory is O(n + E) whatever num_nodes is, and grows smoothly with the batch (no
    power-of-two rounding, which made the table jump 2x between similar batches).
    A slot packs (id << 32) | local id into one int64 when every id is below 2^31, so a
    probe is one cache miss instead of two (key and value arrays): 38 -> 25 ms for the
    input layer of a products-sized batch (58k destinations, 875k picks); prefetching the
    slot of the pick `_PROBE_AHEAD` ahead overlaps those misses (21-32 -> 12-16 ms). Larger
    ids take the same map with separate key and value arrays (`_compact_wide`).
    `frontier` must be distinct.
    Returns (col [E] local source ids, src_nodes [n_src] original ids, dst first).
    """
    n = frontier.shape[0]
    m = picked.shape[0]
    largest = max(frontier.max() if n else 0, picked.max() if m else 0)
    if largest >= 2**31 or n + m >= 2**31:
        return _compact_wide(frontier, picked)
    slots = 2 * (n + m) + 1
    table = np.full(slots, -1, dtype=np.int64)  # (id << 32) | local id, or -1
    nodes = np.empty(n + m, dtype=np.int64)
    for i in range(n):
        v = frontier[i]
        h = _slot(v, slots)
        while table[h] != -1:
            h = h + 1 if h + 1 < slots else 0
        table[h] = (v << 32) | i
        nodes[i] = v
    size = n
    out = np.empty(m, dtype=np.int64)
    for j in range(m):
        if j + _PROBE_AHEAD < m:  # start the miss of a later probe now (`_cache_hint`)
            prefetch(table, _slot(picked[j + _PROBE_AHEAD], slots))
        v = picked[j]
        h = _slot(v, slots)
        while True:
            entry = table[h]
            if entry == -1:
                table[h] = (v << 32) | size
                nodes[size] = v
                out[j] = size
                size += 1
                break
            if entry >> 32 == v:
                out[j] = entry & 0xFFFFFFFF
                break
            h = h + 1 if h + 1 < slots else 0
    return out, nodes[:size].copy()


@numba.njit(cache=True, nogil=True)
def _compact_wide(frontier, picked):
    """`compact` for any int64 ids: keys and local ids in two arrays."""
    n = frontier.shape[0]
    m = picked.shape[0]
    slots = 2 * (n + m) + 1
    keys = np.full(slots, -1, dtype=np.int64)
    values = np.empty(slots, dtype=np.int64)
    nodes = np.empty(n + m, dtype=np.int64)
    for i in range(n):
        v = frontier[i]
        h = _slot(v, slots)
        while keys[h] != -1:
            h = h + 1 if h + 1 < slots else 0
        keys[h] = v
        values[h] = i
        nodes[i] = v
    size = n
    out = np.empty(m, dtype=np.int64)
    for j in range(m):
        v = picked[j]
        h = _slot(v, slots)
        while keys[h] != -1 and keys[h] != v:
            h = h + 1 if h + 1 < slots else 0
        if keys[h] == -1:
            keys[h] = v
            values[h] = size
            nodes[size] = v
            size += 1
        out[j] = values[h]
    return out, nodes[:size].copy()


@numba.njit(cache=True, nogil=True, inline="always")
def _slot(v, slots):
    """Fibonacci hashing (ids are often clustered) mapped onto [0, slots) by a multiply:
    the top 32 bits of v * 2^64/phi, times slots, over 2^32 (slots < 2^32)."""
    mixed = (np.uint64(v) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)
    return np.int64((mixed * np.uint64(slots)) >> np.uint64(32))
