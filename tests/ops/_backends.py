"""Which CPU fast backends this machine has: the tests run against every one present."""

from __future__ import annotations

from gnnforge.ops._native import available

# 'native' needs a C++ compiler (built on first use); 'numba' is always installed.
CPU_FAST = ["native", "numba"] if available() else ["numba"]
DEFAULT_CPU = CPU_FAST[0]
