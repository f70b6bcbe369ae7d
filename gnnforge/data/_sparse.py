"""Sparse matrices from untrusted files, checked in int64 before scipy touches them.

scipy's own `check_format` computes row-pointer differences in the index dtype, so
int32 pointers such as [0, 2**31 - 1, -2**31, -1, 3] wrap around, pass it, and make
`toarray()` or `tocoo()` read out of bounds (a segfault). An unpickled `csr_matrix` is not
checked at all. Every compressed matrix a reader builds from file content therefore goes
through `checked_compressed`, which validates the three arrays and the shape in int64 and
only then builds the scipy matrix. One pass over the arrays, at load time only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse

from gnnforge.data._errors import DataFormatError

__all__ = ["checked_compressed", "checked_matrix"]

_INT64_MAX = np.iinfo(np.int64).max
_COMPRESSED = (("csr", (scipy.sparse.csr_matrix, scipy.sparse.csr_array)),
               ("csc", (scipy.sparse.csc_matrix, scipy.sparse.csc_array)))


def _int64(where: str | Path, name: str, value: Any) -> np.ndarray:
    """`value` as a 1-D int64 array, refusing non-integer dtypes and uint64 beyond int64."""
    array = np.asarray(value)
    if array.dtype.kind not in "iu" or array.ndim != 1:
        raise DataFormatError(
            where, f"{name}: expected a 1-D integer array, got {array.dtype} {array.shape}"
        )
    if array.dtype == np.uint64 and array.size and int(array.max()) > _INT64_MAX:
        raise DataFormatError(where, f"{name}: value {int(array.max())} does not fit in int64")
    return array.astype(np.int64, copy=False)


def _shape(where: str | Path, name: str, shape: Any) -> tuple[int, int]:
    try:
        values = np.asarray(shape)
        if values.dtype.kind not in "iu" or values.shape != (2,):
            raise ValueError
        rows, cols = (int(v) for v in values)
    except (TypeError, ValueError):
        raise DataFormatError(
            where, f"{name}: shape must be two non-negative integers, got {shape!r}"
        ) from None
    if rows < 0 or cols < 0:
        raise DataFormatError(where, f"{name}: shape must be non-negative, got ({rows}, {cols})")
    return rows, cols


def checked_compressed(
    where: str | Path,
    name: str,
    data: Any,
    indices: Any,
    indptr: Any,
    shape: Any,
    kind: str = "csr",
) -> scipy.sparse.csr_matrix | scipy.sparse.csc_matrix:
    """Build a CSR (or CSC) matrix from raw arrays after checking them in int64.

    Args:
        where: the file (or `file[member]`) named in errors.
        name: which matrix of the file (e.g. 'adjacency').
        data: [nnz] numeric values. indices: [nnz] column (CSC: row) ids.
        indptr: [major + 1] offsets. shape: (rows, cols).
        kind: 'csr' or 'csc'.

    Raises:
        DataFormatError: naming the matrix and the first violated rule: pointers must start
            at 0, never decrease and end at nnz == len(indices) == len(data); indices must
            lie in [0, minor); values must be numbers.
    """
    rows, cols = _shape(where, name, shape)
    major, minor = (rows, cols) if kind == "csr" else (cols, rows)
    pointers = _int64(where, f"{name} indptr", indptr)
    ids = _int64(where, f"{name} indices", indices)
    values = np.asarray(data)
    if values.ndim != 1 or values.dtype.kind not in "biuf":
        raise DataFormatError(
            where, f"{name} data: expected a 1-D numeric array, got {values.dtype} {values.shape}"
        )
    if pointers.size != major + 1:
        raise DataFormatError(
            where, f"{name} indptr: expected {major + 1} entries for shape {(rows, cols)}, "
            f"got {pointers.size}"
        )
    if pointers[0] != 0:
        raise DataFormatError(where, f"{name} indptr: must start at 0, got {pointers[0]}")
    steps = np.diff(pointers)
    if steps.size and steps.min() < 0:
        position = int(np.argmax(steps < 0))
        raise DataFormatError(
            where, f"{name} indptr: decreases at entry {position + 1} "
            f"({pointers[position]} -> {pointers[position + 1]})"
        )
    if not pointers[-1] == ids.size == values.size:
        raise DataFormatError(
            where, f"{name}: indptr ends at {pointers[-1]} but there are {ids.size} indices "
            f"and {values.size} values (all three must be equal)"
        )
    if ids.size and (ids.min() < 0 or ids.max() >= minor):
        position = int(np.argmax((ids < 0) | (ids >= minor)))
        raise DataFormatError(
            where, f"{name} indices[{position}] = {ids[position]} outside 0..{minor - 1}"
        )
    build = scipy.sparse.csr_matrix if kind == "csr" else scipy.sparse.csc_matrix
    return build((values, ids, pointers), shape=(rows, cols))


def checked_matrix(where: str | Path, name: str, value: Any) -> scipy.sparse.csr_matrix:
    """A CSR copy of a sparse or 2-D dense `value` read from a file (e.g. unpickled).

    An unpickled scipy matrix skipped every constructor check (and one from `loadmat` got
    only scipy's int32-wrapping one), so only its raw arrays are read (no scipy method runs
    on it) and rebuilt through `checked_compressed`.

    Raises:
        DataFormatError: not a matrix, or a compressed matrix whose arrays are invalid.
    """
    if isinstance(value, np.ndarray):
        if value.ndim != 2 or value.dtype.kind not in "biuf":
            raise DataFormatError(
                where, f"{name}: expected a 2-D numeric array, got {value.dtype} {value.shape}"
            )
        return scipy.sparse.csr_matrix(value)
    for kind, classes in _COMPRESSED:
        if isinstance(value, classes):
            state = vars(value)
            try:
                parts = (state["data"], state["indices"], state["indptr"])
                shape = state.get("_shape", state.get("shape"))
            except KeyError as error:
                raise DataFormatError(where, f"{name}: sparse matrix without {error}") from None
            return scipy.sparse.csr_matrix(
                checked_compressed(where, name, *parts, shape, kind=kind)
            )
    raise DataFormatError(
        where, f"{name}: expected a scipy CSR/CSC matrix or a 2-D array, got "
        f"{type(value).__name__}"
    )
