"""Bad runs fail at once with an error naming the problem: a corrupt checkpoint names its
file, `--lr nan` and an unwritable `--out-dir` are refused before any training."""

from __future__ import annotations

import math

import pytest
import torch

from gnnforge.cli import main
from gnnforge.train import ConfigError, TrainConfig, fit, load_config
from gnnforge.train._checkpoint import CheckpointError, load_checkpoint, save_checkpoint

from .test_engine import ScriptedTask

# ----------------------------------------------------------------------------- item 12


@pytest.mark.parametrize("content", [b"", b"not a checkpoint at all", None],
                         ids=["empty", "garbage", "truncated"])
def test_corrupt_checkpoint_names_the_file(tmp_path, content):
    path = tmp_path / "checkpoint.pt"
    fit(TrainConfig(task="graph", epochs=1, progress=False, out_dir=str(tmp_path)),
        ScriptedTask([1.0]), printer=lambda *_: None)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if content is None else content)
    with pytest.raises(CheckpointError, match=rf"{path}: not a readable checkpoint"):
        load_checkpoint(path)
    resumed = TrainConfig(task="graph", epochs=2, resume=True, progress=False,
                          out_dir=str(tmp_path))
    with pytest.raises(CheckpointError, match="delete it or use another --out-dir"):
        fit(resumed, ScriptedTask([1.0, 1.0]), printer=lambda *_: None)


def test_checkpoint_without_the_runs_state_names_what_is_missing(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"model": {}, "config": {"task": "graph", "seed": 0}})
    resumed = TrainConfig(task="graph", epochs=2, resume=True, progress=False,
                          out_dir=str(tmp_path))
    with pytest.raises(CheckpointError, match=rf"{path}: .*missing .*'optimizer'"):
        fit(resumed, ScriptedTask([1.0, 1.0]), printer=lambda *_: None)


def test_cli_reports_a_corrupt_checkpoint_in_one_line(tmp_path, capsys):
    (tmp_path / "checkpoint.pt").write_bytes(b"garbage")
    status = main(["train", "--task", "node", "--dataset", "sbm", "--epochs", "1",
                   "--no-progress", "--resume", "--out-dir", str(tmp_path)])
    error = capsys.readouterr().err
    assert status == 2 and str(tmp_path / "checkpoint.pt") in error
    assert len(error.strip().splitlines()) == 1 and "Traceback" not in error


# ----------------------------------------------------------------------------- item 15


@pytest.mark.parametrize("name, value", [("lr", math.nan), ("lr", math.inf),
                                         ("weight_decay", math.nan), ("dropout", math.nan),
                                         ("weight_decay", -1.0)])
def test_non_finite_or_negative_rates_are_refused(name, value):
    with pytest.raises(ConfigError, match=rf"--{name.replace('_', '-')} must "):
        load_config({name: value})


class CountingTask(ScriptedTask):
    def __init__(self, script):
        super().__init__(script)
        self.epochs_started = 0

    def start_epoch(self, epoch):
        self.epochs_started += 1
        return super().start_epoch(epoch)


def test_unwritable_out_dir_fails_before_training(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    task = CountingTask([1.0])
    config = TrainConfig(task="graph", epochs=1, progress=False, out_dir=str(blocker / "run"))
    with pytest.raises(ConfigError, match=rf"--out-dir {blocker / 'run'}: cannot write"):
        fit(config, task, printer=lambda *_: None)
    assert task.epochs_started == 0


@pytest.mark.parametrize("flags", [["--lr", "nan"], ["--out-dir", "{blocker}/run"]])
def test_cli_refuses_before_loading_data(tmp_path, capsys, monkeypatch, flags):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    from gnnforge.train import _cli

    def no_task(config):
        raise AssertionError("the task was built: the check came too late")

    monkeypatch.setattr(_cli, "build_task", no_task)
    flags = [flag.format(blocker=blocker) for flag in flags]
    status = main(["train", "--task", "node", "--dataset", "sbm", "--no-progress",
                   "--out-dir", str(tmp_path / "out"), *flags])
    error = capsys.readouterr().err
    assert status == 2 and "Traceback" not in error
    assert ("--lr must be a finite number > 0" in error) or ("cannot write" in error)
