"""Build-on-first-use of the native kernel library in instruction-set variants, cached on disk.

The library (every `_native_src/*.cpp`, one shared object) is plain C++ with a C ABI (no
torch headers, so it compiles in seconds, not the minute a torch extension takes), loaded
with ctypes. It is compiled once per instruction-set *variant* the host can run:

    x86-64:  sse2 (baseline x86-64), avx2 (x86-64-v3: AVX2, FMA, BMI), avx512 (the host's
             full set, -march=native, built only where the CPU has AVX-512)
    aarch64: armv8 (baseline, NEON), native (-mcpu=native)
    other:   native

Which variant is fastest is not assumed: the widest vectors lose on some machines (a VM
that hides AVX-512, a CPU whose 256-bit units are slow), so `_calibration` times them per
kernel class and remembers the winner. `load(variant)` returns one variant's library.

Cache: `gnnforge.data.cache_dir()/native/`, one file per variant and key (a hash of the
sources, the compiler's version, the flags, the CPU's feature flags and the ABI version), so
a change of any of them rebuilds and a cache shared between machines never runs foreign
instructions. Builds are serialised by a file lock (other processes wait, then load);
each build records the file's sha256 beside it and a file whose hash differs (truncated,
replaced) is rebuilt, never loaded; a library missing a symbol of the C ABI (`PROTOTYPES`,
below) is rebuilt with a warning; a failed build is remembered per key, so a machine
without a working compiler does not recompile in every new process. `GNNFORGE_NATIVE=0`
disables the library.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ABI_VERSION", "PROTOTYPES", "Variant", "available_variants", "build",
           "default_variant", "is_cached", "isa_restriction", "load", "unavailable_reason"]

_SOURCE_DIR = Path(__file__).with_name("_native_src")
_COMMON_FLAGS = ("-O3", "-fopenmp", "-shared", "-fPIC", "-std=c++17")
_BUILD_SECONDS = 900  # a loaded machine (load 16 on 2 cores) took over 300 s
_reasons: dict[str, str] = {}

# The C ABI: its version and every exported function's prototype, in one table, so that
# loading can check that a library exports every symbol the Python side calls (a library
# missing one is rebuilt, never half-used) and each source file in `_native_src/` adds
# its functions here in one place. Argument codes: dtype 0 = float32, 1 = float64;
# index64 0 = int32 indices, 1 = int64. The version is bumped with every change of a
# prototype below and must equal gf_abi_version() in spmm.cpp.
ABI_VERSION = 7

_P, _I64, _I32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int

# name -> (argtypes, restype)
PROTOTYPES: dict[str, tuple[list, object]] = {
    "gf_abi_version": ([], _I32),
    # dtype, index64, ptr, index, x, out, arg (or NULL), rows, width, reduce, threads
    "gf_spmm_copy": ([_I32, _I32, _P, _P, _P, _P, _P, _I64, _I64, _I32, _I32], None),
    # dtype, index64, ptr, index, x, out, rows, width, mean, threads, num_src, block_rows
    "gf_spmm_sum_blocked": ([_I32, _I32, _P, _P, _P, _P, _I64, _I64, _I32, _I32, _I64, _I64],
                            None),
    # dtype, index64, ptr, index, x, out, rows, width, mean, threads (the deep prefetch)
    "gf_spmm_sum_deep": ([_I32, _I32, _P, _P, _P, _P, _I64, _I64, _I32, _I32], None),
    # dtype, index64, colptr, row, rowptr, grad, out, num_src, num_dst, width, threads,
    # block_rows (0: one pass)
    "gf_mean_grad": ([_I32, _I32, _P, _P, _P, _P, _P, _I64, _I64, _I64, _I32, _I64], None),
    # dtype, index64, colptr, row, arg, grad, out, num_src, num_dst, width, threads
    "gf_extreme_grad": ([_I32, _I32, _P, _P, _P, _P, _P, _I64, _I64, _I64, _I32], None),
    # unused since the pool advises through libc (`_buffers.advise_huge`); kept exported
    # so that the kernel sources, and the planner's cost models fitted on them, stay as
    # they are
    "gf_advise_huge": ([_P, _I64], None),
    # binary.cpp: dtype, index64, op, reduce, b_vector, ptr, ia, ib, a, a_stride, a_hs,
    # b, b_stride, b_hs, out, arg_a (or NULL), arg_b (or NULL), rows, H, D, threads
    "gf_spmm_binary": ([_I32, _I32, _I32, _I32, _I32, _P, _P, _P, _P, _I64, _I64, _P, _I64,
                        _I64, _P, _P, _P, _I64, _I64, _I64, _I32], None),
    # sddmm.cpp: dtype, index64, op, b_vector, ia, ib, a, a_stride, a_hs, b, b_stride, b_hs,
    # out, edges, H, D, threads
    "gf_sddmm": ([_I32, _I32, _I32, _I32, _P, _P, _P, _I64, _I64, _P, _I64, _I64, _P, _I64,
                  _I64, _I64, _I32], None),
    # binary_grad.cpp: dtype, index64, source, rowptr, eids, arg_u, arg_e, grad, other (or
    # NULL), stride, offset, out, num_dst, num_src, width, threads
    "gf_extreme_binary_grad": ([_I32, _I32, _I32, _P, _P, _P, _P, _P, _P, _I64, _P, _P, _I64,
                                _I64, _I64, _I32], None),
    # gine.cpp: dtype, index64, rowptr, col, eids, code (or NULL), x, table, scale, out,
    # rows, width, threads
    "gf_gine_forward": ([_I32, _I32, _P, _P, _P, _P, _P, _P, ctypes.c_double, _P, _I64,
                         _I64, _I32], None),
    # dtype, index64, rowptr, col, eids, colptr, row, ceids, code (or NULL), x, table, scale,
    # grad, grad_x, grad_table, num_src, num_dst, table_rows, width, threads
    "gf_gine_backward": ([_I32, _I32, _P, _P, _P, _P, _P, _P, _P, _P, _P, ctypes.c_double, _P,
                          _P, _P, _I64, _I64, _I64, _I64, _I32], None),
    # softmax.cpp: dtype, index64, ptr, eids, logits, out, rows, K, threads
    "gf_edge_softmax": ([_I32, _I32, _P, _P, _P, _P, _I64, _I64, _I32], None),
    # dtype, index64, ptr, eids, attention, grad, out, rows, K, threads
    "gf_edge_softmax_backward": ([_I32, _I32, _P, _P, _P, _P, _P, _I64, _I64, _I32], None),
}


@dataclass(frozen=True)
class Variant:
    """One instruction-set build of the library.

    Attributes:
        name: 'sse2', 'avx2', 'avx512', 'armv8' or 'native'.
        flags: compiler flags selecting the instruction set (tried in order: the first
            tuple the compiler accepts is used).
        requires: CPU feature flags (as /proc/cpuinfo names them) the host needs.
    """

    name: str
    flags: tuple[tuple[str, ...], ...]
    requires: frozenset[str] = frozenset()


_X86_VARIANTS = (
    Variant("sse2", (("-march=x86-64", "-mtune=generic"),), frozenset({"sse2"})),
    Variant("avx2", (("-march=x86-64-v3", "-mtune=generic"), ("-march=haswell",)),
            frozenset({"avx2", "fma", "bmi1", "bmi2", "f16c", "movbe"})),
    Variant("avx512", (("-march=native",),), frozenset({"avx512f", "avx512bw", "avx512vl"})),
)
_ARM_VARIANTS = (
    Variant("armv8", (("-march=armv8-a",),)),
    Variant("native", (("-mcpu=native",), ("-march=native",))),
)
_OTHER_VARIANTS = (Variant("native", (("-march=native",), ())),)


def cpu_flags() -> frozenset[str]:
    """The host CPU's feature flags (/proc/cpuinfo), empty where that is unreadable."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


