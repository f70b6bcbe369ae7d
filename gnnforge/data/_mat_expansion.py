"""The decompression cap for MATLAB v5 files, checked before scipy reads them.

A v5 `.mat` file is a 128-byte header and a sequence of data elements, each an 8-byte tag
(type, byte count) and its bytes. Elements of type miCOMPRESSED (15) hold a zlib stream
that `scipy.io.loadmat` inflates whole, in a child process (`_mat_isolated.py`) whose
memory nothing bounds. So the parent walks the elements first and inflates each
compressed one in chunks, counting and discarding the output, and stops at the same cap
as gzip and zip input (`decompressed_limit` of the file's size). Other layouts (v4, v7.3
HDF5) hold no zlib elements of this form and are left to the reader.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from gnnforge.data._errors import DataFormatError
from gnnforge.data._limits import LIMIT_VARIABLE, MAX_RATIO, decompressed_limit

__all__ = ["check_mat_expansion"]

_HEADER_BYTES = 128
_COMPRESSED = 15
_CHUNK = 2**20


def check_mat_expansion(path: str | Path) -> None:
    """Raise DataFormatError when the file's compressed elements inflate past the cap.

    Raises:
        DataFormatError: naming the file and the cap; or a compressed element that is not
            valid zlib data.
    """
    path = Path(path)
    try:
        limit = decompressed_limit(path.stat().st_size)
    except OSError:
        return  # missing or unreadable: the reader says so
    with open(path, "rb") as handle:
        header = handle.read(_HEADER_BYTES)
        if len(header) < _HEADER_BYTES or header[126:128] not in (b"IM", b"MI"):
            return  # not a v5 file: nothing of this layout to inflate
        order = "<" if header[126:128] == b"IM" else ">"
        total = 0
        while True:
            tag = handle.read(8)
            if len(tag) < 8:
                return
            kind, size = struct.unpack(order + "II", tag)
            if kind >> 16:  # a small element: its data sits in the tag itself
                continue
            if kind != _COMPRESSED:
                handle.seek(size + (-size % 8), 1)
                continue
            total += _inflated_size(handle, size, limit - total, path)
            if total > limit:
                raise DataFormatError(
                    path, f"its compressed variables inflate to more than "
                    f"{limit / 2**20:.0f} MiB; refusing to read on (a decompression bomb, "
                    f"or a file beyond the limit, by default {MAX_RATIO}x its size: raise it "
                    f"with {LIMIT_VARIABLE}=<MiB>)")


def _inflated_size(handle, size: int, budget: int, path: Path) -> int:
    """Bytes the next `size` compressed bytes inflate to, stopping once past `budget`."""
    inflater = zlib.decompressobj()
    produced, left = 0, size
    try:
        while left and produced <= budget:
            chunk = handle.read(min(_CHUNK, left))
            if not chunk:
                break
            left -= len(chunk)
            produced += len(inflater.decompress(chunk, budget + 1 - produced))
            while inflater.unconsumed_tail and produced <= budget:
                produced += len(inflater.decompress(inflater.unconsumed_tail,
                                                    budget + 1 - produced))
    except zlib.error as error:
        raise DataFormatError(path, f"corrupt compressed variable ({error})") from error
    handle.seek(left, 1)
    return produced
