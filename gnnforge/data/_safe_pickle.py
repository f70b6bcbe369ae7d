"""A restricted unpickler for the pickled dataset files (Planetoid, GraphGallery npz).

`pickle.load` on a downloaded file runs whatever the file asks for. These files only need
numpy arrays, scipy CSR matrices and a defaultdict of lists, so `safe_load` admits exactly
those globals (under both the old and the new module paths that pickles written by other
numpy/scipy versions use) and refuses every other one by name.
"""

from __future__ import annotations

import collections
import io
import pickle
import pickletools
import struct
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import scipy.sparse

from gnnforge.data._errors import DataFormatError

__all__ = ["ALLOWED_GLOBALS", "UnsafePickleError", "safe_load", "safe_loads"]


def _numpy_core():
    # numpy 2 moved numpy.core to numpy._core; importing the old name warns.
    try:
        from numpy._core import multiarray, numeric
    except ImportError:  # numpy < 2
        from numpy.core import multiarray, numeric
    return multiarray, numeric


def _allowed() -> dict[tuple[str, str], Any]:
    multiarray, numeric = _numpy_core()
    allowed = {
        ("numpy", "dtype"): np.dtype,
        ("numpy", "ndarray"): np.ndarray,
        ("collections", "defaultdict"): collections.defaultdict,
        ("builtins", "list"): list,
        ("__builtin__", "list"): list,  # Python 2 pickles
    }
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        allowed[(module, "_reconstruct")] = multiarray._reconstruct
        allowed[(module, "scalar")] = multiarray.scalar
    for module in ("numpy.core.numeric", "numpy._core.numeric"):
        allowed[(module, "_frombuffer")] = numeric._frombuffer  # pickle protocol 5 arrays
    for module in ("scipy.sparse.csr", "scipy.sparse._csr", "scipy.sparse"):
        allowed[(module, "csr_matrix")] = scipy.sparse.csr_matrix
    return allowed


#: (module, name) pairs a dataset pickle may reference; everything else is refused.
ALLOWED_GLOBALS = frozenset(_allowed())


class UnsafePickleError(DataFormatError):
    """A pickle asked for a global outside `ALLOWED_GLOBALS`; nothing was executed."""


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, handle: BinaryIO, path: str) -> None:
        super().__init__(handle, encoding="latin1")  # Python 2 pickles hold byte strings
        self._path = path
        self._table = _allowed()

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self._table[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                self._path,
                f"pickle references the global {module}.{name}, which is not "
                "allowed in a dataset file (only numpy arrays, scipy csr_matrix and "
                "collections.defaultdict of lists are); refusing to load it",
            ) from None

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError(self._path, f"pickle uses a persistent id ({pid!r}); refusing")


def safe_loads(data: bytes, path: str | Path = "<bytes>") -> Any:
    """Unpickle `data` admitting only the dataset globals; `path` names it in errors.

    Raises:
        UnsafePickleError: the pickle references a global that is not allowed.
        DataFormatError: the bytes are not a valid pickle.
    """
    _check_memo_indices(data, path)
    try:
        return _RestrictedUnpickler(io.BytesIO(data), str(path)).load()
    except UnsafePickleError:
        raise
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
        KeyError,
        OverflowError,
        RecursionError,
        struct.error,
        MemoryError,  # a length field that asks for more than memory (a corrupt file)
    ) as error:
        raise DataFormatError(
            path, f"not a valid pickle ({type(error).__name__}: {error})"
        ) from error


_MEMO_PUTS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})


def _check_memo_indices(data: bytes, path: str | Path) -> None:
    """Refuse a memo index larger than the pickle itself.

    The C unpickler keeps its memo in an array sized by the largest index a PUT names:
    one crafted LONG_BINPUT of 2^31 in a 60 KB Planetoid graph file asked for tens of GiB
    and the process was killed for memory (fuzzing found it). A pickler numbers its memo
    entries in order, each after at least one opcode, so a valid index is below the
    pickle's length. Scanning the opcodes costs no objects; a malformed stream is left to
    the unpickler, which reports it.
    """
    bad = _first_oversized_put(data)
    if bad is not None:
        index, position = bad
        raise DataFormatError(path, f"not a valid pickle (memo index {index} at byte "
                                    f"{position}, in {len(data)} bytes)")


def _first_oversized_put(data: bytes) -> tuple[int, int] | None:
    """(index, byte position) of the first PUT naming an index beyond len(data)."""
    try:
        for opcode, argument, position in pickletools.genops(data):
            if opcode.name in _MEMO_PUTS and argument > len(data):
                return argument, position
    except (ValueError, TypeError, OverflowError, UnicodeDecodeError, struct.error):
        pass
    return None


def safe_load(path: str | Path) -> Any:
    """`safe_loads` of a file's whole content."""
    return safe_loads(Path(path).read_bytes(), path)
