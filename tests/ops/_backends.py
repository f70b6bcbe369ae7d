"""Which CPU fast backends this machine has, and which of them each test grid forces.

Every native instruction-set variant is a backend of its own ('native:sse2', ...; issue 14:
a machine may pick any of them), beside numba, mkl and the default 'auto' (which runs
whichever candidate this machine measured fastest).

The variants compile one source with different flags; where the source itself differs by
instruction set (64-byte vectors under AVX-512: spmm.cpp's sum/mean, binary.cpp, sddmm.cpp,
gine.cpp) every kernel is forced on every variant, forward and gradients, by
tests/ops/test_native.py and tests/ops/test_native_binary.py. The op-level grids
(test_backends, test_gradients, test_opcheck) check the generic API's routing, layouts and
autograd around those kernels: they force every variant for the copy ops (the kernels whose
fast paths differ most between builds: the copy fast path, the 64-byte sum blocks, the pull
gradients) and run every other op on `OP_FAST` (auto, the widest native build and numba),
which keeps every kernel path tested against the reference at a third of the cost.
"""

from __future__ import annotations

from gnnforge.ops._native import available
from gnnforge.ops._native_build import available_variants

# Native variants need a C++ compiler (built on first use); numba is always installed.
NATIVE = [f"native:{variant.name}" for variant in available_variants()
          if available(variant.name)]
CPU_FAST = ["auto", *NATIVE, "numba"]   # mkl: tests/ops/test_mkl.py (numba for the rest)
# The non-copy ops: every variant already runs them in test_native_binary.py.
OP_FAST = ["auto", *NATIVE[-1:], "numba"]
DEFAULT_CPU = "auto"


def backends_for(op: str, backends: list[str]) -> list[str]:
    """All of `backends` for a copy op; for any other op, those in `OP_FAST` and those that
    are not CPU candidates ('torch', the CUDA path run on CPU tensors)."""
    if op.startswith("copy"):
        return list(backends)
    return [b for b in backends if b in OP_FAST or b not in CPU_FAST]
