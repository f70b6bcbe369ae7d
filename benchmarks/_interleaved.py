"""Interleaved timing: every method once per round, each timed call after an untimed one.

On a small shared VM a kernel's time depends on what ran just before it (cache contents,
the allocator, thread pools) and on drift (neighbours' bursts). Timing all methods in the
same rounds spreads drift over all of them alike, and timing each call right after an
untimed call of the same method gives every method equally warm inputs: timed straight
after another method, the same kernel measured up to 1.5x slower (Pubmed F=16: 0.30 vs
0.20 ms) depending on which method ran before it.
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Callable


def interleaved_median_ms(methods: dict[str, Callable[[], object]],
                          repeats: int) -> dict[str, float]:
    """Median milliseconds per method over `repeats` rounds, after one warm-up round.

    Each round runs the methods in its own (seeded) random order, so no method always
    follows the same one: a peer's runtime can leave threads spinning after its call
    (DGL's OpenMP next to torch's), and in a fixed order the method after it always paid
    for that.
    """
    for call in methods.values():
        call()
    names = list(methods)
    times: dict[str, list[float]] = {name: [] for name in methods}
    for round_index in range(repeats):
        order = list(names)
        random.Random(round_index).shuffle(order)
        for name in order:
            call = methods[name]
            call()
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) * 1e3 for name, values in times.items()}
