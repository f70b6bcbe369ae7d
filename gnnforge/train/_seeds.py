"""`gnnforge train --seeds N`: the same run under N seeds, summarised as mean ± std.

Seed i trains with `config.seed + i` (model initialisation, dropout, batch order and,
for the randomly split datasets, the split) in its own `OUT_DIR/seed-S` folder. Each run
prints one line; the end is a per-seed table, `mean ± std` of the test metric (accuracies
in percent) and, with a recipe, the line `recipe NAME: mean=M std=S over N seeds
(published P)`. `--results FILE.csv|FILE.json` also writes the per-seed rows.

With `--selection fold-mean` (`--folds K`, seeds over the folds) every run records its
test accuracy after each epoch, and M and S are taken at the one epoch whose accuracy
averaged over the runs is best (Xu et al.'s protocol, optimistic: the epoch is chosen on
the test folds); the output also gives the last epoch's mean ± std, which chooses
nothing (gnnforge/train/_fold_mean.py).
"""

from __future__ import annotations

import csv
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gnnforge.train._config import ConfigError, TrainConfig
from gnnforge.train._fold_mean import Selected, fold_mean, last_epoch
from gnnforge.train._log import format_table

__all__ = ["Outcome", "SeedRun", "outcome", "recipe_line", "run_seeds", "run_seeds_command",
           "summarize", "write_results"]

RESULT_SUFFIXES = (".csv", ".json")


@dataclass(frozen=True)
class SeedRun:
    """One seed's outcome: the test metric (percent for accuracies), the best epoch and
    the wall-clock seconds of the run (data loading, planning, training, evaluation)."""

    seed: int
    metric: str
    value: float
    best_epoch: int
    epochs_run: int
    seconds: float
    # --selection fold-mean: the test metric after every epoch (percent for accuracies).
    curve: tuple[float, ...] = ()


def check_results_path(path: str | None) -> None:
    """Refuse a --results file whose format is unknown, before anything trains."""
    if path is not None and Path(path).suffix.lower() not in RESULT_SUFFIXES:
        raise ConfigError(f"--results {path}: the suffix names the format; use one of "
                          f"{RESULT_SUFFIXES}")


def _test_metric(summary: dict[str, Any]) -> tuple[str, float]:
    """(name, value) of the summary's test metric; accuracies in percent."""
    for key, value in summary.items():
        if key.startswith("final test_"):
            name = key.removeprefix("final ").split(" ")[0]
            return (name, 100.0 * value) if "accuracy" in name else (name, value)
    raise ValueError(f"--seeds: the run's summary has no test metric (keys: {list(summary)})")


def run_seeds(config: TrainConfig, count: int, build_task: Callable[[TrainConfig], Any],
              fit: Callable[..., dict[str, Any]], printer=print) -> list[SeedRun]:
    """Train `config` under seeds config.seed, ..., config.seed + count - 1.

    `build_task` and `fit` are the CLI's (passed in so that this module imports no torch).
    """
    if count < 1:
        raise ConfigError(f"--seeds must be >= 1, got {count}")
    runs = []
    for index in range(count):
        seed = config.seed + index
        seeded = replace(config, seed=seed, out_dir=str(Path(config.out_dir) / f"seed-{seed}"))
        start = time.perf_counter()
        summary = fit(seeded, build_task(seeded), printer=lambda *_: None)
        name, value = _test_metric(summary)
        scale = 100.0 if "accuracy" in name else 1.0
        curve = tuple(scale * v for v in summary.get(f"{name} per epoch", ()))
        run = SeedRun(seed, name, value, int(summary["best epoch"]),
                      int(summary["epochs run"]), time.perf_counter() - start, curve)
        runs.append(run)
        printer(f"seed {seed} ({index + 1}/{count}): {name} {value:.2f}, best epoch "
                f"{run.best_epoch} of {run.epochs_run}, {run.seconds:.1f} s")
    return runs


def summarize(runs: list[SeedRun]) -> tuple[float, float]:
    """(mean, sample standard deviation) of the runs' values (std 0 for one run)."""
    values = [run.value for run in runs]
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


@dataclass(frozen=True)
class Outcome:
    """What a set of runs reports: `mean` ± `std` under `selection`; for 'fold-mean' also
    the chosen epoch (`chosen`) and the last epoch's accuracies (`last`)."""

    selection: str
    mean: float
    std: float
    chosen: Selected | None = None
    last: Selected | None = None

    def lines(self, epochs: int) -> list[str]:
        """The fold-mean explanation (nothing for 'val')."""
        if self.chosen is None or self.last is None:
            return []
        folds = len(self.chosen.values)
        return [f"fold-mean selection (Xu et al.'s protocol; optimistic: the epoch is chosen "
                f"by the test accuracy averaged over the {folds} folds): epoch "
                f"{self.chosen.epoch} of {epochs}: {self.chosen.mean:.2f} ± "
                f"{self.chosen.std:.2f}",
                f"last epoch (no selection): {self.last.mean:.2f} ± {self.last.std:.2f}"]


