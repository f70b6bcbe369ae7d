"""Xu et al.'s GIN protocol: the step learning rate, random batches, folds without a
validation fold, the fold-mean selection and its CLI options."""

from __future__ import annotations

import json
import re

import pytest
import torch

from gnnforge.cli import main
from gnnforge.train import ConfigError, load_config
from gnnforge.train._fold_mean import fold_mean, last_epoch
from gnnforge.train._folds import fold_indices
from gnnforge.train._graph_task import random_batches
from gnnforge.train._lr_schedule import step_lr
from gnnforge.train._seeds import SeedRun, outcome, recipe_line, seeds_table, write_results

RECIPE_LINE = re.compile(r"^recipe (\S+): mean=(\d+\.\d\d) std=(\d+\.\d\d) over (\d+) seeds "
                         r"\(published (\d+\.\d|none)\)$")


def test_step_lr_equals_torch_steplr():
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=50, gamma=0.5)
    for epoch in range(350):
        assert step_lr(0.01, epoch, 50, 0.5) == pytest.approx(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert step_lr(0.01, 0, 50, 0.5) == 0.01 and step_lr(0.01, 49, 50, 0.5) == 0.01
    assert step_lr(0.01, 50, 50, 0.5) == 0.005 and step_lr(0.01, 349, 50, 0.5) == 0.01 / 64
    assert step_lr(0.01, 1000, 0, 0.5) == 0.01                   # step 0: constant
    with pytest.raises(ValueError, match="epoch and step must be >= 0"):
        step_lr(0.01, -1, 50, 0.5)


# A hand-made table: 3 folds x 4 epochs of test accuracy (percent).
CURVES = [[50.0, 70.0, 80.0, 60.0],
          [60.0, 90.0, 70.0, 80.0],
          [70.0, 80.0, 90.0, 70.0]]


def test_fold_mean_picks_the_epoch_with_the_best_mean_over_folds():
    chosen = fold_mean(CURVES)
    # Epoch means: 60, 80, 80, 70: the first of the tied best (epoch 2).
    assert chosen.epoch == 2 and chosen.values == (70.0, 90.0, 80.0)
    assert chosen.mean == pytest.approx(80.0) and chosen.std == pytest.approx(10.0)
    # Not the mean of each fold's own best epoch (86.67): one epoch for every fold.
    assert chosen.mean < sum(max(curve) for curve in CURVES) / 3
    last = last_epoch(CURVES)
    assert last.epoch == 4 and last.values == (60.0, 80.0, 70.0)
    assert last.mean == pytest.approx(70.0) and last.std == pytest.approx(10.0)
    one = fold_mean([[10.0, 30.0, 20.0]])
    assert (one.epoch, one.mean, one.std) == (2, 30.0, 0.0)


def test_fold_mean_refuses_ragged_or_missing_curves():
    with pytest.raises(ValueError, match="fold 1 has 2, fold 0 has 4"):
        fold_mean([CURVES[0], [1.0, 2.0]])
    with pytest.raises(ValueError, match="needs at least one fold's curve"):
        last_epoch([])


def _runs(curves):
    return [SeedRun(seed, "test_accuracy", curve[-1], len(curve), len(curve), 1.0,
                    tuple(curve)) for seed, curve in enumerate(curves)]


def test_seeds_report_the_fold_mean_epoch_and_the_last(tmp_path):
    config = load_config({"task": "graph", "dataset": "mutag", "folds": 3,
                          "selection": "fold-mean", "patience": 0, "epochs": 4})
    runs = _runs(CURVES)
    result = outcome(config, runs)
    assert (result.mean, result.std) == pytest.approx((80.0, 10.0))
    line = recipe_line("gin-mutag", runs, "89.4", result)
    assert line == "recipe gin-mutag: mean=80.00 std=10.00 over 3 seeds (published 89.4)"
    assert RECIPE_LINE.match(line)
    lines = result.lines(config.epochs)
    assert "epoch 2 of 4: 80.00 ± 10.00" in lines[0] and "optimistic" in lines[0]
    assert lines[1] == "last epoch (no selection): 70.00 ± 10.00"
    table = seeds_table(runs, result)
    assert "mean ± std at epoch 2" in table and "mean ± std, last epoch" in table
    write_results(tmp_path / "r.json", runs, {}, result)
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["chosen_epoch"] == 2 and data["last_epoch_mean"] == pytest.approx(70.0)
    assert data["runs"][1]["curve"] == CURVES[1]
    write_results(tmp_path / "r.csv", runs, {}, result)
    assert "value_at_chosen_epoch" in (tmp_path / "r.csv").read_text().splitlines()[0]
    # Without fold-mean the runs' own values are reported.
    plain = load_config({"task": "graph", "dataset": "mutag", "folds": 3})
    assert outcome(plain, runs).mean == pytest.approx(70.0)


def test_random_batches_are_seeded_distinct_and_fresh_each_step():
    first = random_batches(100, 32, 50, seed=3, epoch=7)
    assert first == random_batches(100, 32, 50, seed=3, epoch=7)
    assert first != random_batches(100, 32, 50, seed=3, epoch=8)
    assert first != random_batches(100, 32, 50, seed=4, epoch=7)
    assert len(first) == 50 and all(len(set(b)) == 32 and max(b) < 100 for b in first)
    assert len({tuple(b) for b in first}) == 50
    assert sorted(random_batches(5, 32, 1, seed=0, epoch=0)[0]) == list(range(5))


def test_folds_without_a_validation_fold_train_on_the_rest():
    labels = torch.tensor([0] * 30 + [1] * 12)
    for seed in range(5):
        split = fold_indices(labels, 5, seed, validation=False)
        held = fold_indices(labels, 5, seed)
        assert split["val"] == [] and split["test"] == held["test"]
        assert sorted(split["train"]) == sorted(held["train"] + held["val"])


@pytest.mark.parametrize("overrides, message", [
    ({"graph_model": "gin"}, "--graph-model must be one of ('molecule-gin', 'gin-0'), got 'gin'"),
    ({"steps_per_epoch": -1}, "--steps-per-epoch must be >= 0"),
    ({"lr_step_epochs": -5}, "--lr-step-epochs must be >= 0"),
    ({"lr_step_epochs": 50, "lr_gamma": 0.0}, "--lr-gamma must lie in (0, 1], got 0.0"),
    ({"lr_step_epochs": 50, "lr_gamma": 2.0}, "--lr-gamma must lie in (0, 1], got 2.0"),
    ({"lr_gamma": 0.1}, "give --lr-step-epochs N as well"),
    ({"selection": "test"}, "--selection must be one of ('val', 'fold-mean'), got 'test'"),
    ({"selection": "fold-mean", "patience": 0}, "add --folds K"),
    ({"selection": "fold-mean", "folds": 10}, "use --patience 0 (got --patience 10)"),
    ({"steps_per_epoch": 50, "compile": True}, "--steps-per-epoch draws batches of varying"),
    ({"task": "node", "graph_model": "gin-0"}, "--graph-model applies to --task graph only"),
    ({"task": "node", "steps_per_epoch": 5}, "--steps-per-epoch applies to --task graph"),
    ({"task": "link", "selection": "fold-mean"}, "--selection applies to --task graph only"),
])
def test_bad_protocol_options_are_named(overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config({"task": "graph", **overrides})


def test_lr_schedule_applies_to_every_task():
    config = load_config({"task": "node", "lr_step_epochs": 10, "lr_gamma": 0.1})
    assert (config.lr_step_epochs, config.lr_gamma) == (10, 0.1)


@pytest.mark.parametrize("argv, message", [
    (["--dataset", "mutag", "--folds", "10", "--selection", "fold-mean", "--patience", "0"],
     "run the folds with --seeds K"),
    (["--dataset", "mutag", "--graph-model", "GIN0"], "--graph-model must be one of"),
    (["--dataset", "mutag", "--lr-gamma", "0.3"], "give --lr-step-epochs N as well"),
])
def test_cli_errors_are_one_line(argv, message, capsys):
    assert main(["train", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_gin_mutag_recipe_runs_the_protocol(tmp_path, capsys):
    """Two folds of the recipe, 2 epochs of 3 random batches, lr halved after epoch 1:
    the per-epoch test accuracies are recorded, and the verdict line is the fold-mean's."""
    pytest.importorskip("gnnforge.data").shared_datasets_dir() or pytest.skip("no datasets")
    code = main(["train", "--recipe", "gin-mutag", "--seeds", "2", "--epochs", "2",
                 "--steps-per-epoch", "3", "--lr-step-epochs", "1", "--no-progress",
                 "--out-dir", str(tmp_path), "--results", str(tmp_path / "r.json")])
    assert code == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert RECIPE_LINE.match(out[-1]) and "(published 89.4)" in out[-1], out[-1]
    assert any(line.startswith("last epoch (no selection): ") for line in out)
    data = json.loads((tmp_path / "r.json").read_text())
    assert [len(run["curve"]) for run in data["runs"]] == [2, 2]
    assert data["mean"] == pytest.approx(
        max((a + b) / 2 for a, b in zip(*(run["curve"] for run in data["runs"]))))
    history = json.loads((tmp_path / "seed-0" / "metrics.json").read_text())["epochs"]
    assert [row["lr"] for row in history] == pytest.approx([0.01, 0.005])
    assert "test_accuracy" in history[0] and "val_accuracy" not in history[0]
    summary = json.loads((tmp_path / "seed-0" / "metrics.json").read_text())["summary"]
    assert summary["graphs (train/val/test)"] == "169/0/19"    # 9 folds train
