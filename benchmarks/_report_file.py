"""BENCHMARKS.md as marked blocks: parse it, replace some runs' blocks, write it back.

The file is hand-written text (its header, commentary inside sections) around blocks that
`benchmarks/report.py` writes. Two kinds of HTML-comment markers delimit them, each on a
line of its own:

    <!-- section kernels -->            one per capability, holds its `##` heading
    <!-- run kernels.spmm -->           one per benchmark command, inside its section
    ...the command, the machine line and the tables, written by report.py...
    <!-- /run kernels.spmm -->
    <!-- /section kernels -->

Only the text between a run's markers is ever rewritten; everything else (the header,
commentary between runs) is kept byte for byte, so regenerating some runs leaves the rest
of the file as it was. Markers are plain comments, so the file renders as ordinary
markdown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["BenchmarksFile", "MarkerError", "Section", "parse", "render"]

_OPEN = re.compile(r"^<!-- (section|run) ([A-Za-z0-9_.-]+) -->$")
_CLOSE = re.compile(r"^<!-- /(section|run) ([A-Za-z0-9_.-]+) -->$")


class MarkerError(ValueError):
    """BENCHMARKS.md's markers do not nest or do not match; the message names the line."""


@dataclass
class Section:
    """One capability's block: text chunks (str) and run blocks (run id, body) in order."""

    name: str
    parts: list = field(default_factory=list)  # str | tuple[str, str]

    def run_ids(self) -> list[str]:
        return [part[0] for part in self.parts if isinstance(part, tuple)]

    def set_run(self, run_id: str, body: str) -> None:
        """Replace the body of run `run_id`, or add the run after the section's last run."""
        for index, part in enumerate(self.parts):
            if isinstance(part, tuple) and part[0] == run_id:
                self.parts[index] = (run_id, body)
                return
        last = max((i for i, part in enumerate(self.parts) if isinstance(part, tuple)),
                   default=None)
        if last is None:
            self.parts.append((run_id, body))
        else:
            self.parts[last + 1:last + 1] = ["\n", (run_id, body)]


@dataclass
class BenchmarksFile:
    """The parsed file: hand-written text (str) and sections, in file order."""

    items: list  # str | Section

    @property
    def sections(self) -> list[Section]:
        return [item for item in self.items if isinstance(item, Section)]

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def add_section(self, section: Section) -> None:
        """Append a section at the end of the file, a blank line before it."""
        last = self.items[-1] if self.items else "\n\n"
        if isinstance(last, Section) or not last.endswith("\n\n"):
            self.items.append("\n")
        self.items.append(section)


def parse(text: str) -> BenchmarksFile:
    """Split BENCHMARKS.md into its marked blocks.

    Raises:
        MarkerError: a marker inside the wrong block, a close without its open, a name
            that appears twice, or a block left open at the end (the line number is named).
    """
    items: list = []
    seen: set[str] = set()
    section: Section | None = None
    run: tuple[str, list[str]] | None = None
    chunk: list[str] = []
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        stripped = line.strip()
        opened, closed = _OPEN.match(stripped), _CLOSE.match(stripped)
        if opened:
            kind, name = opened.groups()
            if name in seen:
                raise MarkerError(f"BENCHMARKS.md line {number}: {kind} {name!r} appears twice")
            seen.add(name)
            if kind == "section":
                if section is not None:
                    raise MarkerError(f"BENCHMARKS.md line {number}: section {name!r} opens "
                                      f"inside section {section.name!r}")
                if chunk:
                    items.append("".join(chunk))
                chunk, section = [], Section(name)
            else:
                if section is None or run is not None:
                    raise MarkerError(f"BENCHMARKS.md line {number}: run {name!r} must be "
                                      f"inside a section and outside other runs")
                if chunk:
                    section.parts.append("".join(chunk))
                chunk, run = [], (name, [])
        elif closed:
            kind, name = closed.groups()
            if kind == "run":
                if run is None or run[0] != name:
                    raise MarkerError(f"BENCHMARKS.md line {number}: /run {name!r} closes "
                                      f"nothing open")
                section.parts.append((name, "".join(run[1])))
                run = None
            else:
                if section is None or section.name != name or run is not None:
                    raise MarkerError(f"BENCHMARKS.md line {number}: /section {name!r} "
                                      f"closes nothing open (or a run is still open)")
                if chunk:
                    section.parts.append("".join(chunk))
                chunk = []
                items.append(section)
                section = None
        elif run is not None:
            run[1].append(line)
        else:
            chunk.append(line)
    if run is not None or section is not None:
        open_name = run[0] if run is not None else section.name
        raise MarkerError(f"BENCHMARKS.md: {open_name!r} is never closed")
    if chunk:
        items.append("".join(chunk))
    return BenchmarksFile(items)


def render(document: BenchmarksFile) -> str:
    """The file's text again; `render(parse(text)) == text` for text ending in a newline."""
    out = []
    for section in document.items:
        if isinstance(section, str):
            out.append(section)
            continue
        out.append(f"<!-- section {section.name} -->\n")
        for part in section.parts:
            if isinstance(part, tuple):
                run_id, body = part
                out.append(f"<!-- run {run_id} -->\n{body}<!-- /run {run_id} -->\n")
            else:
                out.append(part)
        out.append(f"<!-- /section {section.name} -->\n")
    return "".join(out)
