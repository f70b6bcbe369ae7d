"""The per-machine record of kernel choices: read, validate, lock, write; and this
process's view of it.

Measured choices live in one JSON file per machine under `cache_dir()/tuning/`, keyed by
the machine fingerprint (CPU model and flags, cores, threads, the instruction-set
restriction, library versions and the native sources): two processes with the same
fingerprint share them, a record from another machine or a corrupt one is ignored with
one warning. Writers take a file lock and replace the file atomically. A process reads
the file once; a lookup is then one dict access. A record path that cannot be used (a
directory, a file or folder without write permission, a read-only cache) is warned about
once per path; the process then keeps its choices in memory and kernels run as usual.

Entries under keys that name no kernel class (the GEMM library of a product class,
`_dense_product`) are kept and read back the same way (`recorded_key`, `remember_key`).

Above the kernel-class vocabulary (`_kernel_class`) and the native build (for the
fingerprint); below the calibration, which measures what is not recorded here.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import platform
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch

from gnnforge.ops import _native_build
from gnnforge.ops._kernel_class import KernelClass, parse_key

__all__ = ["forget", "kernel_choices", "load", "lock", "machine_fingerprint",
           "measured_classes", "measured_keys", "record_path", "recorded", "recorded_key",
           "remember", "remember_key"]

# Guards this process's view (`_choices`, `_measurements`, `_loaded`); callers that read
# then measure (the calibration) hold it across both.
lock = threading.Lock()
_choices: dict[KernelClass, str] = {}
_keyed: dict[str, dict] = {}      # entries under keys outside the kernel classes (GEMMs)
_loaded: list[Path] = []          # the record file read into _choices (once per process)
_measurements: dict[str, dict] = {}
_unusable: set[Path] = set()      # record paths warned about: choices stay in memory


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
        "isa": _native_build.isa_restriction() or "all",
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

    name = f"kernels-{_fingerprint_key(machine_fingerprint())}.json"
    try:
        return cache_dir() / "tuning" / name
    except OSError as error:  # the cache folder cannot be made: nothing is read or written
        path = Path(os.environ.get("GNNFORGE_CACHE") or "~/.cache/gnnforge") / "tuning" / name
        _warn_unusable(path, error)
        return path


def _warn_unusable(path: Path, error: OSError) -> None:
    """One warning per path that cannot be read or written; its choices stay in memory."""
    if path in _unusable:
        return
    _unusable.add(path)
    warnings.warn(f"gnnforge.ops: cannot use the kernel-choice record {path} "
                  f"({type(error).__name__}: {error}); kernels run with choices kept in "
                  "memory for this process (point GNNFORGE_CACHE at a writable folder to "
                  "keep them)", RuntimeWarning, stacklevel=4)


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
    """The record's classes; {} (with one warning) when it is corrupt, from elsewhere or
    cannot be read."""
    if path in _unusable or not path.exists():
        return {}
    try:
        text = path.read_text()
    except OSError as error:  # a directory, no read permission
        _warn_unusable(path, error)
        return {}
    try:
        record = json.loads(text)
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


def load() -> None:
    """Read this machine's record into the process's view, once per record file (the
    caller holds `lock`)."""
    path = record_path()
    if _loaded and _loaded[0] == path:
        return
    _loaded[:] = [path]
    _choices.clear()
    _keyed.clear()
    _measurements.clear()
    for key, entry in _read(path).items():
        parsed = parse_key(key)
        if parsed is not None:
            _choices[parsed] = entry["choice"]
            _measurements[key] = entry
        else:
            _keyed[key] = entry


def recorded(kernel_class: KernelClass) -> str | None:
    """The choice this process knows for `kernel_class`, or None (no file access)."""
    return _choices.get(kernel_class)


def remember(kernel_class: KernelClass, choice: str, entry: dict | None = None) -> None:
    """Record `choice` for `kernel_class`: in this process, and with its measurements
    `entry` in the machine's file (the caller holds `lock`)."""
    _choices[kernel_class] = choice
    if entry is None:
        return
    _measurements[kernel_class.key()] = entry
    _store(kernel_class.key(), entry)


def recorded_key(key: str) -> str | None:
    """The choice this process knows under a key that names no kernel class (the GEMM
    library of a product class, `_dense_product`), or None."""
    entry = _keyed.get(key)
    return None if entry is None else entry["choice"]


def remember_key(key: str, choice: str, entry: dict) -> None:
    """Record `choice` under `key` (no kernel class): in this process and, with its
    measurements `entry`, in the machine's file (the caller holds `lock`)."""
    _keyed[key] = {**entry, "choice": choice}
    _store(key, entry)


def measured_keys() -> dict[str, dict]:
    """Key -> entry for the record's entries that name no kernel class (GEMM products)."""
    with lock:
        load()
        return dict(sorted(_keyed.items()))


def _store(key: str, entry: dict) -> None:
    path = record_path()
    if path in _unusable:
        return
    try:
        _write(path, key, entry)
    except OSError as error:  # a directory in the way, no write permission, read-only
        _warn_unusable(path, error)


def _write(path: Path, key: str, entry: dict) -> None:
    """Add one entry to the machine's file, under the file lock, replacing it atomically."""
    with _file_lock(path):
        classes = _read(path) if path.exists() else {}
        classes[key] = entry
        record = {"fingerprint": machine_fingerprint(), "classes": classes}
        temporary = path.with_suffix(f".tmp{os.getpid()}")
        try:
            temporary.write_text(json.dumps(record, indent=1, sort_keys=True))
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)


def kernel_choices() -> dict[str, str]:
    """Kernel class key -> chosen candidate, for every class measured on this machine."""
    with lock:
        load()
        return {kernel_class.key(): name for kernel_class, name in sorted(_choices.items())}


def measured_classes() -> dict[str, dict]:
    """Kernel class key -> {'choice', 'median_ms' per candidate, 'runs', 'measured_at'}."""
    with lock:
        load()
        return dict(sorted(_measurements.items()))


def forget() -> None:
    """Drop this process's view of the record (it is read again on next use)."""
    with lock:
        _choices.clear()
        _keyed.clear()
        _measurements.clear()
        _loaded.clear()
        _unusable.clear()
