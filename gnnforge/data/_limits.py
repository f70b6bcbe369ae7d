"""Bounded decompression and expansion: gzip files, zip members and dense arrays a reader
builds from a file are capped in size.

A 199 KiB gzip file can expand to 2 GiB (a decompression bomb), and every reader holds
the whole decompressed text in memory. So decompression streams in chunks and stops
with a DataFormatError naming the file once the output passes the cap, which is
`$GNNFORGE_MAX_DECOMPRESSED_MIB` (MiB), else a quarter of physical memory and at most
4 GiB (the largest shared dataset decompresses to 11 MB; a 4 GiB text edge list is
about 300M edges). The same cap bounds the dense arrays a reader expands from sparse
content (feature matrices), which a few bytes can declare huge. Corrupt compressed data
is a DataFormatError too, naming the member.
"""

from __future__ import annotations

import math
import os
import zipfile
import zlib
from pathlib import Path
from typing import BinaryIO

import numpy as np

from gnnforge.data._errors import DataFormatError

__all__ = ["LIMIT_VARIABLE", "check_dense_size", "declared_npy_bytes", "decompressed_limit",
           "open_zip", "read_capped", "read_zip_member"]

LIMIT_VARIABLE = "GNNFORGE_MAX_DECOMPRESSED_MIB"
_CHUNK = 4 * 2**20


def decompressed_limit() -> int:
    """Most bytes one decompressed file or member may hold (see the module docstring).

    Raises:
        ValueError: when the environment variable is not a whole number of MiB.
    """
    setting = os.environ.get(LIMIT_VARIABLE)
    if setting is not None:
        try:
            value = int(setting)
        except ValueError:
            raise ValueError(f"{LIMIT_VARIABLE} must be a whole number of MiB, got "
                             f"{setting!r}") from None
        if value < 1:
            raise ValueError(f"{LIMIT_VARIABLE} must be >= 1, got {value}")
        return value * 2**20
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        physical = 8 * 2**30
    return min(4 * 2**30, physical // 4)


def check_dense_size(where: str | Path, what: str, shape: tuple[int, ...],
                     dtype: np.dtype | type) -> None:
    """Refuse to expand file content into a dense array larger than the same limit.

    A few bytes can declare a huge shape (a feature id of 2**32 in a sparse list, a
    matrix shape in an npz); dense features beyond the limit are an error naming the file
    (features='none' or a higher limit reads such a file anyway).

    Raises:
        DataFormatError: when the array would hold more than `decompressed_limit()` bytes.
    """
    limit = decompressed_limit()
    size = math.prod(int(n) for n in shape) * np.dtype(dtype).itemsize
    if size > limit:
        raise DataFormatError(
            where, f"{what} would be a dense {' x '.join(map(str, shape))} "
            f"{np.dtype(dtype).name} array of {size / 2**30:.1f} GiB, more than the "
            f"{limit / 2**30:.1f} GiB limit ({LIMIT_VARIABLE}=<MiB> raises it; "
            f"features='none' skips dense features)")


def _too_large(where: str | Path, limit: int) -> DataFormatError:
    return DataFormatError(
        where, f"decompresses to more than {limit / 2**20:.0f} MiB; refusing to read on "
        f"(a decompression bomb, or a file larger than the limit: raise it with "
        f"{LIMIT_VARIABLE}=<MiB> or the max_bytes argument)")


def read_capped(handle: BinaryIO, where: str | Path, max_bytes: int | None = None) -> bytes:
    """All of a decompressing stream, or DataFormatError once it passes `max_bytes`."""
    limit = decompressed_limit() if max_bytes is None else max_bytes
    chunks, total = [], 0
    while True:
        chunk = handle.read(min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise _too_large(where, limit)


def open_zip(path: str | Path, what: str = "a zip file") -> zipfile.ZipFile:
    """An open ZipFile, or DataFormatError naming `path` when it is not a readable zip."""
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError,
            UnicodeDecodeError) as error:
        raise DataFormatError(path, f"not {what} ({type(error).__name__}: {error})") from error


def read_zip_member(archive: zipfile.ZipFile, name: str, where: str | Path,
                    max_bytes: int | None = None) -> bytes:
    """One member's bytes, capped like `read_capped`; corrupt data names the member.

    Raises:
        DataFormatError: bad compressed data or CRC, an unsupported compression method, a
            truncated archive, or more than the limit once decompressed.
    """
    try:
        with archive.open(name) as handle:
            return read_capped(handle, where, max_bytes)
    except DataFormatError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError,
            RuntimeError, ValueError) as error:
        raise DataFormatError(
            where, f"corrupt zip member ({type(error).__name__}: {error})") from error


def declared_npy_bytes(shape: tuple[int, ...], dtype: np.dtype, where: str | Path) -> int:
    """Bytes of data an .npy header declares, before numpy allocates them.

    Readers compare it with the bytes the file holds: numpy allocates the declared array
    before it reads (a crafted 2^31-string header asked for 176 GiB). A dimension of 2^62
    or more is refused outright: with another dimension 0 the product is small, but
    numpy's int64 element count overflows (OverflowError).

    Raises:
        DataFormatError: a dimension beyond 2^62.
    """
    if any(size >= 2**62 for size in shape):
        raise DataFormatError(where, f"the array header declares shape {shape}: a dimension "
                                     f"beyond 2^62")
    return math.prod(shape) * dtype.itemsize
