"""`gnnforge train` on synthetic-products: --max-steps, the dataset's defaults, the final
resource line, and a task that holds the mapped CSR instead of a Graph.

Runs a 4,096-node version of the generator (seconds).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from gnnforge.cli import main
from gnnforge.train import ConfigError, load_config
from tests._cache import seeded_cache

RESOURCE_LINE = re.compile(r"^steps/s=\d+\.\d\d peak_rss_mib=\d+ data_mib=\d+$")
TINY = ["--synthetic-nodes", "4096", "--hidden", "16", "--fanouts", "4,3,2",
        "--batch-size", "128", "--no-progress"]


@pytest.mark.parametrize("value", [0, -3])
def test_max_steps_must_be_positive(value):
    with pytest.raises(ConfigError, match=rf"--max-steps must be a positive integer.*{value}"):
        load_config({"task": "node", "dataset": "sbm", "max_steps": value})


def test_max_steps_from_the_command_line_is_checked(capsys):
    assert main(["train", "--task", "node", "--dataset", "sbm", "--max-steps", "0"]) == 2
    assert "--max-steps must be a positive integer" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--max-steps", "many"])
    assert "invalid int value: 'many'" in capsys.readouterr().err


def test_products_defaults_are_the_issue_workload_and_other_datasets_keep_theirs():
    config = load_config({"dataset": "synthetic-products"})
    assert (config.task, config.mode, config.layers, config.hidden, config.fanouts,
            config.batch_size, config.input_dropout) == ("node", "sampled", 3, 256,
                                                         [15, 10, 5], 1024, 0.0)
    assert load_config({"dataset": "synthetic-products", "hidden": 32}).hidden == 32
    assert load_config({"dataset": "synthetic-products", "input_dropout": 0.2}) \
        .input_dropout == 0.2
    sbm = load_config({"dataset": "sbm"})
    assert (sbm.layers, sbm.hidden, sbm.fanouts, sbm.mode) == (2, 64, [10, 10], "full")
    assert sbm.input_dropout is None  # the first layer's dropout is --dropout's


def test_input_dropout_from_the_command_line_is_checked(capsys):
    assert main(["train", "--task", "node", "--dataset", "sbm", "--input-dropout",
                 "1.5"]) == 2
    assert "--input-dropout must lie in [0, 1), got 1.5" in capsys.readouterr().err
    assert main(["train", "--task", "graph", "--input-dropout", "0.1"]) == 2
    assert "--input-dropout applies to --task node only" in capsys.readouterr().err


@pytest.mark.parametrize("overrides, message", [
    ({"dataset": "synthetic-products", "mode": "full"}, "--mode sampled only"),
    ({"dataset": "sbm", "synthetic_nodes": 4096}, "--synthetic-nodes sizes"),
    ({"dataset": "synthetic-products", "synthetic_nodes": 100}, r"\[1024, 2\*\*31\)"),
    ({"dataset": "synthetic-products", "task": "link"}, "trains --task node"),
    ({"dataset": "synthetic-products", "warm_page_cache": "yes"},
     r"--warm-page-cache must be one of \('auto', 'on', 'off'\), got 'yes'"),
    ({"dataset": "sbm", "warm_page_cache": "on"}, "--warm-page-cache reads --dataset "
     "synthetic-products' files \\(got --dataset sbm\\)"),
])
def test_products_refusals_name_the_option(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNFORGE_CACHE", str(seeded_cache(tmp_path / "cache")))
    return tmp_path


def test_max_steps_stops_mid_epoch_and_the_run_ends_with_the_resource_line(cache, capsys):
    out = cache / "run"
    status = main(["train", "--dataset", "synthetic-products", *TINY, "--max-steps", "4",
                   "--out-dir", str(out)])
    assert status == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert RESOURCE_LINE.match(lines[-1]), lines[-1]
    history = json.loads((out / "metrics.json").read_text())
    # 329 training nodes in batches of 128: 3 steps per epoch, so 4 steps end in epoch 2
    assert [row["epoch"] for row in history["epochs"]] == [1, 2]
    assert (cache / "cache" / "synthetic-products" / "n4096-seed0" / "meta.json").exists()
    data_mib = int(lines[-1].rsplit("=", 1)[1])
    assert data_mib == round((4097 * 4 + _edges(cache) * 4 + 4096 * 100 * 4) / 2**20)


def _edges(cache) -> int:
    meta = cache / "cache" / "synthetic-products" / "n4096-seed0" / "meta.json"
    return json.loads(meta.read_text())["num_edges"]


@pytest.mark.parametrize("warm_page_cache", ["on", "off"])
def test_the_task_holds_the_datasets_csr_not_a_graph(cache, warm_page_cache):
    from gnnforge.graph import Graph
    from gnnforge.train._cli import build_task

    config = load_config({"dataset": "synthetic-products", "synthetic_nodes": 4096,
                          "hidden": 16, "fanouts": [4, 3, 2], "batch_size": 128,
                          "warm_page_cache": warm_page_cache, "progress": False})
    task = build_task(config)
    assert not any(isinstance(value, Graph) for value in vars(task).values())
    assert task.edges.col is task.data.col
    assert isinstance(task.edges.col, np.memmap) == (warm_page_cache == "off")
    assert task.edges.col.dtype == np.int32 and task.edges.eids.size == 0
    blocks, input_nodes, seeds = task.batch(0) if task.start_epoch(0) else None
    # a batch's arrays are sized by the batch: nothing of the graph's size is allocated
    # (frontiers of at most 128, 128 * 3 and 128 * 3 * 4 destinations, fanouts 2, 3, 4)
    assert sum(block.num_edges for block in blocks) <= 128 * 2 + 384 * 3 + 1536 * 4
    assert task.sampler.features(task.x, input_nodes).shape == (input_nodes.numel(), 100)
    assert seeds.numel() == 128


@pytest.mark.parametrize("input_dropout", [0.0, 0.5])
def test_the_first_layer_reads_the_mapped_features_unless_it_drops_them(cache, input_dropout):
    # The loss a step trains on is the one of the gathered rows, whichever way the first
    # layer reads them; they stay in the map exactly when no input dropout is drawn.
    import torch

    from gnnforge.nn import IndexedRows
    from gnnforge.train._cli import build_task

    config = load_config({"dataset": "synthetic-products", "synthetic_nodes": 4096,
                          "hidden": 16, "fanouts": [4, 3, 2], "batch_size": 128,
                          "input_dropout": input_dropout, "progress": False})
    task = build_task(config)
    task.start_epoch(0)
    blocks, input_nodes, seeds = batch = task.batch(0)
    torch.manual_seed(0)
    model = task.build_model()
    inputs = []
    model.register_forward_pre_hook(lambda module, args: inputs.append(args[1]))
    torch.manual_seed(1)
    loss, count = task.loss(model, batch)
    assert isinstance(inputs[0], IndexedRows) and inputs[0].table is task.x
    torch.manual_seed(1)
    gathered = model(blocks, task.x[input_nodes])
    reference = torch.nn.functional.cross_entropy(gathered, task.y[seeds])
    torch.testing.assert_close(loss, reference, rtol=1e-5, atol=1e-6)
    first_layer_inputs = []
    model.convs[0].register_forward_pre_hook(
        lambda module, args: first_layer_inputs.append(args[1]))
    task.loss(model, batch)
    assert isinstance(first_layer_inputs[0], IndexedRows) == (input_dropout == 0.0)
    assert count == seeds.numel()


@pytest.mark.parametrize("choice, read", [("on", True), ("off", False), ("auto", True)])
def test_warm_page_cache_reads_the_files_into_memory_or_says_why_not(cache, choice, read):
    from gnnforge.train._cli import build_task

    config = load_config({"dataset": "synthetic-products", "synthetic_nodes": 4096,
                          "warm_page_cache": choice, "progress": False})
    task = build_task(config)
    maps = sum((task.data.folder / f"{name}.npy").stat().st_size
               for name in ("rowptr", "col", "x"))
    assert task.data.warmup.bytes_read == (maps if read else 0)  # auto: 1.6 MiB fits
    expected = "read into memory (huge pages)" if read else \
        "memory-mapped, not read into memory (prefetch=False)"
    assert expected in task.description


def test_normalize_features_is_refused_on_the_mapped_features(cache):
    from gnnforge.train._cli import build_task

    config = load_config({"dataset": "synthetic-products", "synthetic_nodes": 4096,
                          "normalize_features": True, "progress": False})
    with pytest.raises(ConfigError, match="--normalize-features"):
        build_task(config)


def test_registry_graphs_sampled_also_end_with_the_resource_line(tmp_path, capsys):
    status = main(["train", "--task", "node", "--dataset", "sbm", "--mode", "sampled",
                   "--max-steps", "2", "--hidden", "8", "--no-progress",
                   "--out-dir", str(tmp_path / "run")])
    assert status == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert RESOURCE_LINE.match(last), last
    # sbm: 2,000 nodes with 16 float32 features, plus its int64 COO
    assert int(last.rsplit("=", 1)[1]) >= 0


def test_full_graph_runs_print_no_resource_line(tmp_path, capsys):
    assert main(["train", "--task", "node", "--dataset", "sbm", "--max-steps", "1",
                 "--hidden", "8", "--no-progress", "--out-dir", str(tmp_path / "run")]) == 0
    assert "steps/s=" not in capsys.readouterr().out


def test_max_steps_counts_across_a_resume(tmp_path, capsys):
    from gnnforge.train._checkpoint import load_checkpoint

    out = tmp_path / "run"
    base = ["train", "--task", "node", "--dataset", "sbm", "--mode", "sampled",
            "--batch-size", "64", "--hidden", "8", "--no-progress", "--out-dir", str(out)]
    assert main(base + ["--max-steps", "2"]) == 0
    assert load_checkpoint(out / "checkpoint.pt")["progress"]["total_steps"] == 2
    assert main(base + ["--max-steps", "5", "--resume"]) == 0
    state = load_checkpoint(out / "checkpoint.pt")
    assert state["progress"]["total_steps"] == 5 and len(state["history"]) == 2
    assert state["task"]["steps"] == 5  # the sampler's count survives the resume
    capsys.readouterr()
