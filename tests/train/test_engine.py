"""The loop with a scripted task: early stopping, best-epoch restore, CSV/JSON logs, atomic
checkpoints, and a resume that refuses a checkpoint from another task."""

from __future__ import annotations

import csv
import json
import sys

import pytest
import torch
from torch import nn

from gnnforge.train import TrainConfig, fit
from gnnforge.train._checkpoint import load_checkpoint, save_checkpoint


class ScriptedTask:
    """A linear model whose validation metric follows a script, one value per epoch."""

    name = "scripted"
    metric = "val_loss"
    higher_is_better = False
    items = "nodes"

    def __init__(self, script):
        self.script, self.epoch = list(script), 0
        self.x = torch.randn(8, 3, generator=torch.Generator().manual_seed(0))

    def build_model(self):
        return nn.Linear(3, 1)

    def start_epoch(self, epoch):
        self.epoch = epoch
        return 2

    def batch(self, index):
        return self.x[index * 4:(index + 1) * 4]

    def loss(self, model, batch):
        return model(batch).square().mean(), batch.shape[0]

    def evaluate(self, model, split):
        if split == "test":
            return {"test_weight": float(model.weight.detach().sum())}
        return {"val_loss": self.script[self.epoch]}

    def epoch_stats(self):
        return {"padding": 0.25}

    def describe(self):
        return [("dataset", "scripted")]

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def test_early_stopping_restores_the_best_epoch(tmp_path):
    config = TrainConfig(task="graph", epochs=10, patience=2, progress=False,
                         out_dir=str(tmp_path))
    lines = []
    summary = fit(config, ScriptedTask([5.0, 3.0, 4.0, 3.5, 1.0, 0.5]), printer=lines.append)
    assert summary["epochs run"] == 4 and summary["stopped early"] == "yes"
    assert summary["best epoch"] == 2 and summary["best val_loss"] == 3.0
    state = load_checkpoint(tmp_path / "checkpoint.pt")
    best_weight = float(state["best_model"]["weight"].sum())
    assert summary["final test_weight (best epoch)"] == pytest.approx(best_weight)
    rows = list(csv.DictReader(open(tmp_path / "metrics.csv")))
    assert [float(r["val_loss"]) for r in rows] == [5.0, 3.0, 4.0, 3.5]
    assert set(rows[0]) >= {"epoch", "train_loss", "val_loss", "padding", "nodes_per_s"}
    document = json.loads((tmp_path / "metrics.json").read_text())
    assert len(document["epochs"]) == 4 and document["summary"]["best epoch"] == 2
    assert any("gnnforge train: scripted" in line for line in lines)


def test_resume_refuses_another_tasks_checkpoint(tmp_path):
    fit(TrainConfig(task="graph", epochs=1, progress=False, out_dir=str(tmp_path)),
        ScriptedTask([1.0]), printer=lambda *_: None)
    other = TrainConfig(task="graph", epochs=2, seed=7, resume=True, progress=False,
                        out_dir=str(tmp_path))
    with pytest.raises(ValueError, match="was written by task='graph' seed=0"):
        fit(other, ScriptedTask([1.0, 1.0]), printer=lambda *_: None)


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"value": torch.tensor([1])})

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError):
        save_checkpoint(path, {"value": torch.tensor([2])})
    assert torch.equal(load_checkpoint(path)["value"], torch.tensor([1]))
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]  # no temporary left


class CountingTask(ScriptedTask):
    """Ten steps an epoch of 3 to 5 rows; notes each step's loss and the loss reads
    (`.item()`, `float()`) made before it."""

    def __init__(self, script, reads):
        super().__init__(script)
        self.x = torch.randn(40, 3, generator=torch.Generator().manual_seed(1))
        self.reads, self.seen = reads, []

    def start_epoch(self, epoch):
        self.epoch = epoch
        self.seen.append([])
        return 10

    def batch(self, index):
        return self.x[index * 4:index * 4 + 3 + index % 3]

    def loss(self, model, batch):
        loss, items = super().loss(model, batch)
        self.seen[-1].append((loss.detach().clone(), items, self.reads[0]))
        return loss, items


def test_the_epoch_loss_is_read_once_and_equals_the_host_sum(tmp_path, monkeypatch):
    """The step keeps its loss on the device (a read is a host sync that stalls a GPU): the
    loop makes no `.item()` or `float()` between steps (Adam reads its CPU step counter,
    not counted), and the epoch's train_loss is exactly the old per-step host sum,
    sum(float(loss) * items) / items."""
    reads = [0]
    for name in ("item", "__float__"):
        original = getattr(torch.Tensor, name)

        def counted(tensor, original=original):
            reads[0] += sys._getframe(1).f_globals["__name__"] == "gnnforge.train._engine"
            return original(tensor)
        monkeypatch.setattr(torch.Tensor, name, counted)
    task = CountingTask([3.0, 2.0, 1.0], reads)
    fit(TrainConfig(task="graph", epochs=3, progress=False, out_dir=str(tmp_path)), task,
        printer=lambda *_: None)
    monkeypatch.undo()
    epochs = json.loads((tmp_path / "metrics.json").read_text())["epochs"]
    for row, steps in zip(epochs, task.seen, strict=True):
        assert len({before for _, _, before in steps}) == 1  # nothing read within the epoch
        total = 0.0
        for loss, items, _ in steps:
            total += float(loss) * items
        assert row["train_loss"] == total / sum(items for _, items, _ in steps)
