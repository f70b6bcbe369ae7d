"""The GPU backend ("triton"): g-SpMM, g-SDDMM and edge softmax as Triton kernels.

One kernel source for every NVIDIA GPU, compiled by Triton at first use per signature, so
no per-torch binary is shipped. The same kernels run on CPU tensors under Triton's
interpreter (`TRITON_INTERPRET=1` set before the first call), which is how the tests
check them without a GPU.

Importing this package does not import triton: the entries below load the kernel modules
on their first call, so `import gnnforge` stays cheap and works without the `gpu` extra.
The fused edge softmax (`_edge_softmax`, built on `_spmm`) has no entry here: the public
`edge_softmax` loads it the same way, so the dispatch table that imports these entries
stays one level above the g-SpMM and g-SDDMM kernels.

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

import torch
from torch import Tensor

from gnnforge._compat import available as _module_available

__all__ = ["available", "gsddmm_triton", "gspmm_triton", "interpreting"]


def available() -> bool:
    """True when triton can be imported (checked without importing it)."""
    return _module_available("triton")


def interpreting() -> bool:
    """True when Triton's interpreter is requested (`TRITON_INTERPRET=1`): CPU tensors allowed."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def gspmm_triton(rowptr: Tensor, col: Tensor, eids: Tensor, lhs: Tensor | None,
                 rhs: Tensor | None, op: str, reduce: str,
                 record_args: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """g-SpMM on the GPU; same contract as `_cpu.gspmm_cpu` (see `_spmm.gspmm_triton`).

    With `dot` the per-edge dots are a g-SDDMM, then a copy-reduce sums them (`_spmm_dot`).
    """
    if op == "dot":
        return _spmm_dot(rowptr, col, eids, lhs, rhs, reduce)
    from gnnforge.ops._triton._spmm import gspmm_triton as run
    return run(rowptr, col, eids, lhs, rhs, op, reduce, record_args)


def _spmm_dot(rowptr: Tensor, col: Tensor, eids: Tensor, lhs: Tensor, rhs: Tensor,
              reduce: str) -> tuple[Tensor, Tensor, Tensor]:
    from gnnforge.ops._triton._launch import no_index
    from gnnforge.ops._triton._sddmm import gsddmm_triton as sddmm
    from gnnforge.ops._triton._spmm import gspmm_triton as spmm

    message = sddmm(col, eids, lhs, rhs, "dot")                              # [nnz, *F, 1]
    entries = torch.arange(col.numel(), dtype=col.dtype, device=col.device)
    out, _, _ = spmm(rowptr, col, entries, None, message, "copy_rhs", reduce, False)
    return out, no_index(rowptr.device), no_index(rowptr.device)


def gsddmm_triton(lhs_row: Tensor, rhs_row: Tensor, lhs: Tensor, rhs: Tensor,
                  op: str) -> Tensor:
    """g-SDDMM on the GPU; same contract as `_cpu.gsddmm_cpu` (see `_sddmm.gsddmm_triton`)."""
    from gnnforge.ops._triton._sddmm import gsddmm_triton as run
    return run(lhs_row, rhs_row, lhs, rhs, op)

