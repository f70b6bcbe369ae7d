"""Kernel selection by measurement: which candidate is fastest for a kernel class, on this machine.

The fastest CPU kernel is not a property of the code: on one machine the AVX-512 build
wins, on a VM that hides AVX-512 and runs 256-bit AVX slowly the SSE2 build or numba
wins (issue 14 measured both). So, like FFTW's wisdom and cuDNN's benchmark mode, the
first call of a kernel *class* (`_kernel_class`: primitive x reduce x dtype x index dtype
x width class x size class) times each candidate on a representative input
(`_calibration_inputs`: a seeded power-law graph, the class's representative width) and
records the winner in the per-machine record (`_tuning_record`). Later processes read the
record and pay nothing; a lookup is one dict access. `tune()` calibrates every common
class up front (`gnnforge tune`).

Candidates (`_cpu_kernels.candidates`, handed in by the layer above as `kernels`, so this
module imports no backend): each native instruction-set variant (`_native_build`), numba,
and for copy sum/mean MKL's CSR product (`torch.sparse.mm`).
`GNNFORGE_BACKEND` forces one backend for every call (see `_dispatch`);
`GNNFORGE_ISA=sse2|avx2` restricts the native variants to that instruction set and below,
standing in for a machine without AVX-512 or AVX2 (numba's and MKL's own restrictions are
NUMBA_CPU_NAME and MKL_ENABLE_INSTRUCTIONS). The binary g-SpMMs (add, mul) and g-SDDMMs
(add, mul, dot) are kernel classes too; edge softmax and GINE's fused kernels run the
default variant (the widest under GNNFORGE_ISA).

Layering: above the vocabulary and the record; beside the per-graph trials (`_trials`),
which refine a close choice on the real input; below `_auto_kernels`, which hands in the
CPU kernels and defines the public `tune` with them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from gnnforge.ops import _calibration_inputs, _tuning_record
from gnnforge.ops._calibration_inputs import CandidateKernels
from gnnforge.ops._kernel_class import STREAMS, WIDTH_CLASS_BYTES, KernelClass, parse_key

__all__ = ["Clock", "choice", "clock", "common_classes", "time_candidates", "tune"]

# Timing: rounds interleave the candidates (drift hits all alike); a class stops early
# once its budget is spent. 2^17 edges at F=256 take about 3 ms a call on 2 cores.
_ROUNDS = 5
_CLASS_BUDGET_S = 0.6
_PRUNE_RATIO = 1.5

# A timed call during which the process ran (all its threads together, CPU time) for less
# than this share of the wall time was descheduled: it timed whoever had the cores. On the
# 2-core VM, a calibration in a niced process beside a busy one recorded every candidate
# at about 8 ms where the kernels take 0.4-1 ms, and the choice among them was arbitrary.
_RUNNING_SHARE = 0.5
_RETRIES = 3


@dataclass(frozen=True)
class Clock:
    """Where the calibration reads time: wall seconds, and the CPU seconds this process ran
    (both to spot a descheduled call). Tests install a clock their fake kernels advance, so
    which candidate wins and how often each runs does not depend on the machine's load."""

    wall: Callable[[], float] = time.perf_counter
    cpu: Callable[[], float] = time.process_time


clock = Clock()


def choice(kernel_class: KernelClass, kernels: CandidateKernels) -> str:
    """The fastest of `kernels`' candidates for `kernel_class` on this machine (measured
    once, then read)."""
    found = _tuning_record.recorded(kernel_class)
    if found is not None:
        return found
    with _tuning_record.lock:
        _tuning_record.load()
        found = _tuning_record.recorded(kernel_class)
        if found is None:
            found = _calibrate(kernel_class, kernels)
    return found


