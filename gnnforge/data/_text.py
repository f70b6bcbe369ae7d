"""Fast, checked parsing of numeric text tables (edge lists, index files, coordinates).

The fast path hands the whole buffer to numpy's C tokenizer (`np.fromstring` with a
separator), which reads soc-Slashdot's 948k lines in about 40 ms where `np.loadtxt`
takes seconds. It then checks that the token count equals rows x columns. Anything the
fast path cannot prove correct (a bad token, a blank line, a ragged row) is re-read by
the plain line-by-line reader `parse_table_ref`, which is also the specification the
tests compare against, and which names the file and line of the first bad row.
"""

from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path

import numpy as np

from gnnforge.data._errors import DataFormatError
from gnnforge.data._limits import read_capped

__all__ = ["parse_flat", "parse_table", "parse_table_ref", "read_bytes"]

_GZIP_MAGIC = b"\x1f\x8b"


def read_bytes(path: str | Path, max_bytes: int | None = None) -> bytes:
    """The file's bytes, gunzipped when it is gzip (by content, not by name).

    Args:
        max_bytes: most decompressed bytes accepted (default `decompressed_limit` of the
            file's size: $GNNFORGE_MAX_DECOMPRESSED_MIB, else 50x the compressed size, at
            least 8 MiB, at most a quarter of memory and 4 GiB).

    Raises:
        DataFormatError: corrupt gzip data, or more than `max_bytes` once decompressed.
    """
    path = Path(path)
    with open(path, "rb") as handle:
        head = handle.read(2)
    if head == _GZIP_MAGIC:
        try:
            with gzip.open(path, "rb") as handle:
                return read_capped(handle, path, max_bytes, path.stat().st_size)
        except (OSError, EOFError, zlib.error) as error:
            raise DataFormatError(path, f"corrupt gzip data ({error})") from error
    return path.read_bytes()


def _comment_pattern(comments: bytes) -> re.Pattern[bytes]:
    return re.compile(rb"(?m)^[ \t]*[" + re.escape(comments) + rb"][^\n]*(?:\n|$)")


def _drop_comments(text: bytes, comments: bytes) -> bytes:
    """Remove comment lines. Headers at the top are cut by slicing; a regex pass over the
    whole buffer (100+ ms on 11 MB) runs only when a comment byte occurs further down."""
    if not comments:
        return text
    marks = [comments[i : i + 1] for i in range(len(comments))]
    start = 0
    while start < len(text):
        line_end = text.find(b"\n", start)
        stop = len(text) if line_end < 0 else line_end
        line = text[start:stop].strip()
        if line and line[:1] not in marks:
            break
        start = stop + 1
    text = text[start:] if start else text
    if any(mark in text for mark in marks):
        text = _comment_pattern(comments).sub(b"", text)
    return text


def _count_lines(text: bytes) -> int:
    return text.count(b"\n") + (1 if text and not text.endswith(b"\n") else 0)


def parse_table(
    data: bytes,
    path: str | Path,
    columns: int,
    *,
    dtype: type = np.int64,
    comments: bytes = b"#%",
    delimiter: bytes | None = None,
    first_line: int = 1,
) -> np.ndarray:
    """Parse rows of exactly `columns` numbers; lines starting with a `comments` byte skip.

    Args:
        data: the text (bytes). `\\r\\n` line ends are fine.
        path: names the source in errors.
        columns: values per row.
        dtype: np.int64 (tokens must be integers) or np.float64.
        delimiter: a separator besides whitespace (b"," for CSV), or None.
        first_line: line number of data's first line, for error messages.

    Returns:
        [rows, columns] array of `dtype`.

    Raises:
        DataFormatError: naming the file and line of the first row that is not
            `columns` numbers of the right kind.
    """
    text = data.replace(delimiter, b" ") if delimiter else data
    text = _drop_comments(text, comments)
    if not text or text.isspace():
        return np.zeros((0, columns), dtype=dtype)
    try:
        values = np.fromstring(text, dtype=dtype, sep=" ")
    except ValueError:
        values = None
    if (values is not None and values.size == columns * _count_lines(text)
            and _rows_are_even(text, columns) and not _may_have_saturated(values)):
        return values.reshape(-1, columns)
    return parse_table_ref(
        data,
        path,
        columns,
        dtype=dtype,
        comments=comments,
        delimiter=delimiter,
        first_line=first_line,
    )


