"""The two cheapest recipes still reach their accuracy (issue 33): gcn-cora and gat-cora
on Planetoid Cora with seed 0. Seeded runs are deterministic, so a floor below the
measured value (docs/recipes.md) catches a recipe or layer regression without flakiness;
nothing here is timed."""

from __future__ import annotations

import pytest

from gnnforge.data import shared_datasets_dir
from gnnforge.train import NodeTask, fit, load_config
from gnnforge.train._recipes import load_recipe

# One thread, as `gnnforge train` runs (tests/conftest.py).
pytestmark = [pytest.mark.skipif(shared_datasets_dir() is None,
                                 reason="needs the shared datasets (Planetoid Cora)"),
              pytest.mark.usefixtures("one_thread")]


def _test_accuracy(name: str, tmp_path, **overrides) -> float:
    options = {"progress": False, "out_dir": str(tmp_path / name), "seed": 0, **overrides}
    config = load_config(options, load_recipe(name).path)
    summary = fit(config, NodeTask(config), printer=lambda *_: None)
    return 100 * summary["final test_accuracy (best epoch)"]


def test_gcn_cora_reaches_81(tmp_path):
    # Measured 82.5 for seed 0 (10 seeds: docs/recipes.md); published 81.5.
    accuracy = _test_accuracy("gcn-cora", tmp_path)
    assert accuracy >= 81.0, accuracy


@pytest.mark.slow
def test_gat_cora_reaches_81_in_100_epochs(tmp_path):
    # The full recipe (the GAT code's early stopping, patience 100) trains seed 0 for
    # about 600 epochs (docs/recipes.md); for time this run stops after 100 and tests the
    # epoch the same rule keeps among them.
    accuracy = _test_accuracy("gat-cora", tmp_path, epochs=100)
    assert accuracy >= 81.0, accuracy
