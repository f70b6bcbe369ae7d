"""The `gnnforge` command's habits: --version, help without torch, one-line errors."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tqdm import tqdm

from gnnforge import __version__
from gnnforge._cli_modules import abandon_deferred, load_command
from gnnforge._cli_progress import add_progress_flag, progress_switch
from gnnforge.cli import COMMANDS, main

REPO = Path(__file__).resolve().parents[2]

# Imports torch's absence after parsing: run in a fresh interpreter (this one has torch).
_PROBE = """
import sys
from gnnforge.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("TORCH" if "torch" in sys.modules else "NO-TORCH", file=sys.stderr)
"""


def _probe(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True,
                          text=True, env=env, timeout=120, cwd=REPO)


@pytest.mark.parametrize("argv", [["--help"], ["--version"]]
                         + [[name, "--help"] for name in COMMANDS])
def test_help_does_not_import_torch(argv):
    result = _probe(*argv)
    assert result.stderr.strip().endswith("NO-TORCH"), result.stderr
    assert "usage:" in result.stdout or "gnnforge " in result.stdout


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"gnnforge {__version__} (torch ") and "python 3." in out


def test_version_matches_the_package_metadata():
    import tomllib

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["version"] == __version__


@pytest.mark.parametrize("argv, message", [
    (["sample", "--fanouts=-3,10"], "--fanouts: every entry must be >= 1, got -3"),
    (["sample", "--fanouts", "a,b"], "--fanouts: expected integers"),
    (["sample", "--batch-size", "0"], "--batch-size: must be >= 1, got 0"),
    (["sample", "--sampler", "gibbs"], "unknown sampler 'gibbs'"),
])
def test_bad_values_are_one_line_errors_before_torch(argv, message):
    result = _probe(*argv)
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == "NO-TORCH" and message in lines[-2], result.stderr
    assert "Traceback" not in result.stderr


def test_every_long_command_has_no_progress():
    for name, module_name in COMMANDS.items():
        parser = argparse.ArgumentParser()
        load_command(module_name).configure(parser)
        add_progress_flag(parser)
        assert parser.parse_args(["--no-progress"] + (["--explain"] if name == "plan" else [])
                                 ).progress is False, name
        abandon_deferred()


def test_no_progress_silences_every_bar(capsys):
    with progress_switch(False):
        for _ in tqdm(range(3), disable=False, desc="quiet"):
            pass
    for _ in tqdm(range(3), disable=False, desc="loud"):
        pass
    err = capsys.readouterr().err
    assert "quiet" not in err and "loud" in err


def test_a_user_error_while_running_is_one_line(capsys):
    assert main(["sample", "--graph", "no-such-graph", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gnnforge sample: error: --graph: no dataset")


def test_train_says_what_it_starts_before_torch_loads(capsys):
    assert main(["train", "--task", "node", "--slots", "512"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "gnnforge train --task node: loading torch and the data..."
    assert err[-1] == "gnnforge train: error: --slots applies to --task varmisuse only " \
                      "(got --task node)"
    assert main(["train", "--task", "node", "--slots", "512", "--no-progress"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_no_progress_reaches_nested_subcommands():
    parser = argparse.ArgumentParser()
    load_command(COMMANDS["plan"]).configure(parser)
    add_progress_flag(parser)
    assert parser.parse_args(["profile", "--no-progress"]).progress is False
    assert parser.parse_args(["--no-progress", "profile"]).progress is False
    assert parser.parse_args(["profile"]).progress is None
    abandon_deferred()
