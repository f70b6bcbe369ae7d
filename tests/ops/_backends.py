"""Which CPU fast backends this machine has: the tests run against every one present.

Every native instruction-set variant is forced on its own (issue 14: a machine may pick
any of them), beside numba, mkl and the default 'auto' (which runs whichever candidate
this machine measured fastest).
"""

from __future__ import annotations

from gnnforge.ops._native import available
from gnnforge.ops._native_build import available_variants

# Native variants need a C++ compiler (built on first use); numba is always installed.
NATIVE = [f"native:{variant.name}" for variant in available_variants()
          if available(variant.name)]
CPU_FAST = ["auto", *NATIVE, "numba"]   # mkl: tests/ops/test_mkl.py (numba for the rest)
DEFAULT_CPU = "auto"
