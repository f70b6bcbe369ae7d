"""Compile the native kernels up front, so a run's first step does not carry the build.

The library is built on first use, once per machine and instruction-set variant (about
30 s each on 2 cores; docs/kernels.md). Called from a kernel, that first use lands inside
whatever the caller is timing: `gnnforge train` on a fresh cache counted about 120 s of
compiling as its first epoch's training time. `prepare_native_kernels()` builds the
variants the kernels may use before the timed part, and says so when it compiled any.
"""

from __future__ import annotations

import os
import time

from gnnforge.ops import _native_build
from gnnforge.ops._cpu_kernels import allowed_native_variants, native_variants

__all__ = ["prepare_native_kernels"]


def prepare_native_kernels() -> str | None:
    """Build (or find cached) every native variant this host may use; a line saying what
    was compiled and how long it took, or None when nothing was (all cached, disabled by
    GNNFORGE_NATIVE=0, or no compiler: the kernels then use other backends, as before)."""
    if os.environ.get("GNNFORGE_NATIVE", "1") == "0" or _native_build._compiler() is None:
        return None
    missing = [name for name in allowed_native_variants() if not _native_build.is_cached(name)]
    if not missing:
        return None
    start = time.perf_counter()
    loaded = native_variants()
    seconds = time.perf_counter() - start
    compiled = [name for name in missing if name in loaded]
    failed = [name for name in missing if name not in loaded]
    if not compiled:  # a failed build is remembered (and warned about) by _native_build
        return None
    line = (f"native kernels: compiled {', '.join(compiled)} for this CPU in {seconds:.0f} s "
            f"(once per machine, before training; cached in the gnnforge cache's native/)")
    return line + (f"; {', '.join(failed)} failed: other backends stand in" if failed else "")
