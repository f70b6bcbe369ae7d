"""benchmarks/gpu.py on a machine without a GPU: one line saying why, exit status 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests._timeouts import SUBPROCESS_TIMEOUT_S

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_without_gpu_it_says_why_and_exits_zero():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu.py")],
                            capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    assert lines[0].startswith("benchmarks/gpu.py: nothing measured, no CUDA device")


def test_unknown_section_is_named():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu.py"),
                             "--sections", "spmm,warp"], capture_output=True, text=True,
                            timeout=SUBPROCESS_TIMEOUT_S, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 2
    assert "'warp'" in result.stdout


@pytest.mark.slow
def test_cpu_dry_run_prints_every_row_without_errors():
    """The GPU script's own plumbing (peers, tables, training models) on tiny CPU inputs."""
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu.py"),
                             "--cpu-dry-run", "--sections", "spmm,kernels,train",
                             "--repeats", "1", "--warmup", "0"],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    # header + rows: copy_u_sum (fwd, fwd+bwd), five other kernels, three models
    assert len(rows) == (1 + 2) + (1 + 5) + (1 + 3), result.stdout
    assert "error:" not in result.stdout and "failed" not in result.stdout, result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("pyg", ["importable", "broken"])
def test_cpu_dry_run_of_the_banded_and_gin_sections(tmp_path, pyg):
    """Banded fp32 and bf16 rows; the GIN row runs `gnnforge train --compile`'s step
    (StaticBatch packs, CompiledLoss, aot_eager here): one frame, no breaks, no recompiles.
    Where PyG cannot import, its column is skipped with the reason printed."""
    path = str(ROOT)
    if pyg == "broken":
        (tmp_path / "torch_geometric").mkdir()
        (tmp_path / "torch_geometric" / "__init__.py").write_text(
            "raise ImportError('broken for the test')\n")
        path = f"{tmp_path}{os.pathsep}{ROOT}"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu.py"),
                             "--cpu-dry-run", "--sections", "banded,gin",
                             "--repeats", "1", "--warmup", "0"],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PYTHONPATH": path})
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) == (1 + 2) + (1 + 1), result.stdout  # banded fp32, bf16; one GIN row
    assert "compile: frames=1 graph_breaks=0 recompiles=0" in result.stdout, result.stdout
    gin = rows[-1].split(" | ")
    if pyg == "broken":
        assert gin[2] == "skipped" and "PyG column skipped: torch_geometric does not import " \
            "(broken for the test)" in result.stdout, result.stdout
    else:
        float(gin[2])
        assert "skipped" not in result.stdout, result.stdout
    assert "error:" not in result.stdout and "failed" not in result.stdout, result.stdout
