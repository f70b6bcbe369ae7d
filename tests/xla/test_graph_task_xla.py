"""`gnnforge train --device xla` on XLA's CPU device: few compiles, one execution per step,
no CPU fallbacks, and the step computes what the CPU one does.

Each XLA:CPU compile of a training step takes seconds here, so these tests use one small
task and few steps (`make test-xla`).
"""

from __future__ import annotations

import copy

import pytest
import torch

from gnnforge.train import fit
from gnnforge.train._config import load_config
from gnnforge.train._graph_task import GraphTask
from tests.nn.test_models import molecules

pytestmark = pytest.mark.xla


def _task(tmp_path, device: str, **options) -> GraphTask:
    config = load_config({"device": device, "epochs": 2, "hidden": 8, "layers": 2,
                          "batch_graphs": 8, "out_dir": str(tmp_path), "progress": False,
                          "patience": 0, **options})
    return GraphTask(config, molecules(64, seed=5), "index")


def test_packed_run_compiles_per_shape_and_never_falls_back(tmp_path):
    task = _task(tmp_path, "xla")
    shapes = {task.loaders[split].shape for split in ("train", "val", "test")}
    assert len(shapes) == 1  # evaluation splits share the training pack shape
    lines: list[str] = []
    summary = fit(task.config, task, printer=lines.append)
    counts = summary["xla"]
    # Training: the first step (Adam creates its state) and every later one; evaluation:
    # one graph for the one shape.
    assert counts["compiles"] <= 3, counts
    assert counts["executions_per_step"] == 1.0 and counts["fallbacks"] == 0, counts
    assert lines[-1] == (f"xla: compiles={counts['compiles']} executions_per_step=1.00 "
                         "fallbacks=0")


def test_step_equals_the_cpu_step_in_float64(tmp_path):
    import torch_xla

    device = torch_xla.device()
    task, cpu_task = _task(tmp_path / "xla", "xla"), _task(tmp_path / "cpu", "cpu")
    torch.manual_seed(0)
    # float64: the masked batch norm (XLA) and the fused one on the real rows (CPU) differ
    # only by rounding (see tests/train/test_compile.py).
    cpu_model = cpu_task.build_model().double()
    model = copy.deepcopy(cpu_model).to(device)
    task.start_epoch(0)
    cpu_task.start_epoch(0)
    for step in range(2):
        loss, items = task.loss(model, task.batch(step))
        cpu_loss, cpu_items = cpu_task.loss(cpu_model, cpu_task.batch(step))
        loss.backward()
        cpu_loss.backward()
        torch_xla.sync()
        assert items == cpu_items
        torch.testing.assert_close(loss.cpu(), cpu_loss, rtol=1e-9, atol=1e-12)
        for (name, ours), theirs in zip(model.named_parameters(), cpu_model.parameters()):
            torch.testing.assert_close(ours.grad.cpu(), theirs.grad, rtol=1e-7, atol=1e-10,
                                       msg=lambda text, name=name: f"{name}: {text}")
        model.zero_grad()
        cpu_model.zero_grad()


def test_xla_takes_packs_full_graphs_and_varmisuse_only():
    from gnnforge.train._config import ConfigError

    with pytest.raises(ConfigError, match="--device xla trains --task graph .* got --task "
                                          "node --mode sampled"):
        load_config({"device": "xla", "task": "node", "mode": "sampled", "dataset": "sbm"})
    with pytest.raises(ConfigError, match="got --task link"):
        load_config({"device": "xla", "task": "link", "dataset": "sbm"})
    with pytest.raises(ConfigError, match="drop --compile"):
        load_config({"device": "xla", "compile": True})
    assert load_config({"device": "xla", "task": "varmisuse"}).device == "xla"


def test_two_epochs_of_adam_track_the_cpu_run_in_float64(tmp_path):
    """The whole run, optimiser included, is the CPU's computation: in float64 the epoch
    losses agree to far below 1e-4. (In float32 no two summation orders agree that well:
    Adam's first update moves a weight by the learning rate in the sign of its gradient,
    and a gradient at rounding level takes either sign; the CPU alone, run with 1 and with
    2 threads, drifts as far as XLA does; docs/training.md, "XLA".)"""
    import torch_xla

    device = torch_xla.device()
    task, cpu_task = _task(tmp_path / "xla", "xla"), _task(tmp_path / "cpu", "cpu")
    torch.manual_seed(0)
    cpu_model = cpu_task.build_model().double()
    model = copy.deepcopy(cpu_model).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=task.config.lr)
    cpu_optimizer = torch.optim.Adam(cpu_model.parameters(), lr=task.config.lr)
    for epoch in range(2):
        losses, cpu_losses = [], []
        steps = task.start_epoch(epoch)
        assert cpu_task.start_epoch(epoch) == steps
        for step in range(steps):
            for ours, (net, opt, out) in ((task, (model, optimizer, losses)),
                                          (cpu_task, (cpu_model, cpu_optimizer, cpu_losses))):
                loss, _ = ours.loss(net, ours.batch(step))
                opt.zero_grad()
                loss.backward()
                opt.step()
                out.append(loss.detach())
            torch_xla.sync()
        mean = torch.stack(losses).cpu().mean()
        torch.testing.assert_close(mean, torch.stack(cpu_losses).mean(), rtol=0, atol=1e-9)
