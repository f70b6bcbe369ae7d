"""`gnnforge train --compile`: one compile per pack shape, no graph breaks, no recompiles,
and the compiled step computes what the eager one does."""

from __future__ import annotations

import copy

import pytest
import torch
import torch._dynamo

from gnnforge.packing import StaticBatch
from gnnforge.train import PackedSplit, fit
from gnnforge.train._compile import CompiledLoss
from gnnforge.train._config import load_config
from gnnforge.train._graph_task import GraphTask
from tests.nn.test_models import molecules


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _task(tmp_path, **options) -> GraphTask:
    config = load_config({"compile": True, "epochs": 3, "hidden": 8, "layers": 2,
                          "batch_graphs": 8, "out_dir": str(tmp_path), "progress": False,
                          "patience": 0, **options})
    graphs = molecules(64, seed=5)
    return GraphTask(config, graphs, "index")


@pytest.mark.slow
def test_compiled_run_has_one_frame_per_pack_shape_and_no_breaks(tmp_path):
    task = _task(tmp_path)
    lines: list[str] = []
    summary = fit(task.config, task, printer=lines.append)
    shapes = {signature for signature in task.compiled.signatures}
    assert len(shapes) == 1  # one train pack shape over all epochs
    counts = summary["compile"]
    assert 1 <= counts["frames"] <= len(shapes)
    assert counts["graph_breaks"] == 0 and counts["recompiles"] == 0
    assert lines[-1] == (f"compile: frames={counts['frames']} graph_breaks=0 recompiles=0")


@pytest.mark.slow
def test_compiled_loss_and_gradients_equal_eager(tmp_path):
    task = _task(tmp_path)
    torch.manual_seed(0)
    # float64: the masked batch norm (compiled) and the fused one on the real rows (eager)
    # differ only by rounding, and in float32 that rounding alone exceeds 1e-5 on the
    # near-zero gradients of the biases that batch norm cancels.
    model = task.build_model().double()
    eager = copy.deepcopy(model)
    task.start_epoch(0)
    for step in range(3):
        batch = task.batch(step)
        compiled_loss = task.compiled(model, StaticBatch.from_batch(batch))
        eager_loss = task._loss_value(eager, batch)
        torch.testing.assert_close(compiled_loss, eager_loss, rtol=1e-9, atol=1e-12)
        compiled_loss.backward()
        eager_loss.backward()
        for (name, ours), theirs in zip(model.named_parameters(), eager.parameters()):
            torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-7, atol=1e-10,
                                       msg=lambda text, name=name: f"{name}: {text}")
        model.zero_grad()
        eager.zero_grad()
    for ours, theirs in zip(model.buffers(), eager.buffers()):
        torch.testing.assert_close(ours, theirs, rtol=1e-9, atol=1e-12)


def test_a_second_shape_compiles_once_more_without_recompiles(tmp_path):
    task = _task(tmp_path)
    task.compiled = CompiledLoss(task._loss_value, backend="aot_eager")  # same dynamo graphs
    model = task.build_model()
    task.start_epoch(0)
    # Validation packs share the training shape; packs of fewer graphs have another one.
    other = PackedSplit(task.graphs, task.splits["val"], 2, shuffle=False)
    other.plan(0)
    assert task.loaders["val"].shape == task.loaders["train"].shape != other.shape
    for loader in (task.loaders["train"], task.loaders["val"], other, task.loaders["train"]):
        task.compiled(model, StaticBatch.from_batch(loader.batch(0))).backward()
    frames, breaks, recompiles = task.compiled.counts()
    assert len(task.compiled.signatures) == 2
    assert (frames, breaks, recompiles) == (2, 0, 0)


def _node_task(tmp_path, model: str):
    from gnnforge.train._node_task import NodeTask

    config = load_config({"task": "node", "dataset": "sbm", "model": model, "compile": True,
                          "epochs": 3, "dropout": 0.0, "hidden": 16, "patience": 0,
                          "out_dir": str(tmp_path), "progress": False})
    return NodeTask(config)


