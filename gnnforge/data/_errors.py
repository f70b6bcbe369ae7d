"""The error raised for a malformed data file: it names the file and, where known, the line."""

from __future__ import annotations

from pathlib import Path

from gnnforge.graph import GraphError

__all__ = ["DataFormatError"]


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
