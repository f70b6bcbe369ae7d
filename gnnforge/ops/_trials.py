"""Kernel choice refined on the real input: cuDNN's benchmark mode for close kernel classes.

The calibration (`_calibration`) times a kernel class's candidates on one representative
graph. Where two candidates come out close, the real graph decides: its degree
distribution, locality and size differ from the representative one (restricted to AVX2,
R-MAT 2^17 ran 1.5x faster on the SSE2 build while the calibration graph preferred numba).
So the first call of such a class on a graph (its CSR arrays) runs every contender on the
real input (`_WARMUP_RUNS` untimed calls each, then `_TIMED_RUNS` rounds in which each
contender runs an untimed and a timed call; calls of `_LONG_CALL_S` or more get one
warm-up and `_LONG_TIMED_RUNS` timed calls, for the contenders within `_LONG_DROP_RATIO`
of the fastest warm-up), keeps the fastest of those whose result has
the same bits as the calibrated choice's (so a trial changes speed, never results) and
returns that result; later calls on that graph run the winner directly.

Bounded: contenders are the candidates within `_CONTENDER_RATIO` of the calibrated best
(at most `_MAX_CONTENDERS`), within `_FAR_CONTENDER_RATIO` for a call `_FAR_FACTOR` times
larger or smaller than the calibration input (its ranking says less there: restricted to
SSE2, the calibration graph's 4 MiB of 256-byte rows ran numba 2.1x faster than the SSE2
build, R-MAT 2^17's 32 MiB ran the SSE2 build 1.6x faster, and a 2x bound kept SSE2 out of
the trial); calls gathering fewer than `_MIN_WORK` elements (a few microseconds, where
timing is noise) and classes with one contender run the calibrated choice. Beyond those,
the caller may hand in `forms`: candidates the calibration does not time, which compute
the calibrated choice's bits another way (the source-blocked copy sum,
`_cpu_kernels.forms`); they contend on every real graph. A class times its contenders on
at most `_GRAPHS_PER_CLASS` graphs of each size (work in the same power-of-4 range:
`size_bucket`); after that (sampled minibatches: a new graph every step, of about the
same size) every new graph of that size runs the candidate that won most of those trials.
Sizes are kept apart because the winner depends on them: on the
2-core VM, Pubmed (1.4M gathered elements at F=16) preferred numba where R-MAT 2^17 (34M)
preferred the SSE2 build, and one verdict for both ran Pubmed's backward on the loser.
Decisions live in this process only: they are about the user's graphs, not the machine.
`GNNFORGE_KERNEL_TRIALS=0`, or `torch.use_deterministic_algorithms(True)`, turns trials
off (every call then runs the calibrated choice: which kernel runs does not depend on
timings either).

The calibrated choice arrives as an argument (`_auto_kernels` asks `_calibration.choice`
for it), so trials and calibration sit side by side above the record and this module
imports no calibration and no kernels.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

from gnnforge.ops import _tuning_record
from gnnforge.ops._kernel_class import KernelClass, representative_work

__all__ = ["choose", "class_choice", "contenders", "enabled", "forget", "run", "trial_results",
           "trials_run"]

_CONTENDER_RATIO = 2.0
_FAR_FACTOR = 4
_FAR_CONTENDER_RATIO = 4.0
_MAX_CONTENDERS = 3
# numba's first calls on a graph ran 2-7x its steady time (Pubmed F=64: 3.0, 2.6, 0.75,
# 0.52, 0.44 ms; its outputs come from fresh allocations until glibc's thresholds adapt),
# the SSE2 build's 1.2x after one call: two warm-ups, the fastest of three timed runs.
# Short calls get more timed rounds (up to `_MAX_TIMED_RUNS`, until the rounds took
# `_ROUNDS_BUDGET_S`): on Pubmed at F=16 (0.15-0.2 ms calls) three rounds ranked numba over
# MKL (0.190 vs 0.201 ms) where their steady times were 0.177 and 0.152.
_WARMUP_RUNS = 2
_TIMED_RUNS = 3
_MAX_TIMED_RUNS = 15
_ROUNDS_BUDGET_S = 0.02
# Long calls (a full-graph SpMM of the products-sized graph: 1-5 s each) are their own
# warm-up: when every contender's first call took `_LONG_CALL_S` or more, each gets one
# warm-up and `_LONG_TIMED_RUNS` timed calls, without an untimed call before each (3 calls
# a contender instead of 8: 24 full-graph SpMMs had made the first products GCN step
# several minutes long).
_LONG_CALL_S = 0.25
_LONG_TIMED_RUNS = 2
# ... and a long contender more than this much slower than the fastest first call is not
# timed again: two more multi-second calls would not make it the winner.
_LONG_DROP_RATIO = 2.0
_GRAPHS_PER_CLASS = 3
_MIN_WORK = 2**15

Result = TypeVar("Result")
GraphKey = tuple[int, ...]

_lock = threading.Lock()
SizeKey = tuple[KernelClass, int]               # (class, size bucket)

_settled: dict[SizeKey, str] = {}                          # no (more) trials: run this
_by_graph: dict[tuple[KernelClass, GraphKey], str] = {}
_wins: dict[SizeKey, collections.Counter] = {}
_results: list[dict] = []
_clock = time.perf_counter


def enabled() -> bool:
    """Whether calls may time contenders on the real input."""
    if os.environ.get("GNNFORGE_KERNEL_TRIALS", "1").strip() == "0":
        return False
    return not torch.are_deterministic_algorithms_enabled()


def contenders(kernel_class: KernelClass, calibrated: str, work: int | None = None,
               forms: Sequence[str] = ()) -> list[str]:
    """The calibrated choice first, then the candidates whose calibrated best time was
    within `_CONTENDER_RATIO` of it (fastest first, at most `_MAX_CONTENDERS` in all);
    within `_FAR_CONTENDER_RATIO` when a call's `work` (gathered elements) is at least
    `_FAR_FACTOR` times above or below the calibration's. Then `forms`, whatever the
    calibration says: other ways to compute the calibrated choice's bits, whose gain
    depends on the graph more than the calibration input shows (two in-edges a row:
    few gathers share a source range)."""
    entry = _tuning_record.measured_classes().get(kernel_class.key(), {})
    times = entry.get("min_ms", {})
    chosen = [calibrated]
    if calibrated in times:
        ratio = _FAR_CONTENDER_RATIO if _far_from_calibration(kernel_class, work) \
            else _CONTENDER_RATIO
        close = sorted((name for name, ms in times.items()
                        if name != calibrated and ms <= ratio * times[calibrated]),
                       key=times.get)
        chosen = [calibrated, *close][:_MAX_CONTENDERS]
    return chosen + [name for name in forms if name not in chosen]


def _far_from_calibration(kernel_class: KernelClass, work: int | None) -> bool:
    """Whether a call gathering `work` elements is `_FAR_FACTOR` times above or below the
    class's calibration input (False when the call's work is not known)."""
    if work is None:
        return False
    calibrated = representative_work(kernel_class)
    return max(work, 1) >= _FAR_FACTOR * calibrated or _FAR_FACTOR * max(work, 1) <= calibrated


def run(kernel_class: KernelClass, calibrated: str, graph: GraphKey, work: int,
        call: Callable[[str], Result], forms: Callable[[], Sequence[str]] | None = None
        ) -> Result:
    """`call(name)` for the candidate to run on `graph` (a key of its index arrays).

    Args:
        kernel_class: the call's class.
        calibrated: the calibration's choice for the class (`_calibration.choice`).
        graph: identifies the real input's structure (data pointers and lengths of its
            index arrays); a decision is reused for calls with the same key.
        work: elements the call gathers (edges x width): small calls are not timed.
        call: runs the named candidate and returns its result.
        forms: gives the other ways to compute `calibrated`'s bits, timed on every new
            graph (`contenders`); asked only when a new graph is trialled (kernel calls
            are microseconds on small graphs).
    """
    plan = _plan(kernel_class, calibrated, graph, work, forms=forms)
    if isinstance(plan, str):
        return call(plan)
    return _trial(kernel_class, graph, work, plan, call)[1]


def choose(kernel_class: KernelClass, calibrated: str, graph: GraphKey, work: int,
           call: Callable[[str], object], candidates: Sequence[str] | None = None) -> str:
    """The name of the candidate `run` would call on `graph`, timing contenders through
    `call` where `run` would. For a caller whose trial runs on a bounded sample of its real
    input and then runs the winner on all of it (the row gather, `_gather_rows`: a trial on
    the whole batch would hold one batch-sized output per contender). `work` is the
    sample's. `candidates`, when given, are timed whatever the calibration says of them
    (the calibrated choice first): for a class whose calibration input is known to misrank
    the real ones by more than the contender ratios."""
    plan = _plan(kernel_class, calibrated, graph, work, candidates)
    if isinstance(plan, str):
        return plan
    return _trial(kernel_class, graph, work, plan, call)[0]


def _plan(kernel_class: KernelClass, calibrated: str, graph: GraphKey, work: int,
          candidates: Sequence[str] | None = None,
          forms: Callable[[], Sequence[str]] | None = None) -> str | list[str]:
    """The candidate to run without a trial, or the contenders to time (two or more)."""
    if not enabled():
        return calibrated
    decided = _by_graph.get((kernel_class, graph))     # this graph's own trial first
    if decided is None:
        decided = _settled.get((kernel_class, size_bucket(work)))
    if decided is not None:
        return decided
    if work < _MIN_WORK:
        return calibrated
    with _lock:
        names = _names_for_new_graph(kernel_class, calibrated, work, candidates, forms)
    return names[0] if len(names) == 1 else names


def size_bucket(work: int) -> int:
    """Calls whose work lies in the same power-of-4 range share a bucket (and a verdict)."""
    return max(int(work), 1).bit_length() // 2


def class_choice(kernel_class: KernelClass, calibrated: str, work: int) -> str:
    """What a call of `kernel_class` with `work` gathered elements, on a graph without
    its own decision, runs now: the trials' verdict for that size once there is one, else
    the `calibrated` choice."""
    return _settled.get((kernel_class, size_bucket(work))) or calibrated


def _names_for_new_graph(kernel_class: KernelClass, calibrated: str, work: int,
                         candidates: Sequence[str] | None = None,
                         forms: Callable[[], Sequence[str]] | None = None) -> list[str]:
    """The contenders to time on a new graph (`candidates` when given, else those close
    in the calibration and `forms`), or [the name to run] when none are left."""
    names = contenders(kernel_class, calibrated, work, forms() if forms else ()) \
        if candidates is None else \
        [calibrated, *(name for name in candidates if name != calibrated)]
    if len(names) == 1:
        _settled[(kernel_class, size_bucket(work))] = names[0]
    return names


def _settle_if_done(size: SizeKey, names: list[str]) -> None:
    """After `_GRAPHS_PER_CLASS` trials of a class at a size, its verdict there: the
    candidate with most wins (ties go to the calibration's order, its choice first)."""
    wins = _wins[size]
    if sum(wins.values()) >= _GRAPHS_PER_CLASS:
        _settled[size] = max(names, key=lambda name: (wins[name], -names.index(name)))


def _trial(kernel_class: KernelClass, graph: GraphKey, work: int,
           names: list[str], call: Callable[[str], Result]) -> tuple[str, Result]:
    """Time each of `names` on the real input; record and return the winner and its result.

    Only a contender whose result has the same bits as the calibrated choice's (`names[0]`)
    may win, so a trial never changes what a call computes: a resumed run in another
    process, whose trials may time differently, computes the same bits. (Same-bits
    candidates are common: copy sum and max in every build; FMA or another order of
    operations makes others differ in the last bits, e.g. copy mean native vs numba.)
    So the result returned is the calibrated choice's (the winner's bits; a max winner's
    indices may come in the other index dtype, which callers convert): the trial holds
    that one output and the call in flight, never one per contender.
    """
    first_seconds = _warm_up(names, call)
    fastest = min(first_seconds.values())
    long_calls = fastest >= _LONG_CALL_S
    if long_calls:  # not timed again, not bit-checked: cannot win
        names = [name for name in names if name == names[0]
                 or first_seconds[name] <= _LONG_DROP_RATIO * fastest]
    seconds: dict[str, list[float]] = {name: [] for name in names}
    reference: Result | None = None
    differs: list[str] = []
    # Rounds over the contenders, so drift (a neighbour's burst) hits all of them alike;
    # each timed call follows an untimed call of the same contender: right after another
    # kernel the same kernel measured up to 1.4x slower (Pubmed F=16: 0.22 vs 0.16 ms
    # after itself; the other runtime's threads still spin, the allocator's state moved).
    rounds = _LONG_TIMED_RUNS if long_calls else _TIMED_RUNS
    rounds_start = _clock()
    for round_index in range(_MAX_TIMED_RUNS):
        if round_index >= rounds and _clock() - rounds_start >= _ROUNDS_BUDGET_S:
            break
        for name in names:
            if not long_calls:
                call(name)
            start = _clock()
            result = call(name)
            seconds[name].append(_clock() - start)
            if name == names[0]:
                reference = result
            elif name not in differs and not _same_bits(result, reference):
                differs.append(name)
            del result                    # not alive during the next contender's call
    eligible = [name for name in names if name not in differs]
    winner = min(eligible, key=lambda name: min(seconds[name]))
    with _lock:
        _by_graph[(kernel_class, graph)] = winner
        size = (kernel_class, size_bucket(work))
        _wins.setdefault(size, collections.Counter())[winner] += 1
        _settle_if_done(size, names)
        _results.append({"class": kernel_class.key(), "work": work, "choice": winner,
                         "calibrated": names[0], "different_bits": differs,
                         "ms": {name: round(1e3 * min(seconds.get(name, [took])), 4)
                                for name, took in first_seconds.items()}})
    return winner, reference


def _warm_up(names: list[str], call: Callable[[str], object]) -> dict[str, float]:
    """Untimed calls of each contender (JIT, caches, the allocator's state), `_WARMUP_RUNS`
    each, or one when every first call took `_LONG_CALL_S` or more; the seconds of each
    contender's first call."""
    first_seconds = {}
    for name in names:
        start = _clock()
        call(name)
        first_seconds[name] = _clock() - start
    if min(first_seconds.values()) < _LONG_CALL_S:
        for name in names:
            for _ in range(_WARMUP_RUNS - 1):
                call(name)
    return first_seconds


def _same_bits(one: object, other: object) -> bool:
    """Whether two kernel results (a tensor or a tuple of them) are equal bit for bit;
    integer tensors (max/min winners, int32 or int64 by candidate) compare as int64."""
    ones = one if isinstance(one, tuple) else (one,)
    others = other if isinstance(other, tuple) else (other,)
    if len(ones) != len(others):
        return False
    for a, b in zip(ones, others):
        if a.shape != b.shape:
            return False
        if not a.dtype.is_floating_point and not b.dtype.is_floating_point:
            a, b = a.long(), b.long()
        if a.dtype != b.dtype or not torch.equal(a, b):
            return False
    return True


def trials_run() -> int:
    """How many trials this process has run: a caller timing something of its own (the
    planner's races) sees from a change that its call included a trial."""
    return len(_results)


def trial_results() -> list[dict]:
    """Every trial of this process: class key, work, each contender's best ms, choice."""
    with _lock:
        return [dict(entry) for entry in _results]


def forget() -> None:
    """Drop this process's trial decisions (tests; after re-tuning)."""
    with _lock:
        _settled.clear()
        _by_graph.clear()
        _wins.clear()
        _results.clear()
