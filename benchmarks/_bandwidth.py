"""What bounds a copy_u_sum: this machine's copy bandwidth, the bytes a call must move, and
the probe graph that tells gathered-row latency from instruction throughput.

Shared by benchmarks/spmm.py (GB/s and share of copy bandwidth per cell, the bandwidth
floor) and benchmarks/kernel_selection.py (the same per cell, plus the cell's bound).

The bound of a cell (`bound`) is read from two measurements, in this order:

1. `share`: the cell's effective bandwidth (`compulsory_bytes` / time) over the measured
   copy bandwidth of the memory level its bytes live in (`level`): the last-level
   cache's (a warm copy of LLC/4 bytes into LLC/4) when the call's compulsory bytes fit
   in the LLC, as Pubmed's do at F <= 64 and R-MAT's forward at F=16 (each timed call
   follows one on the same input), else DRAM's (a 256 MiB copy). Against DRAM alone,
   Pubmed F=64 forward (10.5 MB in 0.19 ms, BENCHMARKS.md) moves about 55 GB/s, 1.7x
   the 33 GB/s DRAM copy: "bandwidth" by that measure, while the cache it reads from
   is faster. At `BANDWIDTH_SHARE` (60%) or more the call moves the bytes it cannot
   avoid at most 1 / 0.6 = 1.7x slower than a plain copy at that level moves bytes:
   the memory system bounds it, whatever the kernel does. "bandwidth".
2. `gather_ratio`: the same kernel's time on the graph over its time on
   `address_ordered(graph)`, the graph with the same in- and out-degrees (so the same
   loop trip counts, instructions, rows touched and compulsory bytes, in both
   directions) whose edges are rewired so that every gather reads rows in address order
   (hardware prefetch streams them; a row read again comes from L1). At `LATENCY_RATIO`
   (1.5) or more, a third or more of the call's time is spent waiting for the gathered
   rows: "gather latency". 1.5 sits well above the run-to-run noise of one cell on the
   shared 2-core VM (about 20%).
3. Otherwise the kernel is about as slow when its reads stream. If the streamed twin
   reaches the bandwidth share (`share * gather_ratio` >= 60%: with perfect locality the
   call is memory-bound, and the graph's gathers cost it under a third more), it is
   "bandwidth"; else neither locality nor bytes explain the time: instruction
   throughput (and per-call overheads: threads, allocation) bound it, "instructions".
"""

from __future__ import annotations

import statistics
import time

import torch

from gnnforge.graph import Graph

BANDWIDTH_SHARE = 0.6  # of the measured copy bandwidth: "bandwidth" at or above it
LATENCY_RATIO = 1.5    # time on the graph / on its address-ordered twin: "latency" above it


def median_ms(function, repeats: int) -> float:
    """Median milliseconds of `repeats` calls of `function`, after one warm-up call."""
    function()  # warm-up: compiles, builds cached formats, faults pages in
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def copy_bandwidth_gbs(repeats: int, num_bytes: int = 256 * 2**20) -> float:
    """Bytes read plus written per second by a tensor copy of `num_bytes` (the default,
    256 MiB, is far past the last-level cache: the machine's DRAM roofline)."""
    source = torch.ones(num_bytes // 4)
    target = torch.empty_like(source)
    milliseconds = median_ms(lambda: target.copy_(source), repeats)
    return 2 * source.numel() * 4 / milliseconds / 1e6


def compulsory_bytes(graph: Graph, width: int, backward: bool) -> int:
    """Bytes a float32 copy_u_sum at `width` cannot avoid moving (forward, or forward and
    backward): read x once, write out once, read rowptr + col (int32); the backward
    repeats it on the CSC."""
    one = (2 * graph.num_nodes * width + graph.num_nodes + 1 + graph.num_edges) * 4
    return 2 * one if backward else one


def level(num_bytes: int, cache_bytes: int) -> str:
    """'LLC' where `num_bytes` fit in a last-level cache of `cache_bytes`, else 'DRAM'."""
    return "LLC" if num_bytes <= cache_bytes else "DRAM"


def effective_gbs(num_bytes: int, milliseconds: float) -> float:
    return num_bytes / milliseconds / 1e6


def address_ordered(graph: Graph) -> Graph:
    """The graph with `graph`'s in- and out-degrees whose gathers run in address order.

    Edge i joins the i-th smallest source to the i-th smallest destination, so sources
    and destinations both ascend along the edges: a CSR walk (forward) and a CSC walk
    (backward) each read the rows they gather in ascending order. It may hold duplicate
    edges and self-loops, which copy_u_sum sums like any other edge.
    """
    src, dst = graph.coo()
    return Graph(torch.sort(src).values, torch.sort(dst).values, graph.num_nodes)


def bound(share: float, gather_ratio: float) -> str:
    """What bounds a cell (module docstring): 'bandwidth', 'gather latency' (of the
    gathered rows), 'instructions', or 'n/a' where a measurement is NaN.

    Args:
        share: effective bandwidth over the measured copy bandwidth of the memory level
            the call's bytes live in (`level`; 0.6 = 60%).
        gather_ratio: the kernel's time on the graph over its time on the
            address-ordered twin (`address_ordered`).
    """
    if share != share or gather_ratio != gather_ratio:  # NaN: a measurement is missing
        return "n/a"
    if share >= BANDWIDTH_SHARE:
        return "bandwidth"
    if gather_ratio >= LATENCY_RATIO:
        return "gather latency"
    if share * gather_ratio >= BANDWIDTH_SHARE:  # the streamed twin's share
        return "bandwidth"
    return "instructions"
