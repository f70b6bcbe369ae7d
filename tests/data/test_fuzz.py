"""Every file reader survives mutated copies of the real datasets: a clean error or a valid
graph, never a crash, a hang or a raw exception (driver: tests/data/fuzz.py).

Each reader fuzzes for GNNFORGE_FUZZ_SECONDS (default 3) in a child process, from the seed
GNNFORGE_FUZZ_SEED (default 0), so a segfault or a hang fails its test with the input
that caused it kept under the test's temporary folder. Longer runs, e.g.
`GNNFORGE_FUZZ_SECONDS=600 GNNFORGE_FUZZ_SEED=7 pytest tests/data/test_fuzz.py`, find rarer
problems.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from tests.data.fuzz import TARGETS
from tests.isolated import run_isolated

SECONDS = float(os.environ.get("GNNFORGE_FUZZ_SECONDS", "3"))
SEED = int(os.environ.get("GNNFORGE_FUZZ_SEED", "0"))
# Interpreter start-up and seed preparation on a loaded machine, beyond the fuzzing budget;
# a case that runs past this is a hang.
STARTUP_S = 240.0

_DRIVER = """
import sys
from tests.data.fuzz import fuzz
from pathlib import Path
sys.setrecursionlimit(10_000)
sys.exit(fuzz(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])))
"""


@pytest.mark.parametrize("target", TARGETS)
def test_reader_gives_a_clean_error_or_a_valid_graph(target, datasets_dir, tmp_path):
    if target == "molecules" and importlib.util.find_spec("rdkit") is None:
        pytest.skip("the molecule reader needs RDKit (the chem extra)")
    result = run_isolated(_DRIVER, target, str(SECONDS), str(SEED), str(tmp_path),
                          timeout=SECONDS + STARTUP_S)
    assert result.returncode == 0, (result.stdout[-4000:] + result.stderr[-4000:])
    assert f"FUZZ-OK {target}:" in result.stdout
