"""benchmarks/_restrictions.py: a script re-runs itself under a restriction's environment."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import _restrictions  # noqa: E402


def test_no_restriction_is_always_applied_and_avx2_only_under_its_variables(monkeypatch):
    assert _restrictions.applied("all")
    for name in _restrictions.RESTRICTIONS["avx2"]:
        monkeypatch.delenv(name, raising=False)
    assert not _restrictions.applied("avx2")
    for name, value in _restrictions.RESTRICTIONS["avx2"].items():
        monkeypatch.setenv(name, value)
    assert _restrictions.applied("avx2")


def test_rerun_under_passes_the_arguments_and_the_environment(tmp_path):
    script = tmp_path / "show.py"
    out = tmp_path / "out.txt"
    script.write_text("import os, sys\nopen(sys.argv[1], 'w').write(os.environ['LIBXSMM_TARGET']"
                      " + ' ' + os.environ['GNNFORGE_ISA'])\nsys.exit(3)\n")
    assert _restrictions.rerun_under("avx2", str(script), [str(out)]) == 3
    assert out.read_text() == "hsw avx2"