@functools.lru_cache(maxsize=1)
def available_variants() -> tuple[Variant, ...]:
    """The variants this host can run, narrowest instruction set first."""
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        flags = cpu_flags()
        # Without readable flags only the baseline is known to be safe.
        return tuple(v for v in _X86_VARIANTS if flags and v.requires <= flags) or \
            _X86_VARIANTS[:1]
    if machine in ("aarch64", "arm64"):
        return _ARM_VARIANTS
    return _OTHER_VARIANTS


# x86 variants from narrowest to widest; GNNFORGE_ISA names a ceiling among them.
ISA_ORDER = ("sse2", "avx2", "avx512")


def isa_restriction() -> str | None:
    """The instruction-set ceiling from GNNFORGE_ISA, or None.

    Raises:
        ValueError: an unknown value (naming the accepted ones).
    """
    value = os.environ.get("GNNFORGE_ISA", "").strip().lower()
    if not value:
        return None
    if value not in ISA_ORDER:
        raise ValueError(f"GNNFORGE_ISA must be one of {ISA_ORDER}, got {value!r}")
    return value


def default_variant() -> str:
    """The variant used where nothing was measured: the host's widest instruction set, at
    most GNNFORGE_ISA's ceiling (which stands in for a machine without the wider ones)."""
    names = [variant.name for variant in available_variants()]
    ceiling = os.environ.get("GNNFORGE_ISA", "").strip().lower()
    if ceiling in ISA_ORDER:
        allowed = [name for name in names
                   if name not in ISA_ORDER or ISA_ORDER.index(name) <= ISA_ORDER.index(ceiling)]
        names = allowed or names[:1]
    return names[-1]


