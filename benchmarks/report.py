"""Regenerate BENCHMARKS.md: run every capability's benchmarks and write their tables.

    python benchmarks/report.py --peer-python /work/bench-venv/bin/python   # everything
    python benchmarks/report.py --only packing,kernels.binary               # some runs
    python benchmarks/report.py --list                                      # what runs

The sections and their commands are listed in benchmarks/_report_sections.py. Each run's
block in BENCHMARKS.md gets a `###` heading, the exact command, a machine line (CPU,
cores and hardware threads, 1-minute load average before and after, UTC time, git
commit, the interpreter's Python/torch/DGL/PyG versions) and the script's output, with
its markdown tables as tables and other lines as text. A table longer than
LONG_TABLE_ROWS rows (a text block longer than LONG_TEXT_LINES) is replaced there by a
pointer to the run's details file (benchmarks/results/SECTION.RUN.md, the whole output),
and a run registered with `on_page=False` keeps only its heading, command and machine
line on the page, so that the page stays a page. `--only SECTION[,SECTION.RUN]`
rewrites just those blocks and keeps the rest of the file as it is (markers:
benchmarks/_report_file.py); so does a run that fails or times out, whose previous block
stays while report.py exits 1 naming it. The file is written after every run, so an
interrupted regeneration keeps what it finished.

Runs marked `peer` (they compare against DGL or PyG) use `--peer-python`, a venv with
both (../shared/peers/install_peers.sh VENV); without one they run in this interpreter
and their block says that the peers were unavailable. A full regeneration takes over an
hour on a 2-core machine: on a shared machine take the benchmark lock
(`flock /tmp/gnnforge-bench.lock python benchmarks/report.py ...`).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report_file import BenchmarksFile, Section, parse, render  # noqa: E402
from _report_machine import (  # noqa: E402
    describe_machine,
    git_commit,
    interpreter_versions,
    machine_line,
    utc_now,
)
from _report_sections import SECTIONS, Run  # noqa: E402
from _report_sections import Section as SectionSpec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Outcome:
    """A finished run: the block to write, or why there is none.

    `details` is the run's whole output for its details file when `body` left out a long
    table (None: `body` is the whole output)."""

    body: str | None
    failure: str | None = None
    details: str | None = None


def _selected(sections, only: str | None) -> list[tuple[SectionSpec, Run]]:
    pairs = [(section, run) for section in sections for run in section.runs]
    if only is None:
        return pairs
    valid = {section.name for section in sections} | {f"{s.name}.{r.name}" for s, r in pairs}
    wanted = [name.strip() for name in only.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in valid]
    if unknown or not wanted:
        raise ValueError(f"--only: unknown section or run {', '.join(unknown) or repr(only)}; "
                         f"choose from {', '.join(sorted(valid))}")
    return [(s, r) for s, r in pairs if s.name in wanted or f"{s.name}.{r.name}" in wanted]


def _shown(python: str, root: Path) -> str:
    path = Path(python)
    try:
        return str(path.relative_to(root)) if path.is_absolute() else python
    except ValueError:
        return python


def _command(python: str, run: Run, root: Path) -> str:
    return " ".join([*(f"{name}={value}" for name, value in run.env), "PYTHONPATH=.",
                     _shown(python, root), *run.argv])


def _heading(line: str) -> str:
    """Script headings go below the run's `###`: at least `####`."""
    level = len(line) - len(line.lstrip("#"))
    return "#" * max(level, 4) + line[level:]


# A table with more data rows, or a text block with more lines, than these goes to the
# run's details file, so that BENCHMARKS.md stays a page; its place there names the file.
LONG_TABLE_ROWS = 12
LONG_TEXT_LINES = 8
DETAILS_DIR = Path("benchmarks") / "results"
_MACHINE = "Machine: "


def details_path(run_id: str) -> Path:
    """Where a run's full output goes when it prints a long table (relative to the root)."""
    return DETAILS_DIR / f"{run_id}.md"


def _is_long_table(block: str) -> bool:
    rows = block.splitlines()
    return all(row.startswith("|") for row in rows) and len(rows) - 2 > LONG_TABLE_ROWS


def _is_long_text(block: str) -> bool:
    lines = block.splitlines()
    return bool(lines) and lines[0] == "```text" and len(lines) - 2 > LONG_TEXT_LINES


