"""benchmarks/report.py with fast fake benchmark scripts: the blocks it writes, the
markers, `--only`, failures, peers; and that the real registry names real scripts and the
committed BENCHMARKS.md parses with a section for every registered capability."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import report  # noqa: E402
from _report_file import MarkerError, parse, render  # noqa: E402
from _report_sections import SECTIONS, Run, Section  # noqa: E402

TABLE = textwrap.dedent("""\
    import os, sys
    value = os.environ.get("FAKE_VALUE", "1")
    print("threads: 2; a line of context")
    print("# Heading from the script")
    print("| cell | value |")
    print("|---|---|")
    print(f"| {sys.argv[1]} | {value} |")
    print("peer mark:", os.environ.get("PEER_MARK", "none"))
""")

FAKE = (
    Section("alpha", "Alpha capability", (
        Run("one", "First table", ("benchmarks/table.py", "a1")),
        Run("two", "Second table", ("benchmarks/table.py", "a2")),
    )),
    Section("beta", "Beta capability", (
        Run("peer", "Against a peer", ("benchmarks/table.py", "b1"), peer=True),
    )),
)


@pytest.fixture()
def checkout(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "table.py").write_text(TABLE)
    (tmp_path / "benchmarks" / "fail.py").write_text("import sys; sys.exit(3)\n")
    (tmp_path / "benchmarks" / "sleep.py").write_text("import time; time.sleep(60)\n")
    return tmp_path


def _main(checkout, *argv, sections=FAKE):
    return report.main([*argv, "--output", str(checkout / "BENCHMARKS.md")],
                       sections=sections, root=checkout)


def _blocks(text):
    return {part[0]: part[1] for section in parse(text).sections for part in section.parts
            if isinstance(part, tuple)}


def test_a_full_run_writes_one_section_per_capability_with_command_and_machine(checkout):
    (checkout / "BENCHMARKS.md").write_text("# Benchmarks\n\nThe header stays.\n")
    assert _main(checkout) == 0
    text = (checkout / "BENCHMARKS.md").read_text()
    assert text.startswith("# Benchmarks\n\nThe header stays.\n")
    assert [line for line in text.splitlines() if line.startswith("## ")] == [
        "## Alpha capability", "## Beta capability"]
    blocks = _blocks(text)
    assert list(blocks) == ["alpha.one", "alpha.two", "beta.peer"]
    one = blocks["alpha.one"]
    assert one.startswith("### First table\n\nCommand: `PYTHONPATH=. ")
    assert "benchmarks/table.py a1`" in one
    assert "--only alpha.one" in one
    machine = next(line for line in one.splitlines() if line.startswith("Machine: "))
    assert re.search(r"\d+ cores / \d+ hardware threads", machine)
    assert re.search(r"load average \(1 min\) [\d.]+ before, [\d.]+ after", machine)
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d-\d\d:\d\d UTC", machine)
    assert "commit unknown (not a git checkout)" in machine
    assert "Python " in machine
    assert "| cell | value |\n|---|---|\n| a1 | 1 |" in one
    assert "```text\nthreads: 2; a line of context\n```" in one
    assert "\n#### Heading from the script\n" in one
    assert render(parse(text)) == text


def test_only_rewrites_the_named_runs_and_keeps_every_other_byte(checkout):
    assert _main(checkout) == 0
    path = checkout / "BENCHMARKS.md"
    # Commentary an engineer wrote between runs, and a block from an earlier measurement.
    text = path.read_text().replace("<!-- run alpha.two -->",
                                    "Commentary that stays.\n\n<!-- run alpha.two -->")
    text = text.replace("| b1 | 1 |", "| b1 | measured earlier |")
    path.write_text(text)
    os.environ["FAKE_VALUE"] = "2"
    try:
        assert _main(checkout, "--only", "alpha.one") == 0
    finally:
        del os.environ["FAKE_VALUE"]
    after = path.read_text()
    before_blocks, after_blocks = _blocks(text), _blocks(after)
    assert "| a1 | 2 |" in after_blocks["alpha.one"]
    assert after_blocks["alpha.two"] == before_blocks["alpha.two"]
    assert after_blocks["beta.peer"] == before_blocks["beta.peer"]
    assert "Commentary that stays.\n\n<!-- run alpha.two -->" in after
    unchanged = after.replace(after_blocks["alpha.one"], before_blocks["alpha.one"])
    assert unchanged == text


def test_only_takes_whole_sections_and_adds_missing_sections_and_runs(checkout):
    path = checkout / "BENCHMARKS.md"
    path.write_text("# B\n\n<!-- section alpha -->\n## Alpha capability\n\nKept.\n\n"
                    "<!-- run alpha.two -->\nold two\n<!-- /run alpha.two -->\n"
                    "<!-- /section alpha -->\n\nA trailing note.\n")
    assert _main(checkout, "--only", "beta") == 0
    text = path.read_text()
    assert list(_blocks(text)) == ["alpha.two", "beta.peer"]
    assert "old two" in text and "A trailing note.\n" in text
    assert text.index("A trailing note.") < text.index("<!-- section beta -->")
    assert _main(checkout, "--only", "alpha") == 0
    text = path.read_text()
    assert list(_blocks(text)) == ["alpha.two", "alpha.one", "beta.peer"]
    assert "old two" not in text and "Kept.\n" in text


def test_a_failing_or_slow_run_keeps_its_previous_block_and_exits_1(checkout, capsys):
    assert _main(checkout) == 0
    text = (checkout / "BENCHMARKS.md").read_text()
    broken = (Section("alpha", "Alpha capability", (
        Run("one", "First table", ("benchmarks/fail.py",)),
        Run("two", "Second table", ("benchmarks/sleep.py",)),
    )),)
    assert _main(checkout, "--timeout", "2", sections=broken) == 1
    assert (checkout / "BENCHMARKS.md").read_text() == text
    err = capsys.readouterr().err
    assert "alpha.one: exit status 3" in err
    assert "alpha.two: timed out after 2 s" in err


def test_peer_runs_use_the_peer_interpreter_and_say_when_there_is_none(checkout):
    wrapper = checkout / "peer-python"
    wrapper.write_text(f"#!/bin/sh\nPEER_MARK=peer exec {sys.executable} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    assert _main(checkout, "--peer-python", str(wrapper)) == 0
    blocks = _blocks((checkout / "BENCHMARKS.md").read_text())
    assert "peer mark: peer" in blocks["beta.peer"]
    assert f"`PYTHONPATH=. peer-python benchmarks/table.py b1`" in blocks["beta.peer"]
    assert "peer mark: none" in blocks["alpha.one"]  # not a peer run
    assert "DGL " in blocks["beta.peer"] and "PyG " in blocks["beta.peer"]
    assert "DGL" not in blocks["alpha.one"]  # versions of the peers only where they run
    assert _main(checkout, "--only", "beta") == 0
    peer = _blocks((checkout / "BENCHMARKS.md").read_text())["beta.peer"]
    assert "peer mark: none" in peer
    assert "Peers unavailable: no `--peer-python` was given" in peer
    assert _main(checkout, "--only", "beta", "--peer-python", "/nonexistent/python") == 0
    peer = _blocks((checkout / "BENCHMARKS.md").read_text())["beta.peer"]
    assert "`--peer-python /nonexistent/python` does not exist" in peer


def test_a_run_in_another_environment_uses_its_interpreter_and_variables(checkout, capsys):
    wrapper = checkout / "env-python"
    wrapper.write_text(f"#!/bin/sh\nPEER_MARK=other exec {sys.executable} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    other = (Section("gamma", "Gamma capability", (
        Run("env", "Another environment", ("benchmarks/table.py", "g1"),
            interpreter="env-python", env=(("FAKE_VALUE", "7"),)),
    )),)
    assert _main(checkout, sections=other) == 0
    block = _blocks((checkout / "BENCHMARKS.md").read_text())["gamma.env"]
    assert "`FAKE_VALUE=7 PYTHONPATH=. env-python benchmarks/table.py g1`" in block
    assert "| g1 | 7 |" in block and "peer mark: other" in block
    wrapper.unlink()
    assert _main(checkout, sections=other) == 1
    assert "gamma.env: env-python does not exist" in capsys.readouterr().err


def test_an_unknown_only_name_is_named_with_the_choices(checkout, capsys):
    with pytest.raises(SystemExit) as exit_info:
        _main(checkout, "--only", "alpha.one,gamma")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "unknown section or run gamma" in err and "alpha.two" in err
    assert not (checkout / "BENCHMARKS.md").exists()


def test_list_prints_every_command_and_runs_nothing(checkout, capsys):
    assert _main(checkout, "--list") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("alpha.one: PYTHONPATH=. ") and out[0].endswith("table.py a1")
    assert len(out) == 3
    assert not (checkout / "BENCHMARKS.md").exists()


@pytest.mark.parametrize("text, message", [
    ("<!-- section a -->\n<!-- section b -->\n", "line 2: section 'b' opens inside"),
    ("<!-- run a.x -->\n", "line 1: run 'a.x' must be inside a section"),
    ("<!-- section a -->\n<!-- /run a.x -->\n", "line 2: /run 'a.x' closes nothing"),
    ("<!-- section a -->\n<!-- /section a -->\n<!-- section a -->\n", "line 3: section 'a' "
     "appears twice"),
    ("<!-- section a -->\n<!-- run a.x -->\n", "'a.x' is never closed"),
])
def test_broken_markers_are_named_with_their_line(text, message):
    with pytest.raises(MarkerError, match=re.escape(message)):
        parse(text)


def test_markers_round_trip_and_a_bad_file_is_refused_before_any_run(checkout, capsys):
    text = ("head\n<!-- section a -->\n## A\n<!-- run a.x -->\nbody\n<!-- /run a.x -->\n"
            "between\n<!-- run a.y -->\n<!-- /run a.y -->\n<!-- /section a -->\ntail\n")
    assert render(parse(text)) == text
    (checkout / "BENCHMARKS.md").write_text("<!-- section alpha -->\n")
    assert _main(checkout) == 2
    assert "'alpha' is never closed" in capsys.readouterr().err


def test_format_output_keeps_tables_and_fences_other_lines():
    out = report.format_output("note one\n\nnote two\n| a |\n|---|\n## Sub\n```\nx\n```\n")
    assert out == ("```text\nnote one\n\nnote two\n```\n\n| a |\n|---|\n\n#### Sub\n\n"
                   "```text\n'''\nx\n'''\n```\n")
    assert report.format_output("") == "(the command printed nothing)\n"


def test_the_registry_names_scripts_that_exist_and_ids_are_unique():
    ids = [f"{section.name}.{run.name}" for section in SECTIONS for run in section.runs]
    assert len(ids) == len(set(ids))
    for section in SECTIONS:
        for run in section.runs:
            if run.argv[0] == "-m":
                assert run.argv[1].startswith("gnnforge"), run
            else:
                assert (ROOT / run.argv[0]).is_file(), run


def test_the_committed_file_has_a_section_for_every_capability_and_no_stray_run():
    document = parse((ROOT / "BENCHMARKS.md").read_text())
    registered = {f"{s.name}.{r.name}" for s in SECTIONS for r in s.runs}
    assert [s.name for s in document.sections] == [s.name for s in SECTIONS]
    for section in document.sections:
        for run_id in section.run_ids():
            assert run_id in registered, run_id
            assert run_id.startswith(section.name + "."), run_id


LONG = textwrap.dedent("""\
    import sys
    rows = int(sys.argv[1])
    print("| short | table |")
    print("|---|---|")
    print("| 1 | 2 |")
    print()
    print("| row | value |")
    print("|---|---|")
    for i in range(rows):
        print(f"| r{i} | {i} |")
