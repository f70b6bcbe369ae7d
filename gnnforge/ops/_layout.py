"""GraphArrays: the eight index tensors every fast kernel and custom op takes, by position.

A graph reaches the kernels as a list of eight tensors (never a framework object, so every
backend sees the same inputs): CSR by destination (rowptr, col, eids), CSC by source
(colptr, row, ceids) and COO (src, dst). The constants below name the positions; this
module is a leaf, so the backends (Triton's edge softmax, ...) and the custom ops share the
layout without importing each other.
"""

from __future__ import annotations

from torch import Tensor

__all__ = ["CEIDS", "COL", "COLPTR", "DST", "EIDS", "ROW", "ROWPTR", "SRC", "reverse_arrays"]

ROWPTR, COL, EIDS, COLPTR, ROW, CEIDS, SRC, DST = range(8)


def reverse_arrays(arrays: list[Tensor]) -> list[Tensor]:
    """GraphArrays of the reversed graph: CSC becomes CSR and src/dst swap."""
    return [arrays[COLPTR], arrays[ROW], arrays[CEIDS],
            arrays[ROWPTR], arrays[COL], arrays[EIDS], arrays[DST], arrays[SRC]]
