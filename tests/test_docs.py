"""Every example in README.md and docs/*.md runs, so no example can rot.

What runs (README.md's "Examples in the docs run" states the same convention for writers):

- every ```python block: the blocks of one file run in sequence in one fresh Python
  process (a later block may use an earlier block's names), in a temporary folder;
- every command line of a ```bash block (continuation lines joined, `# comments` dropped):
  it must start with `gnnforge` (run as `python -m gnnforge.cli ...` from this checkout)
  or `python -m gnnforge...`, and runs in the same kind of temporary folder;
- in a table with a `<!-- run-with: FLAGS -->` comment before its header line (opt-in:
  other tables name paths and commands with placeholders), every row whose first cell is
  one backticked `gnnforge ...` command, likewise (docs/recipes.md's rows).

HTML comments on the lines just before a block (invisible when rendered, visible in the
source) adjust it:

- `<!-- no-run: REASON -->`: the block is not run (a `make` target, `torchrun` with several
  processes, an output listing); it is reported as a skip with its reason, so the count of
  unrun blocks shows in every test run.
- `<!-- run-with: FLAGS -->`: FLAGS are appended to every command of the block, to run
  the documented command at a small size (e.g. `--epochs 1`).
- `<!-- file: NAME -->`: the block's text is written to NAME in the folder where the
  file's commands run (a TOML config a later command reads).
- `<!-- slow -->`: the block's test carries the `slow` marker (still part of CI).

Every fenced block needs a language (`python`, `bash`, `toml`, `text`, ...), so a command
cannot hide in an unlabelled block; only python and bash blocks run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = ("python", "bash")
COMMAND_TIMEOUT_S = 600
_DIRECTIVE = re.compile(r"^<!--\s*(no-run|run-with|file|slow)\s*(?::\s*(.*?))?\s*-->$")
_FENCE = re.compile(r"^(\s*)```([^`]*)$")   # CommonMark: no backtick in the info string


@dataclass(frozen=True)
class Block:
    """One fenced block of a markdown file and the directives written before it."""

    path: Path
    line: int                     # 1-based line of the first line of code
    language: str
    text: str
    directives: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{_name(self.path)}:{self.line}"


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def parse_blocks(path: Path) -> list[Block]:
    """The fenced blocks of `path`, in order, with their `<!-- ... -->` directives."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, index = [], 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        directives = _directives_before(lines, index, path)
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            raise ValueError(f"{_name(path)}:{index + 1}: a ``` block is never closed")
        indent = len(opening.group(1))
        code = "\n".join(line[indent:] for line in lines[index + 1:end])
        blocks.append(Block(path, index + 2, opening.group(2).strip(), code, directives))
        index = end + 1
    return blocks


def _directives_before(lines: list[str], fence: int, path: Path) -> dict[str, str]:
    directives, index = {}, fence - 1
    while index >= 0 and lines[index].strip().startswith("<!--"):
        match = _DIRECTIVE.match(lines[index].strip())
        if match is None:
            raise ValueError(f"{_name(path)}:{index + 1}: unknown directive "
                             f"{lines[index].strip()!r}; use no-run: REASON, run-with: FLAGS, "
                             "file: NAME or slow")
        directives[match.group(1)] = match.group(2) or ""
        index -= 1
    return directives


def commands(block: Block) -> list[tuple[int, list[str]]]:
    """(line, argv) of each command of a bash block; continuation lines joined."""
    found, pending, start = [], "", block.line
    for offset, line in enumerate(block.text.splitlines()):
        if not pending:
            start = block.line + offset
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        argv = shlex.split(pending + line, comments=True)
        pending = ""
        if argv:
            found.append((start, argv))
    return found


def all_blocks() -> list[Block]:
    return [block for path in DOCUMENTS for block in parse_blocks(path)]


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.setdefault("MPLBACKEND", "Agg")
    return env


