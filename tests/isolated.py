"""Run a snippet in a fresh interpreter, so that a segfault or a hang fails one test.

A crafted input that makes native code read out of bounds kills the process that reads
it; run in pytest's own process it would take the whole test run down with it. Here the
snippet runs in a child with this checkout first on the path, and the test sees its exit
status (negative: killed by that signal), its output, or a timeout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_isolated(code: str, *args: str, timeout: float = 120.0,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `code` (dedented) with `args` in sys.argv[1:]; fail the test on a signal or timeout.

    Returns the completed process (text stdout/stderr) when it exited by itself.
    """
    import pytest

    environment = dict(os.environ)
    environment["PYTHONPATH"] = str(ROOT) + os.pathsep + environment.get("PYTHONPATH", "")
    environment.update(env or {})
    try:
        result = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                                capture_output=True, text=True, timeout=timeout,
                                env=environment, cwd=ROOT)
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"the child did not finish within {timeout} s (a hang); output so far: "
                    f"{error.stdout!r} {error.stderr!r}")
    if result.returncode < 0:
        pytest.fail(f"the child was killed by signal {-result.returncode} (a crash); "
                    f"stderr: {result.stderr[-2000:]}")
    return result


def expect_clean_error(code: str, *args: str, timeout: float = 120.0) -> str:
    """Run `code`, which must print 'CLEAN-ERROR: <message>' and exit 0; return the message."""
    result = run_isolated(code, *args, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("CLEAN-ERROR: ")]
    assert lines, f"no clean error reported; stdout: {result.stdout[-2000:]}"
    return lines[-1].removeprefix("CLEAN-ERROR: ")