def shorten(blocks: list[str], details: Path, on_page: bool = True) -> list[str]:
    """`blocks` with each long table replaced by its header and a pointer to `details`,
    and each long text block by a pointer; all of them by one pointer when the run is not
    `on_page`."""
    link = f"[{details.as_posix()}]({details.as_posix()})"
    if not on_page:
        return [f"*Its output ({sum(len(b.splitlines()) for b in blocks)} lines) is in {link}.*"]
    short = []
    for block in blocks:
        if _is_long_table(block):
            rows = block.splitlines()
            short.append(f"{rows[0]}\n{rows[1]}\n\n*{len(rows) - 2} rows: the whole table is in "
                         f"{link}.*")
        elif _is_long_text(block):
            short.append(f"*{len(block.splitlines()) - 2} lines of output: in {link}.*")
        else:
            short.append(block)
    return short


def output_blocks(stdout: str) -> list[str]:
    """A script's stdout as markdown blocks: tables and headings as they are, every other
    run of lines in a `text` block (so aligned columns and log lines keep their breaks)."""
    blocks: list[str] = []
    text: list[str] = []
    table: list[str] = []

    def flush_text() -> None:
        while text and not text[-1].strip():
            text.pop()
        if text:
            blocks.append("```text\n" + "\n".join(text) + "\n```")
        text.clear()

    def flush_table() -> None:
        if table:
            blocks.append("\n".join(table))
        table.clear()

    in_fence = False
    for raw in stdout.splitlines():
        line = raw.rstrip()
        if line.startswith("```"):
            in_fence = not in_fence
            text.append(line.replace("```", "'''", 1))
        elif not in_fence and line.startswith("|"):
            flush_text()
            table.append(line)
        elif not in_fence and line.startswith("#") and line.lstrip("#").startswith(" "):
            flush_text()
            flush_table()
            blocks.append(_heading(line))
        else:
            flush_table()
            if line or text:
                text.append(line)
    flush_text()
    flush_table()
    return blocks


def format_output(stdout: str) -> str:
    """A script's stdout as markdown (see `output_blocks`)."""
    return _joined(output_blocks(stdout))


def _joined(blocks: list[str]) -> str:
    return "\n\n".join(blocks) + "\n" if blocks else "(the command printed nothing)\n"


