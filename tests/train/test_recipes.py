"""Recipes and the node task's recipe options: every shipped recipe is a valid config
citing its source; row normalisation, first-layer weight decay and the GAT classifier do
what the papers' code does; bad values are named."""

from __future__ import annotations

import pytest
import torch

from gnnforge.nn import NodeClassifier
from gnnforge.train import ConfigError, NodeTask, fit, load_config
from gnnforge.train._node_data import row_normalized
from gnnforge.train._recipes import RECIPES_DIR, list_recipes, load_recipe

# The recipes the issue asks for (docs/recipes.md has their measured accuracy).
REQUIRED = ["main", "gcn-cora", "gcn-citeseer", "gat-cora", "gat-citeseer",
            "gin-mutag", "gin-proteins", "gin-nci1",
            *[f"{model}-{data}" for model in ("gcn", "sage")
              for data in ("amazon-photo", "amazon-computers", "coauthor-cs",
                           "coauthor-physics")]]


def test_every_recipe_is_a_valid_config_with_its_source():
    recipes = {recipe.name: recipe for recipe in list_recipes()}
    assert set(REQUIRED) <= set(recipes)
    for recipe in recipes.values():
        config = load_config({}, recipe.path)      # validates every option
        assert config.task in ("node", "graph") and config.dataset == recipe.train["dataset"]
        assert recipe.source
        # Every paper's recipe cites its accuracy; the main job has no published number.
        assert (recipe.published is None) == (recipe.name == "main")
        assert recipe.published is None or 50 < recipe.published < 100
        assert "#" in recipe.path.read_text(), f"{recipe.name}: comments cite the settings"
    assert load_config({}, recipes["gcn-cora"].path).weight_decay_layers == "first"
    # The main recipe is `gnnforge train` with no options, spelled out.
    assert load_config({}, recipes["main"].path) == load_config({"dataset": "nci-tpsa"})


def test_flags_override_a_recipe():
    config = load_config({"epochs": 3, "seed": 7}, load_recipe("gat-cora").path)
    assert (config.epochs, config.seed, config.heads, config.activation) == (3, 7, 8, "elu")


def test_an_unknown_recipe_names_the_close_ones():
    with pytest.raises(ConfigError, match="no recipe 'gcn-cor'; did you mean gcn-cora"):
        load_recipe("gcn-cor")


def test_a_recipe_without_its_tables_is_refused(tmp_path):
    (tmp_path / "bare.toml").write_text("epochs = 3\n")
    with pytest.raises(ConfigError, match=r"bare.toml: needs a \[recipe\] and a \[train\]"):
        load_recipe("bare", tmp_path)
    assert RECIPES_DIR.is_dir()


def test_row_normalized_divides_rows_by_their_sums():
    x = torch.tensor([[1.0, 3.0], [0.0, 0.0], [2.0, 2.0]])
    want = torch.tensor([[0.25, 0.75], [0.0, 0.0], [0.5, 0.5]])
    torch.testing.assert_close(row_normalized(x), want)
    with pytest.raises(ValueError, match=r"x\[1, 0\] = -1.0 is negative"):
        row_normalized(torch.tensor([[1.0, 0.0], [-1.0, 2.0]]))


def _config(tmp_path, **options):
    base = dict(task="node", dataset="sbm", epochs=2, hidden=8, progress=False,
                out_dir=str(tmp_path / "run"))
    return load_config({**base, **options})


def test_first_layer_weight_decay_groups(tmp_path):
    task = NodeTask(_config(tmp_path, model="gcn", weight_decay_layers="first"))
    model = task.build_model()
    first, rest = task.parameter_groups(model)
    assert {id(p) for p in first["params"]} == {id(p) for p in model.convs[0].parameters()}
    assert rest["weight_decay"] == 0.0 and len(rest["params"]) == 2   # conv 2: weight, bias
    all_task = NodeTask(_config(tmp_path, model="gcn"))
    (group,) = all_task.parameter_groups(model)
    assert len(group["params"]) == len(list(model.parameters()))