@pytest.mark.slow
def test_node_full_graph_run_compiles_once(tmp_path):
    task = _node_task(tmp_path, "gcn")
    lines: list[str] = []
    summary = fit(task.config, task, printer=lines.append)
    assert summary["compile"] == {"frames": 1, "graph_breaks": 0, "recompiles": 0}
    assert lines[-1] == "compile: frames=1 graph_breaks=0 recompiles=0"


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_node_compiled_loss_and_gradients_equal_eager(tmp_path, model):
    task = _node_task(tmp_path, model)
    torch.manual_seed(0)
    compiled_model = task.build_model()
    eager_model = copy.deepcopy(compiled_model)
    nodes = task.train_nodes
    for _ in range(2):
        compiled_loss, _ = task.loss(compiled_model, None)
        eager_loss = task._full_loss(eager_model, task.graph, task.inputs, task.y, nodes)
        # The traced layers take PyG's association (aggregate, then project) where the
        # eager ones run the planner's choice: equal up to float32 rounding.
        torch.testing.assert_close(compiled_loss, eager_loss, rtol=1e-5, atol=1e-6)
        compiled_loss.backward()
        eager_loss.backward()
        for (name, ours), theirs in zip(compiled_model.named_parameters(),
                                        eager_model.parameters()):
            torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-6,
                                       msg=lambda text, name=name: f"{name}: {text}")
        compiled_model.zero_grad()
        eager_model.zero_grad()


@pytest.mark.parametrize("options", [{"task": "node", "mode": "sampled"},
                                     {"task": "link"}, {"task": "varmisuse"}])
def test_compile_without_fixed_shapes_is_refused(options):
    from gnnforge.train._config import ConfigError

    with pytest.raises(ConfigError, match="--compile needs fixed shapes"):
        load_config({**options, "compile": True})


def test_a_known_signature_skips_the_guards_and_a_new_mode_compiles(tmp_path, monkeypatch):
    """Calls of a compiled signature run without dynamo's guards; a change the guards would
    catch (eval mode, no grad) is a new signature, compiled and equal to eager."""
    task = _task(tmp_path, dropout=0.5)
    task.compiled = CompiledLoss(task._loss_value, backend="aot_eager")
    stances: list[bool] = []
    original = torch.compiler.set_stance

    def recording(*args, **kwargs):
        stances.append(kwargs.get("skip_guard_eval_unsafe", False))
        return original(*args, **kwargs)
    monkeypatch.setattr(torch.compiler, "set_stance", recording)
    torch.manual_seed(0)
    model = task.build_model().double()
    task.start_epoch(0)
    batch = StaticBatch.from_batch(task.batch(0))
    task.compiled(model, batch).backward()
    task.compiled(model, batch).backward()
    assert stances == [True]                  # the second call only
    model.eval()
    with torch.no_grad():
        compiled = task.compiled(model, batch)
        torch.testing.assert_close(compiled, task._loss_value(model, batch), rtol=1e-9,
                                   atol=1e-12)
        task.compiled(model, batch)
    assert stances == [True, True]
    frames, breaks, recompiles = task.compiled.counts()
    assert (frames, breaks, recompiles) == (2, 0, 0)


def test_a_backend_change_compiles_anew_instead_of_reusing_the_graph(tmp_path, monkeypatch):
    """The kernels are chosen at trace time; known signatures skip dynamo's guards, so the
    signature must carry the ops backend: a `use_backend` block or a changed
    GNNFORGE_BACKEND compiles a new graph instead of running the stale one."""
    import gnnforge.ops
    from gnnforge.ops import _dispatch

    monkeypatch.delenv("GNNFORGE_BACKEND", raising=False)
    task = _task(tmp_path)
    task.compiled = CompiledLoss(task._loss_value, backend="aot_eager")
    traced: list[str] = []
    original = _dispatch._choose

    def recording(family, device):
        choice = original(family, device)
        traced.append(choice.backend)
        return choice
    monkeypatch.setattr(_dispatch, "_choose", recording)
    model = task.build_model()
    task.start_epoch(0)
    batch = StaticBatch.from_batch(task.batch(0))
    task.compiled(model, batch)
    task.compiled(model, batch)
    assert task.compiled.counts() == (1, 0, 0) and "torch" not in traced
    monkeypatch.setenv("GNNFORGE_BACKEND", "torch")
    task.compiled(model, batch)
    assert task.compiled.counts() == (2, 0, 0) and traced[-1] == "torch"
    with gnnforge.ops.use_backend("reference"):
        loss = task.compiled(model, batch)
        assert task.compiled.counts() == (3, 0, 0) and traced[-1] == "reference"
        torch.testing.assert_close(loss, task._loss_value(model, batch))