def run_one(section: SectionSpec, run: Run, python: str, peer_note: str | None,
            root: Path, timeout: float | None) -> Outcome:
    """Run one benchmark command and build its block (heading, command, machine, tables)."""
    env = {**os.environ, **dict(run.env), "PYTHONPATH": os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    if run.interpreter is not None and not Path(python).exists():
        return Outcome(None, f"{run.interpreter} does not exist (build that environment "
                             "first: `make xla-env` builds .venv-xla)")
    versions = interpreter_versions(python, run.peer)
    commit = git_commit(root)  # before the run: files it writes (plots) are not changes
    load_before, start = os.getloadavg()[0], utc_now()
    print(f"[report] {section.name}.{run.name}: {_command(python, run, root)}",
          file=sys.stderr, flush=True)
    try:
        result = subprocess.run([python, *run.argv], cwd=root, env=env, text=True,
                                stdout=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Outcome(None, f"timed out after {timeout:g} s")
    except OSError as error:
        return Outcome(None, f"could not start {python}: {error}")
    if result.returncode != 0:
        return Outcome(None, f"exit status {result.returncode} (its stderr is above)")
    load_after, end = os.getloadavg()[0], utc_now()
    lines = [f"### {run.title}", "", f"Command: `{_command(python, run, root)}`",
             f"(regenerate: `python benchmarks/report.py --only {section.name}.{run.name}`)", "",
             machine_line(describe_machine(), load_before, load_after, start, end,
                          commit, versions)]
    if run.peer and peer_note is None and "unavailable" in versions:
        peer_note = (f"Peers partly unavailable in `{_shown(python, root)}` (versions above); "
                     f"their columns are missing or say why.")
    if peer_note:
        lines += ["", peer_note]
    head = "\n".join(lines) + "\n\n"
    blocks = output_blocks(result.stdout)
    short = shorten(blocks, details_path(f"{section.name}.{run.name}"), run.on_page)
    details = None if short == blocks else head + _joined(blocks)
    return Outcome(head + _joined(short) + "\n", details=details)


def _peer(run: Run, peer_python: str | None, root: Path = ROOT) -> tuple[str, str | None]:
    """The interpreter for `run` and, for a peer run, a note when the peers are missing."""
    if run.interpreter is not None:  # another environment of this repository (run_one
        return str(root / run.interpreter), None  # names it when it is missing)
    if not run.peer:
        return sys.executable, None
    if peer_python is None:
        return sys.executable, ("Peers unavailable: no `--peer-python` was given, so this "
                                "ran without DGL and PyG; their columns are missing or say why.")
    if not Path(peer_python).exists():
        return sys.executable, (f"Peers unavailable: `--peer-python {peer_python}` does not "
                                f"exist, so this ran without DGL and PyG; their columns are "
                                f"missing or say why.")
    return peer_python, None


def _store(document: BenchmarksFile, section: SectionSpec, run: Run, body: str) -> None:
    target = document.section(section.name)
    if target is None:
        target = Section(section.name, [f"## {section.title}\n\n"])
        document.add_section(target)
    target.set_run(f"{section.name}.{run.name}", body)


def _write_details(base: Path, run_id: str, details: str | None) -> None:
    """Write (or, when the run printed no long table, delete) the run's details file."""
    path = base / details_path(run_id)
    if details is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"<!-- written by benchmarks/report.py for {run_id}; BENCHMARKS.md shows "
                    f"this run without its long tables -->\n\n{details}")


def _write(path: Path, document: BenchmarksFile) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(render(document))
    temporary.replace(path)


def relayout(document: BenchmarksFile, selected, base: Path) -> None:
    """Lay the selected runs' stored blocks out again (long tables and off-page runs to
    their details files); the numbers, command and machine line stay as measured."""
    for section_spec, run in selected:
        run_id = f"{section_spec.name}.{run.name}"
        section = document.section(section_spec.name)
        stored = dict(part for part in section.parts if isinstance(part, tuple)) if section else {}
        if run_id not in stored:
            continue
        body = _whole_output(base, run_id) or stored[run_id]
        head, found, output = body.partition("\n\n" + _MACHINE)
        if not found:  # not a block report.py wrote
            continue
        machine, _, output = output.partition("\n\n")
        parts = output.rstrip("\n").split("\n\n")
        short = shorten(parts, details_path(run_id), run.on_page)
        _write_details(base, run_id, None if short == parts else body)
        section.set_run(run_id, "\n\n".join([head, _MACHINE + machine, *short]) + "\n\n")


def _whole_output(base: Path, run_id: str) -> str | None:
    """The block a details file holds (what the run printed, before any layout)."""
    path = base / details_path(run_id)
    if not path.exists():
        return None
    return path.read_text().split(" -->\n\n", 1)[1]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", metavar="SECTION[,SECTION.RUN]",
                        help="regenerate these sections or runs, keep the rest of the file")
    parser.add_argument("--peer-python", metavar="PATH",
                        help="interpreter of a venv with DGL and PyG, for the peer runs")
    parser.add_argument("--output", type=Path, default=None,
                        help="file to update (default: BENCHMARKS.md in the checkout)")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="per run; a run past it keeps its previous block")
    parser.add_argument("--list", action="store_true", help="print the runs and exit")
    parser.add_argument("--relayout", action="store_true",
                        help="run nothing: move the long tables of the selected runs' stored "
                             "blocks to their details files (after LONG_TABLE_ROWS changed)")
    return parser


def main(argv: list[str] | None = None, sections=SECTIONS, root: Path = ROOT) -> int:
    """Run the selected benchmarks and update the file; 1 when a run failed, 2 on bad
    arguments or markers."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        selected = _selected(sections, args.only)
    except ValueError as error:
        parser.error(str(error))
    if args.list:
        for section, run in selected:
            python, _ = _peer(run, args.peer_python, root)
            print(f"{section.name}.{run.name}: {_command(python, run, root)}")
        return 0
    output = args.output or root / "BENCHMARKS.md"
    try:
        document = parse(output.read_text() if output.exists() else "# gnnforge benchmarks\n\n")
    except ValueError as error:
        print(f"report.py: {error}", file=sys.stderr)
        return 2
    if args.relayout:
        relayout(document, selected, output.parent)
        _write(output, document)
        return 0
    failures = []
    for section, run in selected:
        python, note = _peer(run, args.peer_python, root)
        outcome = run_one(section, run, python, note, root, args.timeout)
        if outcome.body is None:
            failures.append(f"{section.name}.{run.name}: {outcome.failure}")
            continue
        _store(document, section, run, outcome.body)
        _write_details(output.parent, f"{section.name}.{run.name}", outcome.details)
        _write(output, document)
    for failure in failures:
        print(f"report.py: {failure}; its previous block is kept", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
