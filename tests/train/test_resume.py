"""`--resume` after SIGKILL mid-epoch ends with the same parameters and metrics as an
uninterrupted run (dropout on, so the restored RNG state matters)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from gnnforge.train._checkpoint import load_checkpoint

pytest.importorskip("rdkit")

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--limit", "150", "--batch-graphs", "16", "--epochs", "2", "--hidden", "16",
        "--layers", "2", "--dropout", "0.3", "--checkpoint-every", "1", "--no-progress",
        "--seed", "3"]
TIMING = ("train_seconds", "graphs_per_s")


def command(out_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "gnnforge", "train", *ARGS, "--out-dir", str(out_dir), *extra]


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def kill_mid_epoch(out_dir: Path) -> dict:
    process = subprocess.Popen(command(out_dir, "--step-delay", "0.25"), env=environment(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoint = out_dir / "checkpoint.pt"
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if checkpoint.exists():
                progress = load_checkpoint(checkpoint)["progress"]
                if progress["epoch"] == 1 and progress["step"] >= 2:
                    process.send_signal(signal.SIGKILL)
                    process.wait()
                    return progress
            if process.poll() is not None:
                pytest.fail("the run finished before it could be killed mid-epoch")
            time.sleep(0.05)
        pytest.fail("no mid-epoch checkpoint within 120 s")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def final_state(out_dir: Path) -> tuple[dict, list]:
    state = load_checkpoint(out_dir / "checkpoint.pt")
    history = json.loads((out_dir / "metrics.json").read_text())["epochs"]
    return state, [{k: v for k, v in row.items() if k not in TIMING} for row in history]


@pytest.mark.slow
def test_resume_after_sigkill_matches_uninterrupted_run(tmp_path):
    full, killed = tmp_path / "full", tmp_path / "killed"
    subprocess.run(command(full), env=environment(), check=True, capture_output=True)
    progress = kill_mid_epoch(killed)
    assert progress["epoch"] == 1 and 0 < progress["step"]
    assert not (killed / "metrics.json").exists() or \
        json.loads((killed / "metrics.json").read_text())["summary"] is None
    result = subprocess.run(command(killed, "--resume"), env=environment(), check=True,
                            capture_output=True, text=True)
    assert f"resumed from {killed / 'checkpoint.pt'}: epoch 2, step" in result.stdout
    reference, reference_history = final_state(full)
    resumed, resumed_history = final_state(killed)
    assert resumed_history == reference_history
    for name, value in reference["model"].items():
        assert torch.equal(value, resumed["model"][name]), name
    assert reference["progress"]["epoch"] == resumed["progress"]["epoch"] == 2