def _rows_are_even(text: bytes, columns: int) -> bool:
    """True when every line of `text` holds exactly `columns` whitespace-separated tokens.

    The token count alone balances over ragged rows ('0 1 / 1 2 3 / 4' is 6 numbers in 3
    lines), so count the token starts before each newline: vectorised, about as long as
    the tokenizer itself (benchmarks/hardening_checks.py).
    """
    raw = np.frombuffer(text, dtype=np.uint8)
    token = (raw > 32).view(np.int8)                     # not space, tab, \r, \n, control
    starts = np.flatnonzero(np.diff(token, prepend=np.int8(0)) > 0)
    newlines = np.flatnonzero(raw == 10)
    per_line = np.diff(np.searchsorted(starts, newlines), prepend=0)
    last_line = starts.size - int(per_line.sum())         # tokens after the last newline
    return bool((per_line == columns).all() and last_line in (0, columns))


def _may_have_saturated(values: np.ndarray) -> bool:
    """numpy's tokenizer clips integers beyond int64 to its limits without a word."""
    if values.dtype != np.int64 or values.size == 0:
        return False
    limits = np.iinfo(np.int64)
    return bool(values.max() == limits.max or values.min() == limits.min)


def _to_int64(token: bytes) -> int:
    value = int(token)
    if not -(2**63) <= value < 2**63:
        raise OverflowError(value)
    return value


def parse_table_ref(
    data: bytes,
    path: str | Path,
    columns: int,
    *,
    dtype: type = np.int64,
    comments: bytes = b"#%",
    delimiter: bytes | None = None,
    first_line: int = 1,
) -> np.ndarray:
    """Line-by-line reference of `parse_table` (same arguments, same result, slower)."""
    convert = _to_int64 if np.issubdtype(dtype, np.integer) else float
    kind = "integers" if convert is _to_int64 else "numbers"
    rows = []
    for number, line in enumerate(data.split(b"\n"), start=first_line):
        stripped = line.strip()
        if not stripped or (
            comments and stripped[:1] in [comments[i : i + 1] for i in range(len(comments))]
        ):
            continue
        parts = (stripped.replace(delimiter, b" ") if delimiter else stripped).split()
        if len(parts) != columns:
            raise DataFormatError(
                path, f"expected {columns} values per line, got {len(parts)}: {_show(line)}", number
            )
        try:
            rows.append([convert(part) for part in parts])
        except ValueError:
            raise DataFormatError(path, f"expected {kind}, got {_show(line)}", number) from None
        except OverflowError as error:
            raise DataFormatError(
                path, f"value {error.args[0]} does not fit in int64: {_show(line)}", number
            ) from None
    return np.array(rows, dtype=dtype).reshape(-1, columns)


def parse_flat(
    data: bytes, path: str | Path, *, dtype: type = np.int64, first_line: int = 1
) -> np.ndarray:
    """All whitespace-separated numbers in `data` as one 1-D array (no comments).

    Raises:
        DataFormatError: naming the file and line of the first token that is not a number
            of the right kind.
    """
    if not data or data.isspace():
        return np.zeros(0, dtype=dtype)
    values = None
    try:
        values = np.fromstring(data, dtype=dtype, sep=" ")
        if not _may_have_saturated(values):
            return values
    except ValueError:
        pass
    convert = _to_int64 if np.issubdtype(dtype, np.integer) else float
    for number, line in enumerate(data.split(b"\n"), start=first_line):
        for token in line.split():
            try:
                convert(token)
            except ValueError:
                raise DataFormatError(
                    path, f"expected a number, got {_show(token)}", number
                ) from None
            except OverflowError:
                raise DataFormatError(
                    path, f"value {_show(token)} does not fit in int64", number
                ) from None
    if values is not None:  # only exact int64 limits were in the text
        return values
    raise DataFormatError(path, "could not parse the numbers in this file")  # pragma: no cover


def _show(text: bytes, limit: int = 60) -> str:
    decoded = text.decode("utf-8", "replace").rstrip("\r")
    return repr(decoded if len(decoded) <= limit else decoded[:limit] + "...")


def line_of_row(data: bytes, row: int, first_line: int = 1, comments: bytes = b"#%") -> int:
    """Line number of the `row`-th data row (0-based; comments and blank lines skipped)."""
    seen = -1
    for number, line in enumerate(data.split(b"\n"), start=first_line):
        stripped = line.strip()
        if not stripped or (
            comments and stripped[:1] in [comments[i : i + 1] for i in range(len(comments))]
        ):
            continue
        seen += 1
        if seen == row:
            return number
    return first_line + row
