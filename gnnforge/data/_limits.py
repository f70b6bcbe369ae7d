"""Bounded decompression and expansion: gzip files, zip members and dense arrays a reader
builds from a file are capped in size.

A 199 KiB gzip file can expand to 2 GiB (a decompression bomb), and every reader holds
the whole decompressed text in memory. So decompression streams in chunks and stops
with a DataFormatError naming the file once the output passes the cap. The cap is
`$GNNFORGE_MAX_DECOMPRESSED_MIB` (MiB) when set; else 50 times the compressed size, at
least 8 MiB (small files of very repetitive text), at most a quarter of physical memory
and 4 GiB. Real data stays far below the ratio: gzip shrinks text edge lists and SMILES
3-6x (the shared datasets' 23 .gz files 1.9-5.8x), and the largest shared dataset
decompresses to 11 MB; a 4 GiB text edge list is about 300M edges. With 50x, a 199 KiB
bomb stops after 10 MiB, at about 280 MiB peak RSS of which 270 MiB are the interpreter
and torch. The same absolute cap bounds the dense arrays a reader expands from
sparse content (feature matrices), which a few bytes can declare huge. Corrupt
compressed data is a DataFormatError too, naming the member.
"""

from __future__ import annotations

import io
import math
import os
import zipfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from gnnforge.data._errors import DataFormatError

__all__ = ["LIMIT_VARIABLE", "MAX_RATIO", "MIN_LIMIT_BYTES", "CappedReader",
           "check_dense_size", "declared_npy_bytes", "decompressed_limit", "open_zip",
           "read_capped", "read_zip_member"]

LIMIT_VARIABLE = "GNNFORGE_MAX_DECOMPRESSED_MIB"
MAX_RATIO = 50
MIN_LIMIT_BYTES = 8 * 2**20
_CHUNK = 2**20


def decompressed_limit(compressed_bytes: int | None = None) -> int:
    """Most bytes one decompressed file or member may hold (see the module docstring).

    Args:
        compressed_bytes: the input's compressed size; the default cap is MAX_RATIO times
            it (at least MIN_LIMIT_BYTES). None: the absolute cap alone.

    Raises:
        ValueError: when the environment variable is not a whole number of MiB.
    """
    configured = _configured_limit()
    if configured is not None:
        return configured
    absolute = _absolute_limit()
    if compressed_bytes is None:
        return absolute
    return min(absolute, max(MIN_LIMIT_BYTES, MAX_RATIO * int(compressed_bytes)))


def _configured_limit() -> int | None:
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
    return None


def _absolute_limit() -> int:
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
        f"(a decompression bomb, or a file beyond the limit, by default {MAX_RATIO}x its "
        f"compressed size: raise it with {LIMIT_VARIABLE}=<MiB> or the max_bytes argument)")


class CappedReader(io.RawIOBase):
    """A decompressing binary stream that raises DataFormatError once more than `limit`
    bytes came out of it: for readers that consume a stream line by line."""

    def __init__(self, stream: BinaryIO, where: str | Path, limit: int) -> None:
        self._stream, self._where, self._limit, self._total = stream, where, limit, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._stream.seekable()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Seek the decompressed stream; the cap then counts from the new position."""
        self._total = self._stream.seek(offset, whence)
        return self._total

    def tell(self) -> int:
        return self._stream.tell()

    def readinto(self, buffer: Any) -> int:
        data = self._stream.read(min(len(buffer), self._limit + 1 - self._total))
        self._total += len(data)
        if self._total > self._limit:
            raise _too_large(self._where, self._limit)
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._stream.close()
        super().close()


def read_capped(handle: BinaryIO, where: str | Path, max_bytes: int | None = None,
                compressed_bytes: int | None = None) -> bytes:
    """All of a decompressing stream, or DataFormatError once it passes the cap:
    `max_bytes`, else `decompressed_limit(compressed_bytes)`."""
    limit = decompressed_limit(compressed_bytes) if max_bytes is None else max_bytes
    output = io.BytesIO()
    while True:
        chunk = handle.read(min(_CHUNK, limit + 1 - output.tell()))
        if not chunk:
            return output.getvalue()
        output.write(chunk)
        if output.tell() > limit:
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
            return read_capped(handle, where, max_bytes, archive.getinfo(name).compress_size)
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