def test_first_layer_decay_leaves_the_second_layer_undecayed(tmp_path):
    # With lr > 0 and zero gradients a decayed weight moves, an undecayed one does not:
    # run one step on a zero loss and compare.
    config = _config(tmp_path, model="gcn", weight_decay_layers="first", weight_decay=0.1)
    task = NodeTask(config)
    model = task.build_model()
    optimizer = torch.optim.Adam(task.parameter_groups(model), lr=0.01,
                                 weight_decay=config.weight_decay)
    before = [p.detach().clone() for p in model.convs.parameters()]
    (sum(p.sum() for p in model.parameters()) * 0).backward()
    optimizer.step()
    moved = [not torch.equal(a, b) for a, b in zip(before, model.convs.parameters())]
    first = len(list(model.convs[0].parameters()))
    assert any(moved[:first]) and not any(moved[first:])


def test_gat_classifier_shapes_and_heads():
    model = NodeClassifier(12, 8, 3, conv="gat", heads=4, output_heads=2,
                           activation="elu", attention_dropout=0.6)
    assert model.convs[0].heads == 4 and model.convs[1].heads == 2
    assert model.convs[1].in_channels == 32
    from gnnforge.data import stochastic_block_model

    graph = stochastic_block_model([10, 10], 0.3, 0.05, seed=0)
    assert model(graph, torch.randn(20, 12)).shape == (20, 3)
    with pytest.raises(ValueError, match="heads, output_heads and attention_dropout apply "
                                         "to conv='gat' only"):
        NodeClassifier(12, 8, 3, conv="gcn", heads=4)
    with pytest.raises(ValueError, match="activation must be one of"):
        NodeClassifier(12, 8, 3, activation="tanh")


def test_gat_trains_on_the_sbm(tmp_path):
    config = _config(tmp_path, model="gat", heads=2, epochs=20, lr=0.02, dropout=0.1,
                     activation="elu", normalize_features=False)
    summary = fit(config, NodeTask(config), printer=lambda *_: None)
    assert summary["final test_accuracy (best epoch)"] > 0.6   # chance is 0.25


@pytest.mark.parametrize("options, message", [
    (dict(weight_decay_layers="last"), "--weight-decay-layers must be one of"),
    (dict(activation="tanh"), "--activation must be one of"),
    (dict(heads=4), "--heads applies to --model gat only"),
    (dict(model="gat", heads=0), "--heads must be >= 1"),
    (dict(model="gat", attention_dropout=1.0), "--attention-dropout must lie in"),
    (dict(model="gat", mode="sampled", fanouts=[5, 5]), "--model gat trains on the full"),
    (dict(model="gin"), "--model must be one of"),
])
def test_bad_recipe_options_are_named(options, message):
    with pytest.raises(ConfigError, match=message):
        load_config({"task": "node", **options})


@pytest.mark.parametrize("task", ["graph", "link"])
def test_recipe_options_belong_to_the_node_task(task):
    with pytest.raises(ConfigError, match="--normalize-features applies to --task node only"):
        load_config({"task": task, "normalize_features": True})


def test_recipes_ship_with_the_package():
    import fnmatch
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["gnnforge"]
    for recipe in list_recipes():
        inside = recipe.path.relative_to(root / "gnnforge").as_posix()
        assert any(fnmatch.fnmatch(inside, pattern) for pattern in patterns), inside


def test_the_recipes_page_names_a_metric_that_is_not_an_accuracy():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "recipes.py"
    spec = importlib.util.spec_from_file_location("recipes_page", path)
    page = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(page)
    common = {"std": 0.5, "values": [1.0, 2.0], "seconds_per_run": 3.0,
              "load_average": [1.0, 1.0], "commit": "abc", "date": "2026-11-29"}
    text = page.render({"main": {**common, "mean": 4.25, "metric": "test_mae"},
                        "gcn-cora": {**common, "mean": 81.9}})
    rows = [line for line in text.splitlines() if line.startswith("| `gnnforge train")]
    main_row = next(line for line in rows if "--recipe main " in line)
    cora_row = next(line for line in rows if "--recipe gcn-cora " in line)
    assert "4.25 ± 0.50 (2 seeds; test_mae)" in main_row and "none (" in main_row
    assert "81.90 ± 0.50 (2 seeds) (+0.40)" in cora_row