def _calibrate(kernel_class: KernelClass, kernels: CandidateKernels) -> str:
    """Time the class's candidates, record and return the winner (the caller holds the
    record's lock)."""
    names = kernels.candidates(kernel_class)
    if len(names) == 1:
        _tuning_record.remember(kernel_class, names[0])
        return names[0]
    times, descheduled = time_candidates(
        {name: _calibration_inputs.runner(name, kernel_class, kernels) for name in names})
    # The fastest run, not the median, decides: interference from other processes only
    # ever adds time, so the minimum is the best estimate of the undisturbed speed.
    winner = min(times, key=lambda name: min(times[name]))
    entry = {"choice": winner,
             "min_ms": {name: round(1e3 * min(values), 4) for name, values in times.items()},
             "median_ms": {name: round(1e3 * statistics.median(values), 4)
                           for name, values in times.items()},
             "runs": len(times[winner]),
             "descheduled_runs": descheduled,
             "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    _tuning_record.remember(kernel_class, winner, entry)
    return winner


def time_candidates(runs: dict[str, Callable[[], object]]
                     ) -> tuple[dict[str, list[float]], int]:
    """(seconds per call of each candidate, timed calls still descheduled after their
    retries), in interleaved rounds after one warm-up each.

    From the second round on, a candidate whose best time is over `_PRUNE_RATIO` x the
    best candidate's leaves the race (it cannot win; on 2 cores the candidates differ by up
    to 10x, and timing the slow ones again was most of `tune()`'s time). A call during
    which the process was descheduled is timed again (`_timed_call`).
    """
    for run in runs.values():
        run()                       # warm-up: JIT, page faults, buffer pool
    times: dict[str, list[float]] = {name: [] for name in runs}
    racing = dict(runs)
    descheduled = 0
    deadline = clock.wall() + _CLASS_BUDGET_S
    for round_index in range(_ROUNDS):
        for name, run in racing.items():
            seconds, disturbed = _timed_call(run)
            times[name].append(seconds)
            descheduled += disturbed
        if round_index >= 1:
            best = min(min(times[name]) for name in racing)
            racing = {name: run for name, run in racing.items()
                      if min(times[name]) <= _PRUNE_RATIO * best}
        if round_index >= 2 and clock.wall() > deadline:
            break
    return times, descheduled


def _timed_call(run: Callable[[], object]) -> tuple[float, bool]:
    """(wall seconds, disturbed) of one call; a call during which the process was
    descheduled (`_RUNNING_SHARE`) runs again, up to `_RETRIES` times, and the last
    attempt's time is returned with disturbed=True if it was descheduled too."""
    for _ in range(_RETRIES + 1):
        cpu_start, start = clock.cpu(), clock.wall()
        run()
        wall = clock.wall() - start
        if clock.cpu() - cpu_start >= _RUNNING_SHARE * wall:
            return wall, False
    return wall, True


def common_classes() -> list[KernelClass]:
    """The classes `tune()` measures: float32 with int32 indices (what graphs under 2^31
    edges run), every width class; in cache, every copy primitive and gradient and the
    u_add_v / u_dot_v g-SDDMMs (attention scores); streaming, copy sum/mean/max from 16
    floats up. The rest (float64, int64, binary g-SpMMs, ...) are measured on first use."""
    classes = []
    for width in range(len(WIDTH_CLASS_BYTES)):
        for reduce in ("sum", "mean", "max"):
            classes.append(KernelClass("copy_lhs", reduce, "float32", "int32", width))
        for primitive in ("mean_grad", "extreme_grad", "sddmm_add", "sddmm_dot"):
            classes.append(KernelClass(primitive, "-", "float32", "int32", width))
    for width in range(1, len(WIDTH_CLASS_BYTES)):
        for reduce in ("sum", "mean", "max"):
            classes.append(KernelClass("copy_lhs", reduce, "float32", "int32", width, STREAMS))
    return classes


def tune(kernels: CandidateKernels, classes: list[KernelClass] | None = None,
         force: bool = False, progress: bool = False) -> dict[str, dict]:
    """Measure `kernels`' candidates for some kernel classes now and record the winners:
    the public `gnnforge.ops.tune` (`_auto_kernels.tune`, which hands in the CPU kernels
    and documents the other arguments)."""
    if classes is None:
        classes = common_classes()
        if force:  # also every class measured on first use (binary g-SpMMs, float64, ...)
            recorded = (parse_key(key) for key in _tuning_record.measured_classes())
            classes += [c for c in recorded if c is not None and c not in classes]
    if progress:
        from tqdm import tqdm

        classes = tqdm(classes, desc="tuning kernels", unit="class")
    for kernel_class in classes:
        with _tuning_record.lock:
            _tuning_record.load()
            if force or _tuning_record.recorded(kernel_class) is None:
                _calibrate(kernel_class, kernels)
    return _tuning_record.measured_classes()
