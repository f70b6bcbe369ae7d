"""Kernel selection by measurement: which candidate is fastest for a kernel class, on this machine.

The fastest CPU kernel is not a property of the code: on one machine the AVX-512 build
wins, on a VM that hides AVX-512 and runs 256-bit AVX slowly the SSE2 build or numba
wins (issue 14 measured both). So, like FFTW's wisdom and cuDNN's benchmark mode, the
first call of a kernel *class* (primitive x reduce x dtype x index dtype x width class x
size class) times each candidate on a representative input (a seeded power-law graph,
the class's representative width) and records the winner in a
per-machine file under `cache_dir()/tuning/`, keyed by the machine fingerprint (CPU model
and flags, cores, threads, the instruction-set restriction, library versions and the
native sources). Later processes read the file and pay nothing; a lookup is one dict
access. `tune()` calibrates every common class up front (`gnnforge tune`).

Candidates: each native instruction-set variant (`_native_build`), numba, and for
copy sum/mean MKL's CSR product (`torch.sparse.mm`). `GNNFORGE_BACKEND` forces one
backend for every call (see `_dispatch`); `GNNFORGE_ISA=sse2|avx2` restricts the native
variants to that instruction set and below, standing in for a machine without AVX-512 or
AVX2 (numba's and MKL's own restrictions are NUMBA_CPU_NAME and MKL_ENABLE_INSTRUCTIONS).
The binary g-SpMMs (add, mul) and g-SDDMMs (add, mul, dot) are kernel classes too; edge
softmax and GINE's fused kernels run the default variant (the widest under GNNFORGE_ISA).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import platform
import statistics
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import torch

from gnnforge.ops import _native_build

__all__ = ["KernelClass", "candidates", "choice", "isa_restriction", "kernel_choices",
           "machine_fingerprint", "measured_classes", "record_path", "tune"]

# Row bytes at which a new width class starts, and each class's representative row bytes:
# below one 64-byte vector; one to four; four to sixteen (register-blocked rows); 1 KiB up
# (rows tiled through L1). In float32: F < 16, 16-63, 64-255, >= 256 (measured at 8, 16,
# 64 and 256, the grid widths).
_WIDTH_CLASS_BYTES = (0, 64, 256, 1024)
_REPRESENTATIVE_BYTES = (32, 64, 256, 1024)
_ISA_ORDER = _native_build.ISA_ORDER

# Timing: rounds interleave the candidates (drift hits all alike); a class stops early
# once its budget is spent. 2^17 edges at F=256 take about 3 ms a call on 2 cores.
_ROUNDS = 5
_CLASS_BUDGET_S = 0.6
_PRUNE_RATIO = 1.5
_REPRESENTATIVE_NODES = 2**14
_REPRESENTATIVE_EDGES = 2**17

# Size classes: whether the rows a kernel gathers fit in the last-level cache. The winner
# changes there (restricted to AVX2 on a 32 MiB-L3 EPYC: numba fastest on Pubmed's 5-20 MiB
# of features, the SSE2 build 2x faster on R-MAT's 32-128 MiB; BENCHMARKS.md). Streaming
# classes are timed on a graph whose rows are 1.5x the cache, two edges a node (the rows
# miss the cache; the call stays around 10-30 ms).
_FITS, _STREAMS = 0, 1
_STREAM_NODES_MAX = 2**21


class KernelClass(NamedTuple):
    """What a kernel's speed depends on, coarsely enough to measure each once."""

    primitive: str        # 'copy_lhs', 'copy_rhs', 'mean_grad', 'extreme_grad', 'add',
                          # 'mul' (binary g-SpMM), 'sddmm_dot', 'sddmm_add', 'sddmm_mul', ...
    reduce: str           # 'sum', 'mean', 'max', 'min' ('-' where there is none)
    dtype: str            # 'float32', 'float64'
    index: str            # 'int32', 'int64'
    width_class: int      # index into _WIDTH_CLASS_BYTES
    size: int = _FITS     # _FITS or _STREAMS: do the gathered rows fit in the LLC

    def key(self) -> str:
        parts = [self.primitive, self.reduce, self.dtype, self.index,
                 f"w{_REPRESENTATIVE_BYTES[self.width_class]}B"]
        return ".".join(parts + (["stream"] if self.size == _STREAMS else []))


