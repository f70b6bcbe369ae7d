"""One dataset vocabulary: every name `gnnforge datasets` lists trains with a fitting task."""

from __future__ import annotations

import pytest
import torch

from gnnforge.cli import main
from gnnforge.data import list_datasets, stochastic_block_model
from gnnforge.train import ConfigError, GraphTask, load_config
from gnnforge.train._dataset_kinds import dataset_kind
from gnnforge.train._graph_data import MAX_DEGREE, structural_graphs
from gnnforge.train._node_data import per_class_split, structural_features

# The kind of every dataset of shared/datasets (MANIFEST.md) and of the built-ins.
EXPECTED = {
    "node": {"cora", "citeseer", "pubmed", "cora-npz", "citeseer-npz", "amazon_cs",
             "amazon_photo", "coauthor_cs", "coauthor_phy", "musae-facebook", "musae-git", "sbm",
             "synthetic-products"},
    "graph": {"enzymes", "imdb-binary", "mutag", "mutagenicity", "nci1", "proteins",
              "reddit10k", "bbbp", "lipophilicity", "sampl", "bace", "clintox",
              "delaney-processed", "sider", "tox21", "qm9", "zinc-test", "zinc-valid",
              "nci-molecules"},
    "link": {"rmat", "grid", "uniform", "rmat_s17_e21", "cit-hepth", "email-enron",
             "soc-epinions1", "soc-slashdot0902", "luxembourg_osm", "usroads-48"},
    "varmisuse": {"python-programs"},
}


def test_every_listed_dataset_has_a_task(datasets_dir):
    names = {source.name for source in list_datasets()}
    kinds = {}
    for name in names:
        try:
            kinds[name] = dataset_kind(name).task
        except ValueError:
            kinds[name] = None
    assert {n for n, k in kinds.items() if k is None} == {"molecule-like"}
    for task, expected in EXPECTED.items():
        assert {n for n, k in kinds.items() if k == task} == expected, task


@pytest.mark.parametrize("dataset, task", [("rmat", "link"), ("sbm", "node"),
                                           ("nci-tpsa", "graph"), ("NCI-TPSA", "graph")])
def test_the_dataset_picks_the_task(dataset, task):
    assert load_config({"dataset": dataset}).task == task


@pytest.mark.parametrize("overrides, message", [
    ({"task": "node", "dataset": "rmat"}, "it is an unlabelled graph; use --task link"),
    ({"task": "link", "dataset": "nci-tpsa"}, "use --task graph --dataset nci-tpsa"),
    ({"dataset": "molecule-like"}, "without labels; there is nothing to train on"),
    ({"dataset": "no-such-set"}, "--dataset: no dataset 'no-such-set'"),
    ({"task": "link", "mode": "full"}, "--task link trains on sampled blocks"),
    ({"task": "link", "fanouts": [5]}, "--fanouts has 1 entries for --layers 2"),
])
def test_wrong_task_for_a_dataset_names_the_fitting_one(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides)


def test_real_names_pick_their_tasks(datasets_dir):
    assert load_config({"dataset": "mutag"}).task == "graph"
    assert load_config({"dataset": "amazon_photo"}).task == "node"
    assert load_config({"dataset": "email-enron"}).task == "link"
    with pytest.raises(ConfigError, match="use --task graph --dataset mutag"):
        load_config({"task": "node", "dataset": "mutag"})


def test_per_class_split_takes_20_and_30_per_class():
    y = torch.repeat_interleave(torch.arange(3), torch.tensor([100, 60, 8]))
    y = torch.cat([y, torch.tensor([-1, -1])])              # unlabelled nodes stay out
    masks = per_class_split(y, seed=3)
    for label, (train, val) in {0: (20, 30), 1: (20, 20), 2: (4, 2)}.items():
        assert int((masks["train"] & (y == label)).sum()) == train
        assert int((masks["val"] & (y == label)).sum()) == val
    together = masks["train"].int() + masks["val"].int() + masks["test"].int()
    assert torch.equal(together, (y >= 0).int())
    assert torch.equal(per_class_split(y, 3)["train"], masks["train"])


def test_structural_features_of_a_generated_graph():
    graph = stochastic_block_model([30, 30], 0.2, 0.01, seed=0)
    x = structural_features(graph)
    degree = torch.bincount(graph.dst, minlength=graph.num_nodes)
    assert x.shape == (graph.num_nodes, 17)
    assert torch.equal(x[:, :16].argmax(1), torch.log2(degree.float() + 1).floor().long()
                       .clamp(max=15))


def test_structural_graphs_train_a_multiclass_graph_task(tmp_path):
    from gnnforge.data import random_molecule_like

    graphs = random_molecule_like(60, mean_atoms=8.0, seed=0)
    # the class: whether a graph has more nodes than the median (learnable from degrees)
    sizes = torch.tensor([g.num_nodes for g in graphs])
    graphs = [g.with_graph_data(y=torch.tensor(int(g.num_nodes > sizes.median())))
              for g in graphs]
    labelled, vocabulary = structural_graphs(graphs)
    assert vocabulary == (1, MAX_DEGREE + 1)
    assert labelled[0].node_data["x"].shape == (graphs[0].num_nodes, 2)
    config = load_config({"epochs": 1, "hidden": 16, "batch_graphs": 8, "progress": False,
                          "out_dir": str(tmp_path)})
    task = GraphTask(config, labelled, "size class", vocabulary, (1,))
    assert task.multiclass and task.num_tasks == 2 and task.metric == "val_accuracy"
    model = task.build_model()
    task.start_epoch(0)
    loss, count = task.loss(model, task.batch(0))
    assert torch.isfinite(loss) and count > 0
    assert 0.0 <= task.evaluate(model, "val")["val_accuracy"] <= 1.0


@pytest.mark.parametrize("argv, metric", [
    (["--dataset", "mutag", "--epochs", "1", "--hidden", "16"], "val_accuracy"),
    (["--dataset", "cora-npz", "--epochs", "2", "--hidden", "16"], "val_accuracy"),
    (["--dataset", "esol-missing"], None),
    (["--task", "link", "--dataset", "cora", "--epochs", "1", "--hidden", "16",
      "--batch-size", "2048"], "val_mrr"),
])
def test_train_real_datasets_by_listed_name(datasets_dir, tmp_path, capsys, argv, metric):
    code = main(["train", *argv, "--no-progress", "--out-dir", str(tmp_path)])
    captured = capsys.readouterr()
    if metric is None:
        assert code == 2 and "no dataset 'esol-missing'" in captured.err
        return
    assert code == 0, captured.err
    assert f"best {metric}" in captured.out