def outcome(config: TrainConfig, runs: list[SeedRun]) -> Outcome:
    """The runs' reported mean ± std as --selection says.

    Raises:
        ValueError: 'fold-mean' runs without per-epoch curves, or with curves of different
            lengths.
    """
    if config.selection != "fold-mean":
        return Outcome(config.selection, *summarize(runs))
    curves = [run.curve for run in runs]
    chosen, last = fold_mean(curves), last_epoch(curves)
    return Outcome("fold-mean", chosen.mean, chosen.std, chosen, last)


def seeds_table(runs: list[SeedRun], result: Outcome | None = None) -> str:
    """The per-seed table and the mean ± std row."""
    result = result or Outcome("val", *summarize(runs))
    metric = runs[0].metric
    chosen = result.chosen
    if chosen is None:
        rows = [(f"seed {run.seed}", f"{run.value:.2f}  (best epoch {run.best_epoch}, "
                                     f"{run.seconds:.1f} s)") for run in runs]
        rows.append(("mean ± std", f"{result.mean:.2f} ± {result.std:.2f}"))
    else:
        rows = [(f"seed {run.seed}", f"{value:.2f} at epoch {chosen.epoch}, {run.value:.2f} "
                                     f"last  ({run.seconds:.1f} s)")
                for run, value in zip(runs, chosen.values)]
        rows.append((f"mean ± std at epoch {chosen.epoch}",
                     f"{result.mean:.2f} ± {result.std:.2f}"))
        rows.append(("mean ± std, last epoch", f"{result.last.mean:.2f} ± "
                                               f"{result.last.std:.2f}"))
    unit = " (%)" if "accuracy" in metric else ""
    return format_table(rows, f"{metric}{unit} over {len(runs)} seeds")


def recipe_line(name: str, runs: list[SeedRun], published: str,
                result: Outcome | None = None) -> str:
    """The last line of a recipe run, for people and for scripts that grep it; `result`
    (default: the runs' values) gives the mean and std."""
    mean, std = summarize(runs) if result is None else (result.mean, result.std)
    return (f"recipe {name}: mean={mean:.2f} std={std:.2f} over {len(runs)} seeds "
            f"(published {published})")


def write_results(path: str | Path, runs: list[SeedRun], extra: dict[str, Any],
                  result: Outcome | None = None) -> None:
    """The per-seed rows as CSV (one row per seed; fold-mean: the value at the chosen
    epoch beside the last one) or JSON (rows with their curves, mean, std and `extra`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    result = result or Outcome("val", *summarize(runs))
    rows = [dict(run.__dict__) for run in runs]
    if path.suffix.lower() == ".csv":
        for row, run in zip(rows, runs):
            del row["curve"]
            if result.chosen is not None:
                row["value_at_chosen_epoch"] = run.curve[result.chosen.epoch - 1]
        with open(path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        return
    chosen = {} if result.chosen is None else {
        "selection": "fold-mean", "chosen_epoch": result.chosen.epoch,
        "last_epoch_mean": result.last.mean, "last_epoch_std": result.last.std}
    for row in rows:
        row["curve"] = list(row["curve"])
    path.write_text(json.dumps({**extra, "mean": result.mean, "std": result.std, **chosen,
                                "runs": rows}, indent=2) + "\n")


def run_seeds_command(config: TrainConfig, count: int, recipe: Any, results: str | None,
                      build_task: Callable[[TrainConfig], Any],
                      fit: Callable[..., dict[str, Any]], printer=print) -> int:
    """`gnnforge train [--recipe NAME] --seeds N [--results FILE]`: run, print the table,
    write the results, end with the recipe line when there is a recipe.

    Raises:
        ConfigError: --task varmisuse (its runner has no per-seed summary) or a launch of
            several processes (each would run every seed).
    """
    if config.task == "varmisuse":
        raise ConfigError("--seeds and --recipe apply to the graph, node and link tasks, not "
                          "to --task varmisuse")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ConfigError("--seeds and --recipe run one process; launch them without torchrun")
    if recipe is not None:
        printer(f"recipe {recipe.name}: {recipe.summary} (published {recipe.published_text()}"
                f", {recipe.source})")
        if recipe.note:
            printer(f"recipe {recipe.name}: note: {recipe.note}")
    runs = run_seeds(config, count, build_task, fit, printer)
    result = outcome(config, runs)
    printer(seeds_table(runs, result))
    for line in result.lines(config.epochs):
        printer(line)
    if results is not None:
        extra = {"config": config.to_dict(), "recipe": None if recipe is None else recipe.name,
                 "published": None if recipe is None else recipe.published}
        write_results(results, runs, extra, result)
        printer(f"per-seed results written to {results}")
    if recipe is not None:
        printer(recipe_line(recipe.name, runs, recipe.published_text(), result))
    return 0
