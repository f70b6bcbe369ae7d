"""Interleaved timing: every method once per round, each timed call after an untimed one.

On a small shared VM a kernel's time depends on what ran just before it (cache contents,
the allocator, thread pools) and on drift (neighbours' bursts). Timing all methods in the
same rounds spreads drift over all of them alike, and timing each call right after an
untimed call of the same method gives every method equally warm inputs: timed straight
after another method, the same kernel measured up to 1.5x slower (Pubmed F=16: 0.30 vs
0.20 ms) depending on which method ran before it.

Cheap cells get more rounds: a median of 5 calls of 0.2 ms is 1 ms of evidence and moves
by 20-30% with one neighbour's burst, so `min_seconds` extends the rounds until the timed
calls of all methods add up to that long (at most `max_rounds`, an odd count so the
median is one measured call).
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Callable

MAX_ROUNDS = 101


def interleaved_median_ms(methods: dict[str, Callable[[], object]], repeats: int,
                          min_seconds: float = 0.0,
                          max_rounds: int = MAX_ROUNDS) -> dict[str, float]:
    """Median milliseconds per method over at least `repeats` rounds, after one warm-up
    round; more rounds (up to `max_rounds`) while the timed calls took under
    `min_seconds` in all.

    Each round runs the methods in its own (seeded) random order, so no method always
    follows the same one: a peer's runtime can leave threads spinning after its call
    (DGL's OpenMP next to torch's), and in a fixed order the method after it always paid
    for that.
    """
    for call in methods.values():
        call()
    times: dict[str, list[float]] = {name: [] for name in methods}
    rounds = repeats
    round_index = 0
    while round_index < rounds:
        _one_round(methods, times, round_index)
        round_index += 1
        if round_index == rounds:
            rounds = _rounds_wanted(times, repeats, min_seconds, max_rounds)
    return {name: statistics.median(values) * 1e3 for name, values in times.items()}


def _one_round(methods: dict[str, Callable[[], object]], times: dict[str, list[float]],
               round_index: int) -> None:
    order = list(methods)
    random.Random(round_index).shuffle(order)
    for name in order:
        call = methods[name]
        call()
        start = time.perf_counter()
        call()
        times[name].append(time.perf_counter() - start)


def _rounds_wanted(times: dict[str, list[float]], repeats: int, min_seconds: float,
                   max_rounds: int) -> int:
    """Rounds needed for `min_seconds` of timed calls at the rate measured so far: odd,
    at least the rounds done, at most max(max_rounds, repeats)."""
    done = len(next(iter(times.values()), []))
    spent = sum(sum(values) for values in times.values())
    if done == 0 or spent >= min_seconds:
        return done
    cap = max(max_rounds, repeats)
    wanted = min(max(int(done * min_seconds / max(spent, 1e-9)) + 1, done), cap)
    if wanted % 2 == 0:  # an odd count: the median is one measured call
        wanted = wanted + 1 if wanted < cap else max(wanted - 1, done)
    return wanted
