"""The package's metadata leaves a user's torch alone (issue 18, item 1).

pip resolves `gnnforge` against a venv whose installed torch is another version (a
dist-info record only: resolving needs metadata, not the 200 MB library). With the
requirement a lower bound, pip keeps that torch and installs gnnforge alone; a torch
below the bound is refused. Offline: the only package pip can find is our own wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

from tests._timeouts import SUBPROCESS_TIMEOUT_S

REPO = Path(__file__).resolve().parents[2]
# What the fake venv has installed besides torch: gnnforge's other requirements.
OTHERS = {"numpy": "2.0.0", "scipy": "1.13.0", "numba": "0.60.0", "tqdm": "4.66.0"}


def _requirements() -> list[str]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]


def test_torch_requirement_is_a_lower_bound():
    torch = [r for r in _requirements() if r.replace(" ", "").startswith("torch")]
    assert len(torch) == 1 and ">=" in torch[0] and "==" not in torch[0], torch


def test_tune_extra_is_the_cpu_xgboost():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert [r for r in extras["tune"] if r.startswith("xgboost")][0].startswith("xgboost-cpu")


def _fake_dist(site: Path, name: str, version: str) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "INSTALLER").write_text("pip\n")
    (info / "RECORD").write_text("")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources.
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "gnnforge", source / "gnnforge",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--no-index", "-q", "-w", str(out), str(source)], check=True,
                   env=_clean_env(), cwd=out, capture_output=True)
    (found,) = out.glob("gnnforge-*.whl")
    return found


def _clean_env() -> dict[str, str]:
    # No pip configuration (its extra indexes) and no PYTHONPATH (a checkout on it would
    # count as an installed gnnforge).
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PIP_") and k != "PYTHONPATH"}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _dry_run(tmp_path: Path, wheel: Path, torch_version: str) -> subprocess.CompletedProcess:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    (site,) = env_dir.glob("lib/python*/site-packages")
    for name, version in {"torch": torch_version, **OTHERS}.items():
        _fake_dist(site, name, version)
    return subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "install",
         "--dry-run", "--no-index", "--find-links", str(wheel.parent), "--report",
         str(tmp_path / "report.json"), str(wheel)],
        capture_output=True, text=True, env=_clean_env(), timeout=SUBPROCESS_TIMEOUT_S)


@pytest.mark.slow
def test_install_keeps_another_torch(tmp_path, wheel):
    result = _dry_run(tmp_path, wheel, "2.5.1")
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert [item["metadata"]["name"] for item in report["install"]] == ["gnnforge"]


@pytest.mark.slow
def test_install_refuses_a_torch_below_the_bound(tmp_path, wheel):
    result = _dry_run(tmp_path, wheel, "2.3.1")
    assert result.returncode != 0
    assert "torch>=2.4" in result.stderr.replace(" ", ""), result.stderr