def _variant(name: str) -> Variant:
    for variant in available_variants():
        if variant.name == name:
            return variant
    names = [v.name for v in available_variants()]
    raise ValueError(f"native variant {name!r} cannot run on this CPU; available: {names}")


def _compiler() -> str | None:
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _sources() -> list[Path]:
    return sorted(_SOURCE_DIR.glob("*.cpp"))


def _code_files() -> list[Path]:
    """Every source and header the library is compiled from."""
    return _sources() + sorted(_SOURCE_DIR.glob("*.h"))


def sources_digest() -> str:
    """A digest of the kernels' code: every source and header (16 hex digits).

    Headers count: the shared SIMD helpers in `simd.h` change what every kernel compiles
    to (a header-only edit once changed the g-SDDMM's stores). Kernel records and the
    planner's cost models record it, so an edit of the kernels shows as a mismatch.
    """
    digest = hashlib.sha256()
    for path in _code_files():
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _key(compiler: str, flags: tuple[str, ...]) -> str:
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                             timeout=60).stdout
    digest = hashlib.sha256()
    # Headers too: a change in a shared header rebuilds like a change in a source.
    parts = [source.read_bytes().decode() for source in _code_files()]
    parts += [version, " ".join(flags), " ".join(sorted(cpu_flags())), platform.machine(),
              str(ABI_VERSION)]
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:20]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive file lock: one process builds, the others wait and then find the file."""
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _intact(target: Path) -> bool:
    """True when `target` exists and its sha256 matches the one recorded when it was built."""
    record = target.with_suffix(".json")
    if not target.exists() or not record.exists():
        return False
    try:
        expected = json.loads(record.read_text())["sha256"]
    except (ValueError, KeyError, OSError, TypeError):
        return False
    return _sha256(target) == expected


def _compile(compiler: str, flags: tuple[str, ...], target: Path) -> str | None:
    """Compile into `target` (atomically) and record its hash; the error text on failure."""
    handle, temporary = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(handle)
    command = [compiler, *_COMMON_FLAGS, *flags, "-o", temporary, *map(str, _sources())]
    result = subprocess.run(command, capture_output=True, text=True, timeout=_BUILD_SECONDS)
    if result.returncode != 0:
        os.unlink(temporary)
        return f"{' '.join(command)}: {result.stderr.strip()[-2000:]}"
    digest = _sha256(Path(temporary))
    os.replace(temporary, target)
    target.with_suffix(".json").write_text(json.dumps({"sha256": digest, "flags": flags}))
    return None


def build(variant: str | None = None, directory: Path | None = None,
          rebuild: bool = False) -> Path:
    """Compile one variant of the library (or find it cached and intact) and return its path.

    Args:
        variant: a name from `available_variants()`; default `default_variant()`.
        directory: where to cache it; default `gnnforge.data.cache_dir() / 'native'`.
        rebuild: compile even when an intact file is cached.

    Raises:
        RuntimeError: no C++ compiler found, or every flag set failed now or in an earlier
            process with the same key (compiler output included).
    """
    from gnnforge.data import cache_dir

    spec = _variant(variant or default_variant())
    compiler = _compiler()
    if compiler is None:
        raise RuntimeError("no C++ compiler found (tried $CXX, g++, c++, clang++)")
    directory = Path(directory) if directory is not None else cache_dir() / "native"
    directory.mkdir(parents=True, exist_ok=True)
    errors = []
    for flags in spec.flags:
        target = _library_path(directory, spec.name, compiler, flags)
        stem = target.stem
        failed = target.with_suffix(".failed")
        with _locked(directory / f".{stem}.lock"):
            if not rebuild and _intact(target):
                return target
            if failed.exists() and not rebuild:
                errors.append(failed.read_text())
                continue
            if target.exists():
                warnings.warn(f"gnnforge.ops: cached native library {target} does not match "
                              f"the hash recorded when it was built; rebuilding it",
                              RuntimeWarning, stacklevel=2)
            error = _compile(compiler, flags, target)
            if error is None:
                return target
            failed.write_text(error)
            errors.append(error)
    raise RuntimeError(f"compiling the native kernels ({spec.name}) failed:\n"
                       + "\n".join(errors))


def is_cached(variant: str | None = None, directory: Path | None = None) -> bool:
    """Whether `build(variant)` would find an intact library in the cache (no compile)."""
    from gnnforge.data import cache_dir

    compiler = _compiler()
    if compiler is None:
        return False
    spec = _variant(variant or default_variant())
    directory = Path(directory) if directory is not None else cache_dir() / "native"
    return any(_intact(_library_path(directory, spec.name, compiler, flags))
               for flags in spec.flags)


def _library_path(directory: Path, variant: str, compiler: str, flags: tuple[str, ...]) -> Path:
    """Where `build` caches the library of `variant` compiled with `flags`."""
    return directory / f"gnnforge_native-{variant}-{_key(compiler, flags)}.so"


def _missing_symbols(library: ctypes.CDLL) -> list[str]:
    return [name for name in PROTOTYPES if not hasattr(library, name)]


def _open(path: Path) -> ctypes.CDLL:
    """dlopen `path` and check it: every symbol present, the ABI version ours."""
    library = ctypes.CDLL(str(path))
    missing = _missing_symbols(library)
    if missing:
        raise _Incomplete(f"{path} lacks {', '.join(missing)}")
    library.gf_abi_version.restype = ctypes.c_int
    if library.gf_abi_version() != ABI_VERSION:
        raise _Incomplete(f"{path} has ABI version {library.gf_abi_version()}, "
                          f"expected {ABI_VERSION}")
    for name, (argtypes, restype) in PROTOTYPES.items():
        function = getattr(library, name)
        function.argtypes, function.restype = argtypes, restype
    return library


class _Incomplete(RuntimeError):
    """A library that loaded but does not export what this version of gnnforge calls."""


def _fresh_copy(path: Path) -> Path:
    """A rebuilt library under a new name: dlopen returns an already loaded path's old
    mapping, so a library replaced in this process must be opened under another name."""
    handle, copy = tempfile.mkstemp(suffix=".so", dir=path.parent, prefix="reload-")
    os.close(handle)
    shutil.copyfile(path, copy)
    return Path(copy)


@functools.lru_cache(maxsize=None)
def load(variant: str | None = None) -> ctypes.CDLL | None:
    """One variant's loaded library with its prototypes set, or None (warned once).

    Args:
        variant: a name from `available_variants()`; default `default_variant()`.
    """
    name = variant or default_variant()
    if os.environ.get("GNNFORGE_NATIVE", "1") == "0":
        _reasons[name] = "disabled by GNNFORGE_NATIVE=0"
        return None
    import torch  # noqa: F401  (its libgomp must be loaded first so both share one runtime)

    try:
        try:
            return _open(build(name))
        except _Incomplete as error:
            warnings.warn(f"gnnforge.ops: {error}; rebuilding the native library",
                          RuntimeWarning, stacklevel=2)
            path = build(name, rebuild=True)
            copy = _fresh_copy(path)
            try:
                return _open(copy)
            finally:
                copy.unlink()  # the mapping stays valid after the file is gone
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as error:
        _reasons[name] = f"{type(error).__name__}: {error}"
        if len(_reasons) > 1:
            return None                 # one warning per process, not one per variant
        warnings.warn(f"gnnforge.ops: native kernels ({name}) unavailable, using other "
                      f"backends ({_reasons[name]})", RuntimeWarning, stacklevel=3)
        return None


def unavailable_reason(variant: str | None = None) -> str | None:
    """Why `load(variant)` returned None (after it was called), else None."""
    return _reasons.get(variant or default_variant())
