"""The header of an .npy array: (shape, Fortran order, dtype), for readers that stream the
data themselves (zip members, big files read into huge pages) instead of `np.load`."""

from __future__ import annotations

import tokenize
from typing import BinaryIO

import numpy as np

__all__ = ["NPY_HEADER_ERRORS", "read_npy_header"]

# What numpy's header parser raises on a malformed header: it reads the header dict with a
# tokenizer, which raises its own error types besides ValueError.
NPY_HEADER_ERRORS = (ValueError, SyntaxError, TypeError, tokenize.TokenError, RecursionError)


def read_npy_header(handle: BinaryIO) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran_order, dtype) from `handle` at an .npy file's start, leaving it at
    the data; raises one of NPY_HEADER_ERRORS when it is not an .npy header."""
    version = np.lib.format.read_magic(handle)
    header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
              else np.lib.format.read_array_header_2_0)
    return header(handle)
