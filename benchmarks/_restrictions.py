"""Instruction-set restrictions: stand-ins for CPUs without AVX-512 (or without AVX2).

Each restriction is the environment that limits both sides alike: gnnforge's candidates
(GNNFORGE_ISA), numba's target, MKL's and oneDNN's dispatch (the GEMM libraries of
`ops.dense_product`) and, for AVX2, DGL's libxsmm JIT
(LIBXSMM_TARGET=hsw: it then emits AVX2 code, like with like). Under SSE2 DGL's libxsmm
cannot generate its SpMM kernel, so DGL is left as it is and its generic loop is the
comparison (kernel_selection.py's "dgl generic" column). Set before the process starts
(the libraries read them at load), so a script re-runs itself under one.
"""

from __future__ import annotations

import os
import subprocess
import sys

RESTRICTIONS: dict[str, dict[str, str]] = {
    "all": {},
    "avx2": {"GNNFORGE_ISA": "avx2", "NUMBA_CPU_NAME": "haswell",
             "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
             "LIBXSMM_TARGET": "hsw"},
    "sse2": {"GNNFORGE_ISA": "sse2", "NUMBA_CPU_NAME": "x86-64",
             "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}


def applied(restriction: str) -> bool:
    """Whether this process already runs under `restriction`'s environment."""
    return all(os.environ.get(name) == value
               for name, value in RESTRICTIONS[restriction].items())


def rerun_under(restriction: str, script: str, argv: list[str] | None = None) -> int:
    """Run `script` again with `argv` (default: this process's arguments) under
    `restriction`'s environment; its exit status."""
    env = {**os.environ, **RESTRICTIONS[restriction]}
    arguments = sys.argv[1:] if argv is None else argv
    return subprocess.run([sys.executable, script, *arguments], env=env).returncode
