"""`--workers N`: the training batches come from worker processes and are the batches the
training process builds itself, so a seeded run trains to the same losses; combinations
whose batches need collectives or have no loader are refused by name."""

from __future__ import annotations

import json

import pytest

from gnnforge.train import fit
from gnnforge.train._config import ConfigError, load_config
from gnnforge.train._graph_task import GraphTask
from gnnforge.train._node_task import NodeTask
from gnnforge.train._workers import step_batches
from tests._timeouts import SPAWN_TIMEOUT_S
from tests.nn.test_models import molecules


def _history(out_dir) -> list[dict]:
    rows = json.loads((out_dir / "metrics.json").read_text())["epochs"]
    return [{k: v for k, v in row.items() if "seconds" not in k and "_per_s" not in k}
            for row in rows]


def _graph_run(tmp_path, workers: int) -> list[dict]:
    out = tmp_path / f"graph{workers}"
    config = load_config({"epochs": 2, "hidden": 16, "layers": 2, "batch_graphs": 8,
                          "workers": workers, "out_dir": str(out), "progress": False})
    fit(config, GraphTask(config, molecules(120, seed=4), "index"), printer=lambda line: None)
    return _history(out)


@pytest.mark.timeout(SPAWN_TIMEOUT_S)
def test_graph_task_with_workers_trains_to_the_same_losses(tmp_path):
    without, with_workers = _graph_run(tmp_path, 0), _graph_run(tmp_path, 2)
    assert len(without) == 2
    assert with_workers == without  # losses, validation metric and padding, exactly


def _node_run(tmp_path, workers: int) -> list[dict]:
    out = tmp_path / f"node{workers}"
    config = load_config({"task": "node", "dataset": "sbm", "mode": "sampled", "epochs": 2,
                          "fanouts": [5, 5], "batch_size": 128, "hidden": 16,
                          "workers": workers, "out_dir": str(out), "progress": False})
    fit(config, NodeTask(config), printer=lambda line: None)
    return _history(out)


@pytest.mark.timeout(SPAWN_TIMEOUT_S)
def test_sampled_node_task_with_workers_trains_to_the_same_losses(tmp_path):
    without, with_workers = _node_run(tmp_path, 0), _node_run(tmp_path, 2)
    assert without[0]["sampled_edges_per_batch"] > 0  # counted in the training process
    assert with_workers == without


def test_workers_are_refused_where_batches_are_not_built_by_a_loader():
    with pytest.raises(ConfigError, match="--workers 2: .*got --task node --mode full"):
        load_config({"task": "node", "workers": 2})
    with pytest.raises(ConfigError, match="--distributed cooperative; use --workers 0"):
        load_config({"task": "node", "mode": "sampled", "distributed": "cooperative",
                     "workers": 1})
    with pytest.raises(ConfigError, match="--workers must be >= 0, got -1"):
        load_config({"workers": -1})


def _square(index: int) -> int:
    return index * index


@pytest.mark.timeout(SPAWN_TIMEOUT_S)
def test_step_batches_keeps_the_order_of_the_indices():
    indices = [4, 1, 7, 0, 9]
    assert list(step_batches(_square, indices, 0)) == [16, 1, 49, 0, 81]
    assert list(step_batches(_square, indices, 2)) == [16, 1, 49, 0, 81]
    assert list(step_batches(_square, [], 2)) == []
    with pytest.raises(ValueError, match="workers must be >= 0"):
        step_batches(_square, indices, -1)
