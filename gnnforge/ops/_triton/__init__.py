"""The GPU backend ("triton"): g-SpMM, g-SDDMM and edge softmax as Triton kernels.

One kernel source for every NVIDIA GPU, compiled by Triton at first use per signature, so
no per-torch binary is shipped. The same kernels run on CPU tensors under Triton's
interpreter (`TRITON_INTERPRET=1` set before the first call), which is how the tests
check them without a GPU.

Importing this package does not import triton: the entries below load the kernel modules
on their first call, so `import gnnforge` stays cheap and works without the `gpu` extra.

Modules:
    _schedule:      the row-splitting work list that balances power-law rows.
    _spmm_kernels:  the Triton g-SpMM kernels (row pieces, combine of split rows).
    _spmm:          g-SpMM on tensors: operand layout, schedule, launches.
    _sddmm:         g-SDDMM kernels and their launcher.
    _edge_softmax:  fused edge softmax as custom ops with autograd.
    _launch:        shared launch helpers (block sizes, device checks).
"""

from __future__ import annotations

import os

from torch import Tensor

from gnnforge._compat import available as _module_available

__all__ = ["available", "edge_softmax_triton", "gsddmm_triton", "gspmm_triton",
           "interpreting"]


def available() -> bool:
    """True when triton can be imported (checked without importing it)."""
    return _module_available("triton")


def interpreting() -> bool:
    """True when Triton's interpreter is requested (`TRITON_INTERPRET=1`): CPU tensors allowed."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def gspmm_triton(rowptr: Tensor, col: Tensor, eids: Tensor, lhs: Tensor | None,
                 rhs: Tensor | None, op: str, reduce: str,
                 record_args: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """g-SpMM on the GPU; same contract as `_cpu.gspmm_cpu` (see `_spmm.gspmm_triton`)."""
    from gnnforge.ops._triton._spmm import gspmm_triton as run
    return run(rowptr, col, eids, lhs, rhs, op, reduce, record_args)


def gsddmm_triton(lhs_row: Tensor, rhs_row: Tensor, lhs: Tensor, rhs: Tensor,
                  op: str) -> Tensor:
    """g-SDDMM on the GPU; same contract as `_cpu.gsddmm_cpu` (see `_sddmm.gsddmm_triton`)."""
    from gnnforge.ops._triton._sddmm import gsddmm_triton as run
    return run(lhs_row, rhs_row, lhs, rhs, op)


def edge_softmax_triton(arrays: list[Tensor], logits: Tensor) -> Tensor:
    """Fused edge softmax with autograd over GraphArrays (see `_edge_softmax`)."""
    from gnnforge.ops._triton._edge_softmax import edge_softmax_triton as run
    return run(arrays, logits)
