"""`gnnforge train --task node --mode full --device xla`: the whole graph is the batch, so
the step compiles once (after Adam's first), never falls back to the CPU (the formats and
GCN's loop graph are built once: `graph._compress`, `nn._planned.loop_graph`), and
computes what the CPU step does."""

from __future__ import annotations

import copy

import pytest
import torch

from gnnforge.train import fit
from gnnforge.train._config import load_config
from gnnforge.train._node_task import NodeTask

pytestmark = pytest.mark.xla


def _task(tmp_path, device: str, model: str, **options) -> NodeTask:
    config = load_config({"task": "node", "dataset": "sbm", "device": device, "model": model,
                          "epochs": 3, "hidden": 16, "patience": 0, "out_dir": str(tmp_path),
                          "progress": False, **options})
    return NodeTask(config)


@pytest.mark.parametrize("model", ["sage", "gcn"])
def test_full_graph_run_compiles_once_and_never_falls_back(tmp_path, model):
    task = _task(tmp_path, "xla", model)
    lines: list[str] = []
    counts = fit(task.config, task, printer=lines.append)["xla"]
    # The first step (Adam creates its state), every later one, the evaluation pass.
    assert counts["compiles"] <= 3, counts
    assert counts["executions_per_step"] == 1.0 and counts["fallbacks"] == 0, counts
    assert lines[-1].startswith("xla: ")


def test_full_graph_step_equals_the_cpu_step(tmp_path):
    import torch_xla

    task = _task(tmp_path / "xla", "xla", "gcn", dropout=0.0)
    cpu_task = _task(tmp_path / "cpu", "cpu", "gcn", dropout=0.0)
    torch.manual_seed(0)
    cpu_model = cpu_task.build_model().double()
    model = copy.deepcopy(cpu_model).to(task.device)
    for trained in (model, cpu_model):
        for layer in trained.modules():
            if hasattr(layer, "plan"):
                layer.plan = "default"  # one order on both devices
    task.device_inputs = task.device_inputs.double()
    cpu_task.device_inputs = cpu_task.device_inputs.double()
    loss, _ = task.loss(model, task.batch(0))
    cpu_loss, _ = cpu_task.loss(cpu_model, cpu_task.batch(0))
    loss.backward()
    cpu_loss.backward()
    torch_xla.sync()
    torch.testing.assert_close(loss.cpu(), cpu_loss, rtol=1e-9, atol=1e-12)
    for (name, ours), theirs in zip(model.named_parameters(), cpu_model.parameters()):
        torch.testing.assert_close(ours.grad.cpu(), theirs.grad, rtol=1e-7, atol=1e-10,
                                   msg=lambda text, name=name: f"{name}: {text}")