def _run(argv: list[str], cwd: Path, what: str) -> None:
    # A session of its own, so a timeout ends the command's worker processes too.
    process = subprocess.Popen(argv, cwd=cwd, env=_environment(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"{what}: timed out after {COMMAND_TIMEOUT_S} s (its process group was "
                    f"killed)\n--- stderr (tail)\n{stderr[-3000:]}")
    if process.returncode != 0:
        pytest.fail(f"{what}: exit status {process.returncode}\n--- stdout (tail)\n"
                    f"{stdout[-3000:]}\n--- stderr (tail)\n{stderr[-6000:]}")


def _write_files(blocks: list[Block], folder: Path) -> None:
    for block in blocks:
        if "file" in block.directives:
            (folder / block.directives["file"]).write_text(block.text + "\n", encoding="utf-8")


# The runner compiles each block padded to its markdown line, so a traceback names the
# document and the line of the failing statement.
_RUNNER = """
import json, sys
namespace = {"__name__": "__main__"}
for path, line, text in json.load(open(sys.argv[1])):
    exec(compile("\\n" * (line - 1) + text, path, "exec"), namespace)
"""


def _marks(blocks: list[Block]) -> list:
    return [pytest.mark.slow] if any("slow" in b.directives for b in blocks) else []


def _python_cases() -> list:
    cases = []
    for path in DOCUMENTS:
        runnable = [b for b in parse_blocks(path)
                    if b.language == "python" and "no-run" not in b.directives]
        if runnable:
            cases.append(pytest.param(path, runnable, id=_name(path),
                                      marks=_marks(runnable)))
    return cases


_TABLE_COMMAND = re.compile(r"^\|\s*`((?:gnnforge|python -m gnnforge)[^`]*)`\s*\|")


def table_commands(path: Path) -> list[Block]:
    """One Block (language "table") per row that starts with a backticked command, in the
    tables that a `run-with` directive opts in, with the directives before the table."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for index, line in enumerate(lines):
        match = _TABLE_COMMAND.match(line)
        if match is None:
            continue
        header = index
        while header > 0 and lines[header - 1].startswith("|"):
            header -= 1
        directives = _directives_before(lines, header, path)
        if "run-with" in directives:
            found.append(Block(path, index + 1, "table", match.group(1), directives))
    return found


def _command_cases() -> list:
    cases = []
    for block in [*all_blocks(), *(row for path in DOCUMENTS for row in table_commands(path))]:
        if block.language not in ("bash", "table") or "no-run" in block.directives:
            continue
        for line, argv in commands(block):
            where = f"{_name(block.path)}:{line}"
            cases.append(pytest.param(block, argv, id=f"{where} {' '.join(argv[:3])}",
                                      marks=_marks([block])))
    return cases


def _unrun_cases() -> list:
    return [pytest.param(block, id=block.where) for block in all_blocks()
            if block.language in RUNNABLE and "no-run" in block.directives]


@pytest.mark.parametrize("path,blocks", _python_cases())
def test_python_examples_run(path, blocks, tmp_path):
    _write_files(parse_blocks(path), tmp_path)
    script = tmp_path / "blocks.json"
    script.write_text(json.dumps([[_name(b.path), b.line, b.text]
                                  for b in blocks]))
    _run([sys.executable, "-c", _RUNNER, str(script)], tmp_path,
         f"python blocks of {_name(path)}")


@pytest.mark.parametrize("block,argv", _command_cases())
def test_commands_run(block, argv, tmp_path):
    where = f"{block.where} `{' '.join(argv)}`"
    _write_files(parse_blocks(block.path), tmp_path)
    extra = shlex.split(block.directives.get("run-with", ""))
    _run([*_executable(argv, where), *extra], tmp_path, where)


def _executable(argv: list[str], where: str) -> list[str]:
    """`gnnforge ...` as `python -m gnnforge.cli ...`, `python -m gnnforge.X ...` as is."""
    if argv[0] == "gnnforge":
        return [sys.executable, "-m", "gnnforge.cli", *argv[1:]]
    if argv[:2] == ["python", "-m"] and len(argv) > 2 and argv[2].split(".")[0] == "gnnforge":
        return [sys.executable, *argv[1:]]
    pytest.fail(f"{where}: a ```bash block runs `gnnforge ...` or `python -m gnnforge...` "
                "commands only; mark a block of other commands <!-- no-run: REASON -->")


@pytest.mark.parametrize("block", _unrun_cases())
def test_unrun_blocks_give_a_reason(block):
    reason = block.directives["no-run"]
    assert reason, f"{block.where}: <!-- no-run: --> needs a reason after the colon"
    pytest.skip(f"no-run: {reason}")


def test_every_block_is_labelled():
    unlabelled = [block.where for block in all_blocks() if not block.language]
    assert not unlabelled, ("fenced blocks without a language (use python, bash, toml, "
                            f"text, ...): {unlabelled}")
    misplaced = [block.where for block in all_blocks()
                 if ("run-with" in block.directives and block.language != "bash")
                 or ("file" in block.directives and block.language in RUNNABLE)]
    assert not misplaced, f"run-with belongs on bash blocks, file on data blocks: {misplaced}"


def test_links_to_files_resolve():
    missing = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        # Links outside code spans (a span may quote text such as SMILES' "[N+](=O)").
        prose = re.sub(r"(`+)(?:(?!\1).)+?\1", "", text)
        for target in re.findall(r"\]\(([^)#\s]+)\)", prose):
            if "://" not in target and not (path.parent / target).exists():
                missing.append(f"{_name(path)} -> {target}")
        for target in re.findall(r"`?\b(docs/[\w.-]+\.md)\b", text):
            if not (ROOT / target).exists():
                missing.append(f"{_name(path)} -> {target}")
    assert not missing, f"links to files that do not exist: {missing}"


def test_parser_on_a_known_document(tmp_path):
    sample = tmp_path / "sample.md"
    sample.write_text("text\n\n<!-- run-with: --epochs 1 -->\n<!-- slow -->\n```bash\n"
                      "gnnforge train --task node \\\n    --dataset sbm   # small\n"
                      "\n```\n\n<!-- no-run: output -->\n```text\nresult\n```\n")
    first, second = parse_blocks(sample)
    assert first.language == "bash" and first.line == 6
    assert first.directives == {"run-with": "--epochs 1", "slow": ""}
    assert commands(first) == [(6, ["gnnforge", "train", "--task", "node", "--dataset", "sbm"])]
    assert second.directives == {"no-run": "output"} and second.text == "result"


def test_table_rows_that_start_with_a_command_run_with_the_tables_directives(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n<!-- run-with: --epochs 1 -->\n| command | result |\n| --- | --- |\n"
                    "| `gnnforge train --recipe a` | 1 |\n| not a command | 2 |\n"
                    "| `gnnforge recipes` | 3 |\n", encoding="utf-8")
    rows = table_commands(page)
    assert [(row.line, row.text, row.directives) for row in rows] == [
        (6, "gnnforge train --recipe a", {"run-with": "--epochs 1"}),
        (8, "gnnforge recipes", {"run-with": "--epochs 1"})]
    listing = tmp_path / "listing.md"
    listing.write_text("| path | what |\n| --- | --- |\n| `gnnforge/ops/` | kernels |\n",
                       encoding="utf-8")
    assert table_commands(listing) == []  # a table without run-with is not run