def width_class(width: int, dtype: torch.dtype) -> int:
    """The width class of rows of `width` elements of `dtype`."""
    row_bytes = width * dtype.itemsize
    return sum(row_bytes >= start for start in _WIDTH_CLASS_BYTES[1:])


@functools.lru_cache(maxsize=1)
def last_level_cache_bytes() -> int:
    """The largest CPU cache's size from sysfs (32 MiB where it cannot be read)."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = path.read_text().strip().upper()
            scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
            sizes.append(int(text.rstrip("KMG")) * scale)
        except (OSError, ValueError):
            continue
    return max(sizes, default=32 * 2**20)


def size_class(gathered_bytes: int) -> int:
    """_STREAMS when a call gathers rows totalling more than the LLC, else _FITS."""
    return _STREAMS if gathered_bytes > last_level_cache_bytes() else _FITS


# Per-head classes ('mul_heads', ...: [N, H, D] rows times [E, H, 1] weights) are keyed by
# one head's row, D: the kernels rank by it, not by H x D (Pubmed, H x D = 64 floats:
# with 8 heads of 8 the SSE2 build ran 0.66 ms and the AVX-512 one 3.2; with 4 heads of
# 16, 0.63 and 0.37). Their calibration input has `_CALIBRATION_HEADS` heads, fewer for
# 1 KiB heads so that a node's row stays within 2 KiB.
_CALIBRATION_HEADS = 8
_CALIBRATION_HEADS_ROW_BYTES = 2048


def calibration_heads(kernel_class: KernelClass) -> int:
    """Heads of a per-head class's calibration input (1 for every other class)."""
    if not kernel_class.primitive.endswith("_heads"):
        return 1
    head_bytes = _REPRESENTATIVE_BYTES[kernel_class.width_class]
    return max(2, min(_CALIBRATION_HEADS, _CALIBRATION_HEADS_ROW_BYTES // head_bytes))


def representative_size(kernel_class: KernelClass) -> tuple[int, int]:
    """(nodes, edges) of the graph a class is timed on."""
    if kernel_class.size == _FITS:
        return _REPRESENTATIVE_NODES, _REPRESENTATIVE_EDGES
    row_bytes = _REPRESENTATIVE_BYTES[kernel_class.width_class] * calibration_heads(kernel_class)
    nodes = min(_STREAM_NODES_MAX, max(_REPRESENTATIVE_NODES,
                                       3 * last_level_cache_bytes() // (2 * row_bytes)))
    return nodes, 2 * nodes


def representative_work(kernel_class: KernelClass) -> int:
    """Elements a calibration call of `kernel_class` gathers (edges x representative
    width): how far a real call's size is from what the calibration measured."""
    itemsize = 8 if kernel_class.dtype == "float64" else 4
    width = max(1, _REPRESENTATIVE_BYTES[kernel_class.width_class] // itemsize)
    return representative_size(kernel_class)[1] * width * calibration_heads(kernel_class)


def isa_restriction() -> str | None:
    """The instruction-set ceiling from GNNFORGE_ISA, or None.

    Raises:
        ValueError: an unknown value (naming the accepted ones).
    """
    value = os.environ.get("GNNFORGE_ISA", "").strip().lower()
    if not value:
        return None
    if value not in _ISA_ORDER:
        raise ValueError(f"GNNFORGE_ISA must be one of {_ISA_ORDER}, got {value!r}")
    return value


def native_variants() -> list[str]:
    """Native variants allowed on this host under GNNFORGE_ISA, narrowest first."""
    names = [variant.name for variant in _native_build.available_variants()]
    ceiling = isa_restriction()
    if ceiling is not None:
        names = [name for name in names
                 if name not in _ISA_ORDER or _ISA_ORDER.index(name) <= _ISA_ORDER.index(ceiling)]
    return [name for name in names if _native_build.load(name) is not None]


def candidates(kernel_class: KernelClass) -> list[str]:
    """Backend names that can run `kernel_class`, e.g. ['native:sse2', 'numba', 'mkl']."""
    from gnnforge.ops._native import supports

    names = []
    if supports(kernel_class.primitive, kernel_class.reduce):
        names += [f"native:{name}" for name in native_variants()]
    names.append("numba")
    if kernel_class.primitive == "copy_lhs" and kernel_class.reduce in ("sum", "mean"):
        names.append("mkl")
    return names


# ----------------------------------------------------------------------------- fingerprint


@functools.lru_cache(maxsize=1)
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith(("model name", "Hardware", "CPU part")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_fingerprint() -> dict[str, str]:
    """What kernel timings depend on: CPU, cores, threads, ISA ceiling, library versions.

    Two processes with the same fingerprint share measured kernel choices; the planner's
    cost models record it too, to know whether they were fitted on this kind of machine.
    """
    import numba

    from gnnforge import __version__

    flags = " ".join(sorted(_native_build.cpu_flags()))
    return {
        "cpu_model": _cpu_model(),
        "cpu_flags": hashlib.sha256(flags.encode()).hexdigest()[:16],
        "machine": platform.machine(),
        "cores": str(os.cpu_count()),
        "threads": str(torch.get_num_threads()),
        "isa": isa_restriction() or "all",
        "torch": torch.__version__,
        "numba": numba.__version__,
        "gnnforge": __version__,
        "native_sources": _native_build.sources_digest(),
    }


def _fingerprint_key(fingerprint: dict[str, str]) -> str:
    text = json.dumps(fingerprint, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def record_path() -> Path:
    """The file holding this machine's measured choices."""
    from gnnforge.data import cache_dir

    return cache_dir() / "tuning" / f"kernels-{_fingerprint_key(machine_fingerprint())}.json"


# ----------------------------------------------------------------------------- the record


_lock = threading.Lock()
_choices: dict[KernelClass, str] = {}
_loaded: list[Path] = []          # the record file read into _choices (once per process)
_measurements: dict[str, dict] = {}


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _read(path: Path) -> dict[str, dict]:
    """The record's classes; {} (with one warning) when it is corrupt or from elsewhere."""
    if not path.exists():
        return {}
    try:
        record = json.loads(path.read_text())
        if record["fingerprint"] != machine_fingerprint():
            raise ValueError("its fingerprint is another machine's")
        classes = record["classes"]
        if not all(isinstance(entry["choice"], str) for entry in classes.values()):
            raise ValueError("an entry has no choice")
        return classes
    except (ValueError, KeyError, TypeError, AttributeError, OSError) as error:
        warnings.warn(f"gnnforge.ops: kernel timings in {path} are unreadable or stale "
                      f"({error}); measuring again", RuntimeWarning, stacklevel=4)
        return {}


def _parse_key(key: str) -> KernelClass | None:
    parts = key.split(".")
    size = _FITS
    if len(parts) == 6 and parts[5] == "stream":
        parts, size = parts[:5], _STREAMS
    if len(parts) != 5 or not parts[4].startswith("w") or not parts[4].endswith("B"):
        return None
    representative = int(parts[4][1:-1])
    if representative not in _REPRESENTATIVE_BYTES:
        return None
    return KernelClass(*parts[:4], _REPRESENTATIVE_BYTES.index(representative), size)


def _load_record() -> None:
    path = record_path()
    if _loaded and _loaded[0] == path:
        return
    _loaded[:] = [path]
    _choices.clear()
    _measurements.clear()
    for key, entry in _read(path).items():
        parsed = _parse_key(key)
        if parsed is not None:
            _choices[parsed] = entry["choice"]
            _measurements[key] = entry


def _store(kernel_class: KernelClass, entry: dict) -> None:
    path = record_path()
    with _file_lock(path):
        classes = _read(path) if path.exists() else {}
        classes[kernel_class.key()] = entry
        record = {"fingerprint": machine_fingerprint(), "classes": classes}
        temporary = path.with_suffix(f".tmp{os.getpid()}")
        temporary.write_text(json.dumps(record, indent=1, sort_keys=True))
        os.replace(temporary, path)


# ----------------------------------------------------------------------------- choosing


def choice(kernel_class: KernelClass) -> str:
    """The fastest candidate for `kernel_class` on this machine (measured once, then read)."""
    found = _choices.get(kernel_class)
    if found is not None:
        return found
    with _lock:
        _load_record()
        found = _choices.get(kernel_class)
        if found is None:
            found = _calibrate(kernel_class)
    return found


def _calibrate(kernel_class: KernelClass) -> str:
    names = candidates(kernel_class)
    if len(names) == 1:
        _choices[kernel_class] = names[0]
        return names[0]
    from gnnforge.ops._calibration_inputs import runner

    times, descheduled = _time_candidates({name: runner(name, kernel_class)
                                           for name in names})
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
    _choices[kernel_class] = winner
    _measurements[kernel_class.key()] = entry
    _store(kernel_class, entry)
    return winner


def _time_candidates(runs: dict[str, Callable[[], object]]
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
    deadline = time.perf_counter() + _CLASS_BUDGET_S
    for round_index in range(_ROUNDS):
        for name, run in racing.items():
            seconds, disturbed = _timed_call(run)
            times[name].append(seconds)
            descheduled += disturbed
        if round_index >= 1:
            best = min(min(times[name]) for name in racing)
            racing = {name: run for name, run in racing.items()
                      if min(times[name]) <= _PRUNE_RATIO * best}
        if round_index >= 2 and time.perf_counter() > deadline:
            break
    return times, descheduled


# A timed call during which the process ran (all its threads together, CPU time) for less
# than this share of the wall time was descheduled: it timed whoever had the cores. On the
# 2-core VM, a calibration in a niced process beside a busy one recorded every candidate
# at about 8 ms where the kernels take 0.4-1 ms, and the choice among them was arbitrary.
_RUNNING_SHARE = 0.5
_RETRIES = 3


def _timed_call(run: Callable[[], object]) -> tuple[float, bool]:
    """(wall seconds, disturbed) of one call; a call during which the process was
    descheduled (`_RUNNING_SHARE`) runs again, up to `_RETRIES` times, and the last
    attempt's time is returned with disturbed=True if it was descheduled too."""
    for _ in range(_RETRIES + 1):
        cpu_start, start = time.process_time(), time.perf_counter()
        run()
        wall = time.perf_counter() - start
        if time.process_time() - cpu_start >= _RUNNING_SHARE * wall:
            return wall, False
    return wall, True


def kernel_choices() -> dict[str, str]:
    """Kernel class key -> chosen candidate, for every class measured on this machine."""
    with _lock:
        _load_record()
        return {kernel_class.key(): name for kernel_class, name in sorted(_choices.items())}


def measured_classes() -> dict[str, dict]:
    """Kernel class key -> {'choice', 'median_ms' per candidate, 'runs', 'measured_at'}."""
    with _lock:
        _load_record()
        return dict(sorted(_measurements.items()))


def common_classes() -> list[KernelClass]:
    """The classes `tune()` measures: float32 with int32 indices (what graphs under 2^31
    edges run), every width class; in cache, every copy primitive and gradient and the
    u_add_v / u_dot_v g-SDDMMs (attention scores); streaming, copy sum/mean/max from 16
    floats up. The rest (float64, int64, binary g-SpMMs, ...) are measured on first use."""
    classes = []
    for width in range(len(_WIDTH_CLASS_BYTES)):
        for reduce in ("sum", "mean", "max"):
            classes.append(KernelClass("copy_lhs", reduce, "float32", "int32", width))
        for primitive in ("mean_grad", "extreme_grad", "sddmm_add", "sddmm_dot"):
            classes.append(KernelClass(primitive, "-", "float32", "int32", width))
    for width in range(1, len(_WIDTH_CLASS_BYTES)):
        for reduce in ("sum", "mean", "max"):
            classes.append(KernelClass("copy_lhs", reduce, "float32", "int32", width, _STREAMS))
    return classes


def tune(classes: list[KernelClass] | None = None, force: bool = False,
         progress: bool = False) -> dict[str, dict]:
    """Measure kernel classes now (default `common_classes()`) and record the winners.

    Args:
        classes: which classes; default the common ones.
        force: measure again even where a choice is recorded (with the default
            classes: the common ones and every class the record holds).
        progress: show a progress bar.

    Returns:
        measured_classes() after tuning.
    """
    if classes is None:
        classes = common_classes()
        if force:  # also every class measured on first use (binary g-SpMMs, float64, ...)
            recorded = (_parse_key(key) for key in measured_classes())
            classes += [c for c in recorded if c is not None and c not in classes]
    if progress:
        from tqdm import tqdm

        classes = tqdm(classes, desc="tuning kernels", unit="class")
    for kernel_class in classes:
        with _lock:
            _load_record()
            if force or kernel_class not in _choices:
                _calibrate(kernel_class)
    return measured_classes()


def forget() -> None:
    """Drop this process's view of the record and the choices refined on real inputs
    (tests; after GNNFORGE_ISA changes)."""
    from gnnforge.ops import _trials

    with _lock:
        _choices.clear()
        _measurements.clear()
        _loaded.clear()
    _trials.forget()
