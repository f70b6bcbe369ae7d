"""Build-on-first-use of the native kernel library (`_native_src/spmm.cpp`), cached on disk.

The library is plain C++ with a C ABI (no torch headers, so it compiles in a few seconds,
not the minute a torch extension takes), loaded with ctypes. It is compiled with the host
compiler for the host CPU (`-march=native`) and cached under
`gnnforge.data.cache_dir()/native/` keyed by a hash of the source, the compiler's version,
the flags and the CPU's feature flags, so a change of any of them rebuilds and a cache
shared between different machines never runs foreign instructions. Concurrent first
builds (pytest workers, DDP ranks) each write a private temporary file and rename it into
place. When no compiler works, `load()` returns None once with a warning naming why, and
gnnforge runs the numba backend. `GNNFORGE_NATIVE=0` disables the library.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

__all__ = ["build", "load", "unavailable_reason"]

_SOURCE = Path(__file__).with_name("_native_src") / "spmm.cpp"
_ABI_VERSION = 3
_FLAG_SETS = (
    ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17"],
    ["-O3", "-fopenmp", "-shared", "-fPIC", "-std=c++17"],  # compilers without -march=native
)
_BUILD_SECONDS = 300
_reason: list[str] = []


def _compiler() -> str | None:
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith(("flags", "Features")):
                    return line
    except OSError:
        pass
    return platform.processor()


def _key(compiler: str, flags: list[str]) -> str:
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                             timeout=60).stdout
    digest = hashlib.sha256()
    for part in (_SOURCE.read_bytes().decode(), version, " ".join(flags), _cpu_flags(),
                 platform.machine(), str(_ABI_VERSION)):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:20]


def build(directory: Path | None = None) -> Path:
    """Compile the library (or find it cached) and return its path.

    Args:
        directory: where to cache it; default `gnnforge.data.cache_dir() / 'native'`.

    Raises:
        RuntimeError: no C++ compiler found, or every flag set failed (compiler output
            included).
    """
    from gnnforge.data import cache_dir

    compiler = _compiler()
    if compiler is None:
        raise RuntimeError("no C++ compiler found (tried $CXX, g++, c++, clang++)")
    directory = Path(directory) if directory is not None else cache_dir() / "native"
    directory.mkdir(parents=True, exist_ok=True)
    errors = []
    for flags in _FLAG_SETS:
        target = directory / f"gnnforge_spmm-{_key(compiler, flags)}.so"
        if target.exists():
            return target
        handle, temporary = tempfile.mkstemp(suffix=".so", dir=directory)
        os.close(handle)
        result = subprocess.run([compiler, *flags, "-o", temporary, str(_SOURCE)],
                                capture_output=True, text=True, timeout=_BUILD_SECONDS)
        if result.returncode == 0:
            os.replace(temporary, target)
            return target
        os.unlink(temporary)
        errors.append(f"{compiler} {' '.join(flags)}: {result.stderr.strip()[-2000:]}")
    raise RuntimeError("compiling the native kernels failed:\n" + "\n".join(errors))


@functools.lru_cache(maxsize=1)
def load() -> ctypes.CDLL | None:
    """The loaded library with its prototypes set, or None (warned once) when unavailable."""
    if os.environ.get("GNNFORGE_NATIVE", "1") == "0":
        _reason.append("disabled by GNNFORGE_NATIVE=0")
        return None
    import torch  # noqa: F401  (its libgomp must be loaded first so both share one runtime)

    try:
        library = ctypes.CDLL(str(build()))
        if library.gf_abi_version() != _ABI_VERSION:
            raise RuntimeError(f"ABI version {library.gf_abi_version()} != {_ABI_VERSION}")
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        _reason.append(f"{type(error).__name__}: {error}")
        warnings.warn(f"gnnforge.ops: native kernels unavailable, using the numba backend "
                      f"({_reason[-1]})", RuntimeWarning, stacklevel=3)
        return None
    _prototypes(library)
    return library


def unavailable_reason() -> str | None:
    """Why `load()` returned None (after it was called), else None."""
    return _reason[-1] if _reason else None


def _prototypes(library: ctypes.CDLL) -> None:
    pointer, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    library.gf_spmm_copy.argtypes = [i32, i32, pointer, pointer, pointer, pointer, pointer,
                                     i64, i64, i32, i32]
    library.gf_mean_grad.argtypes = [i32, i32, pointer, pointer, pointer, pointer, pointer,
                                     i64, i64, i64, i32]
    library.gf_extreme_grad.argtypes = [i32, i32, pointer, pointer, pointer, pointer,
                                        pointer, i64, i64, i64, i32]
    library.gf_advise_huge.argtypes = [pointer, i64]
    for name in ("gf_spmm_copy", "gf_mean_grad", "gf_extreme_grad", "gf_advise_huge"):
        getattr(library, name).restype = None
