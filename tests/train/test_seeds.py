"""`--seeds N`: every seed runs in its own folder, the summary is mean ± std, results go to
CSV or JSON, and a recipe run ends with its one-line verdict."""

from __future__ import annotations

import csv
import json
import re

import pytest

from gnnforge.cli import main
from gnnforge.train import ConfigError, load_config
from gnnforge.train._seeds import recipe_line, run_seeds, summarize, write_results

RECIPE_LINE = re.compile(r"^recipe (\S+): mean=(\d+\.\d\d) std=(\d+\.\d\d) over (\d+) seeds "
                         r"\(published (\d+\.\d|none)\)$")


def _fake(values):
    """build_task and fit stand-ins: seed s scores values[s] without training."""
    seen = []

    def build_task(config):
        seen.append((config.seed, config.out_dir))
        return config.seed

    def fit(config, task, printer):
        return {"epochs run": 5, "best epoch": 3,
                "final test_accuracy (best epoch)": values[task]}
    return build_task, fit, seen


def test_seeds_run_in_their_own_folders_and_summarise(tmp_path):
    build_task, fit, seen = _fake({2: 0.80, 3: 0.82, 4: 0.84})
    config = load_config({"task": "node", "seed": 2, "out_dir": str(tmp_path)})
    lines = []
    runs = run_seeds(config, 3, build_task, fit, printer=lines.append)
    assert seen == [(s, str(tmp_path / f"seed-{s}")) for s in (2, 3, 4)]
    assert [run.value for run in runs] == pytest.approx([80.0, 82.0, 84.0])
    mean, std = summarize(runs)
    assert (mean, std) == pytest.approx((82.0, 2.0))   # sample standard deviation
    assert lines[0].startswith("seed 2 (1/3): test_accuracy 80.00, best epoch 3 of 5")
    line = recipe_line("gcn-cora", runs, "81.5")
    assert line == "recipe gcn-cora: mean=82.00 std=2.00 over 3 seeds (published 81.5)"
    assert RECIPE_LINE.match(line)
    write_results(tmp_path / "r.csv", runs, {})
    rows = list(csv.DictReader(open(tmp_path / "r.csv")))
    assert [row["seed"] for row in rows] == ["2", "3", "4"]
    write_results(tmp_path / "r.json", runs, {"recipe": "gcn-cora"})
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["recipe"] == "gcn-cora" and data["std"] == pytest.approx(2.0)
    with pytest.raises(ConfigError, match="--seeds must be >= 1"):
        run_seeds(config, 0, build_task, fit)


@pytest.mark.parametrize("argv, message", [
    (["--recipe", "gcn-cora", "--config", "x.toml"], "drop --config x.toml"),
    (["--recipe", "nope"], "no recipe 'nope'"),
    (["--seeds", "2", "--results", "out.txt"], "--results out.txt: the suffix names"),
    (["--results", "out.csv"], "--results writes the per-seed table: add --seeds N"),
    (["--task", "varmisuse", "--seeds", "2"], "not to --task varmisuse"),
])
def test_bad_seed_and_recipe_flags_are_one_line_errors(argv, message, capsys):
    assert main(["train", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_recipes_command_lists_every_recipe(capsys):
    assert main(["recipes"]) == 0
    out = capsys.readouterr().out
    assert "gcn-cora" in out and "81.5" in out and "Kipf & Welling" in out
    assert main(["recipes", "gat-cora"]) == 0
    assert "attention_dropout = 0.6" in capsys.readouterr().out


def test_recipe_cli_ends_with_the_verdict_line(tmp_path, capsys):
    pytest.importorskip("gnnforge.data").shared_datasets_dir() or pytest.skip("no datasets")
    code = main(["train", "--recipe", "gcn-cora", "--seeds", "2", "--epochs", "3",
                 "--no-progress", "--out-dir", str(tmp_path), "--results",
                 str(tmp_path / "seeds.csv")])
    assert code == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    match = RECIPE_LINE.match(last)
    assert match and match.group(1) == "gcn-cora" and match.group(4) == "2", last
    assert match.group(5) == "81.5"
    assert len(list(csv.DictReader(open(tmp_path / "seeds.csv")))) == 2
