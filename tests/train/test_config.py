"""Flags, TOML and their validation: bad values and incompatible combinations are named."""

from __future__ import annotations

import pytest

from gnnforge.cli import main
from gnnforge.train import ConfigError, TrainConfig, load_config


def test_defaults_are_the_main_job():
    config = load_config({})
    assert config == TrainConfig()
    assert config.task == "graph" and config.dataset is None


def test_toml_then_flags(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('[train]\nepochs = 4\nlr = 0.01\nfanouts = [5, 5]\nlayers = 2\n')
    config = load_config({"epochs": 7, "hidden": None}, path)
    assert (config.epochs, config.lr, config.fanouts, config.hidden) == (7, 0.01, [5, 5], 64)


@pytest.mark.parametrize("text, message", [
    ("epoch = 3\n", r"unknown keys \['epoch'\]"),
    ("epochs = 'three'\n", "epochs: expected int, got 'three'"),
    ("epochs = [\n", "not valid TOML"),
])
def test_bad_toml(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config({}, path)


@pytest.mark.parametrize("overrides, message", [
    ({"task": "nodes"}, "--task must be one of"),
    ({"task": "node", "dataset": "nci-tpsa"}, "it is a molecule set .*; use --task graph"),
    ({"task": "graph", "dataset": "pubmed"}, "use --task node --dataset pubmed"),
    ({"task": "node", "sampler": "labor"}, "--sampler needs --mode sampled"),
    ({"task": "node", "dependent": 4}, "--dependent needs --mode sampled"),
    ({"task": "graph", "sampler": "labor"}, "--sampler applies to --task node only"),
    ({"task": "node", "mode": "sampled", "fanouts": [10, 10, 10]}, "--fanouts has 3 entries"),
    ({"task": "node", "mode": "sampled", "sampler": "walk"}, "--sampler must be one of"),
    ({"epochs": 0}, "--epochs must be >= 1"),
    ({"dropout": 1.5}, "--dropout must lie in"),
    ({"task": "node", "mode": "sampled", "prefetch": 2}, "--prefetch applies to --partitioned"),
    ({"task": "node", "mode": "sampled", "cooperate": "local"},
     "--cooperate local needs --distributed cooperative"),
    ({"task": "node", "mode": "sampled", "distributed": "cooperative", "cooperate": "node"},
     "--cooperate must be one of"),
    ({"task": "node", "partitioned": "parts"}, "--partitioned trains sampled minibatches"),
    ({"task": "node", "mode": "sampled", "partitioned": "parts", "dataset": "cora"},
     "brings its own data; drop --dataset cora"),
    ({"task": "node", "mode": "sampled", "partitioned": "parts", "distributed": "cooperative",
      "partition": "metis"}, "parts come from `gnnforge partition --method`"),
])
def test_incompatible_options(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides)


def test_cli_reports_errors_cleanly(capsys):
    assert main(["train", "--task", "node", "--sampler", "labor"]) == 2
    assert "--sampler needs --mode sampled" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--epochs", "many"])
    assert "invalid int value: 'many'" in capsys.readouterr().err


def test_varmisuse_rejects_engine_only_options(capsys):
    assert main(["train", "--task", "varmisuse", "--checkpoint-every", "5"]) == 2
    assert "--task varmisuse does not take ['checkpoint_every']" in capsys.readouterr().err


def test_node_task_defaults_yield_to_explicit_values():
    config = load_config({"task": "node", "lr": 0.05})
    assert (config.layers, config.lr, config.dropout, config.fanouts) == (2, 0.05, 0.5, [10, 10])