""")


def test_a_long_table_goes_to_the_details_file_and_the_page_names_it(checkout):
    (checkout / "benchmarks" / "long.py").write_text(LONG)
    rows = report.LONG_TABLE_ROWS + 1
    sections = (Section("gamma", "Gamma", (Run("long", "Long", ("benchmarks/long.py", str(rows))),)),)
    assert _main(checkout, sections=sections) == 0
    page = _blocks((checkout / "BENCHMARKS.md").read_text())["gamma.long"]
    details = (checkout / "benchmarks" / "results" / "gamma.long.md").read_text()
    assert "| 1 | 2 |" in page and "| r0 | 0 |" not in page
    assert f"*{rows} rows: the whole table is in [benchmarks/results/gamma.long.md]" in page
    assert f"| r{rows - 1} | {rows - 1} |" in details and "| 1 | 2 |" in details
    assert "Command: `PYTHONPATH=." in details and "Machine:" in details

    sections = (Section("gamma", "Gamma", (Run("long", "Long", ("benchmarks/long.py", "3")),)),)
    assert _main(checkout, sections=sections) == 0
    page = _blocks((checkout / "BENCHMARKS.md").read_text())["gamma.long"]
    assert "| r2 | 2 |" in page and "benchmarks/results" not in page
    assert not (checkout / "benchmarks" / "results" / "gamma.long.md").exists()


def test_a_table_at_the_limit_stays_on_the_page():
    table = "| a |\n|---|\n" + "\n".join(f"| {i} |" for i in range(report.LONG_TABLE_ROWS))
    assert report.shorten([table, "text"], Path("d.md")) == [table, "text"]


def test_relayout_moves_a_stored_long_table_without_running_anything(checkout):
    rows = "\n".join(f"| r{i} | {i} |" for i in range(report.LONG_TABLE_ROWS + 1))
    block = f"### Long\n\nMachine: m\n\n| row | value |\n|---|---|\n{rows}\n\n```text\nx\n```\n\n"
    (checkout / "BENCHMARKS.md").write_text(
        f"# B\n\n<!-- section gamma -->\n## Gamma\n\n<!-- run gamma.long -->\n{block}"
        "<!-- /run gamma.long -->\n<!-- /section gamma -->\n")
    sections = (Section("gamma", "Gamma", (Run("long", "Long", ("benchmarks/fail.py",)),)),)
    assert _main(checkout, "--relayout", sections=sections) == 0
    page = _blocks((checkout / "BENCHMARKS.md").read_text())["gamma.long"]
    assert "| r0 | 0 |" not in page and "Machine: m" in page and "```text\nx\n```" in page
    assert "benchmarks/results/gamma.long.md" in page
    assert block in (checkout / "benchmarks" / "results" / "gamma.long.md").read_text()


def test_an_off_page_run_keeps_heading_command_and_machine_and_points_to_its_output(checkout):
    sections = (Section("gamma", "Gamma", (Run("off", "Off", ("benchmarks/table.py", "x"),
                                                on_page=False),)),)
    assert _main(checkout, sections=sections) == 0
    page = _blocks((checkout / "BENCHMARKS.md").read_text())["gamma.off"]
    assert page.startswith("### Off\n\nCommand: `") and "\nMachine: " in page
    assert "| x | 1 |" not in page and "is in [benchmarks/results/gamma.off.md]" in page
    assert "| x | 1 |" in (checkout / "benchmarks" / "results" / "gamma.off.md").read_text()
    before = (checkout / "BENCHMARKS.md").read_text()
    assert _main(checkout, "--relayout", sections=sections) == 0  # laid out again: the same
    assert (checkout / "BENCHMARKS.md").read_text() == before
    assert "| x | 1 |" in (checkout / "benchmarks" / "results" / "gamma.off.md").read_text()


def test_a_long_text_block_goes_to_the_details_file():
    text = "```text\n" + "\n".join(str(i) for i in range(report.LONG_TEXT_LINES + 1)) + "\n```"
    assert report.shorten([text], Path("d.md")) == ["*9 lines of output: in [d.md](d.md).*"]


def test_the_committed_page_is_a_page_with_every_details_file_it_links():
    text = (ROOT / "BENCHMARKS.md").read_text()
    assert len(text.splitlines()) < 1000
    assert "Migrated from the dated log" not in text
    linked = set(re.findall(r"\]\((benchmarks/results/[^)]+\.md)\)", text))
    assert linked, "no details file linked"
    for path in linked:
        assert (ROOT / path).is_file(), path
    registered = {f"{s.name}.{r.name}" for s in SECTIONS for r in s.runs}
    for path in (ROOT / "benchmarks" / "results").glob("*.md"):
        assert path.stem in registered and f"benchmarks/results/{path.name}" in linked, path


def test_the_machine_line_names_the_commit_as_it_was_before_the_run(checkout):
    """A run that writes a plot into the tree measured the committed code: the line must
    not call the plot an uncommitted change; a change made before the run is named."""
    (checkout / "benchmarks" / "plot.py").write_text(
        "from pathlib import Path\nPath('docs').mkdir(exist_ok=True)\n"
        "Path('docs/plot.png').write_bytes(b'png')\nprint('| a | b |\\n|---|---|\\n| 1 | 2 |')\n")
    plotting = (Section("alpha", "Alpha", (Run("plot", "Plot", ("benchmarks/plot.py",)),)),)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    subprocess.run([*git, "-C", str(checkout), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(checkout), "commit", "-qm", "fake"], check=True)
    assert _main(checkout, sections=plotting) == 0
    machine = next(line for line in (checkout / "BENCHMARKS.md").read_text().splitlines()
                   if line.startswith("Machine: "))
    assert re.search(r"commit [0-9a-f]{7,};", machine), machine
    (checkout / "docs" / "plot.png").unlink()
    (checkout / "benchmarks" / "table.py").write_text(TABLE + "# edited\n")
    assert _main(checkout, sections=plotting) == 0
    assert "+ uncommitted changes" in (checkout / "BENCHMARKS.md").read_text()
