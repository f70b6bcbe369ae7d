"""The error raised for a malformed data file: it names the file and, where known, the line."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gnnforge.graph import GraphError

__all__ = ["DataFormatError", "names_the_file"]

F = TypeVar("F", bound=Callable[..., Any])


class DataFormatError(GraphError):
    """A data file that does not follow its format.

    Attributes:
        path: the offending file (or zip member) as given.
        line: 1-based line number of the first bad line, or None when not line-based.
    """

    def __init__(self, path: str | Path, problem: str, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")


def names_the_file(reader: F) -> F:
    """Re-raise a GraphError from building the graph of a file as a DataFormatError naming it.

    Readers build `Graph`s from file content; when the constructor refuses it (a non-finite
    feature, a mismatched length), the message should still say which file. The file is
    the reader's first argument.
    """
    @functools.wraps(reader)
    def read(path: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return reader(path, *args, **kwargs)
        except DataFormatError:
            raise
        except GraphError as error:
            raise DataFormatError(path, str(error)) from error
    return read  # type: ignore[return-value]
