"""`gnnforge train` under torchrun with two gloo processes: with DDP the ranks split each
epoch's batches; with --distributed cooperative they share every sampled minibatch; both
train in lock step, and rank 0 writes the checkpoint and the logs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gnnforge.train._checkpoint import load_checkpoint
from tests._timeouts import SUBPROCESS_TIMEOUT_S

pytest.importorskip("rdkit")
ROOT = Path(__file__).resolve().parents[2]


def _torchrun_two_processes() -> list[str]:
    """torchrun (next to this Python, else on PATH) for two local processes; skips without."""
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists() and shutil.which("torchrun") is None:
        pytest.skip("torchrun not found")
    return [str(torchrun if torchrun.exists() else "torchrun"), "--standalone",
            "--nproc_per_node", "2"]


@pytest.mark.slow
@pytest.mark.distributed
def test_ddp_two_processes(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    command = [*_torchrun_two_processes(), "-m", "gnnforge", "train", "--limit", "120",
               "--batch-graphs", "16", "--epochs", "2", "--hidden", "16", "--layers", "2",
               "--no-progress", "--out-dir", str(tmp_path)]
    result = subprocess.run(command, env=env, capture_output=True, text=True,
                            timeout=SUBPROCESS_TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-2000:]
    history = json.loads((tmp_path / "metrics.json").read_text())["epochs"]
    assert len(history) == 2 and history[-1]["val_mae"] < history[0]["val_mae"] * 2
    assert load_checkpoint(tmp_path / "checkpoint.pt")["progress"]["epoch"] == 2
    assert result.stdout.count("epoch   1/2") == 1  # only rank 0 prints


@pytest.mark.slow
@pytest.mark.distributed
def test_cooperative_cli_two_processes(tmp_path):
    """`torchrun -m gnnforge train --distributed cooperative`: the CLI path end to end."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    command = [*_torchrun_two_processes(), "-m", "gnnforge", "train", "--task", "node",
               "--dataset", "sbm", "--mode", "sampled", "--distributed", "cooperative",
               "--fanouts", "5,5", "--batch-size", "64", "--epochs", "2", "--no-progress",
               "--out-dir", str(tmp_path)]
    result = subprocess.run(command, env=env, capture_output=True, text=True,
                            timeout=SUBPROCESS_TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-2000:]
    history = json.loads((tmp_path / "metrics.json").read_text())["epochs"]
    assert len(history) == 2 and all(row["remote_rows_per_batch"] > 0 for row in history)
    assert result.stdout.count("epoch   1/2") == 1  # only rank 0 prints
    assert "cooperative over 2 processes" in result.stdout
