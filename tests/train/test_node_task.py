"""Node classification: full graph and sampled minibatches learn on a synthetic SBM, and an
interrupted sampled run (NS with a generator, LABOR with dependent keys and a feature
cache) resumes to exactly the uninterrupted parameters."""

from __future__ import annotations

import pytest
import torch

from gnnforge.train import NodeTask, fit, load_config
from gnnforge.train._checkpoint import load_checkpoint


class Interrupted(Exception):
    pass


class FailingTask(NodeTask):
    """Raises inside `batch` after `fail_after` batches, like a kill between two steps."""

    def __init__(self, config, fail_after: int) -> None:
        super().__init__(config)
        self.calls, self.fail_after = 0, fail_after

    def batch(self, index):
        self.calls += 1
        if self.calls > self.fail_after:
            raise Interrupted
        return super().batch(index)


def config(tmp_path, name, **options):
    base = dict(task="node", dataset="sbm", epochs=2, hidden=16, layers=2, progress=False,
                out_dir=str(tmp_path / name), lr=0.01, dropout=0.2)
    base.update(options)
    return load_config(base)


def test_full_graph_learns_the_communities(tmp_path):
    summary = fit(config(tmp_path, "full", epochs=30, lr=0.05),
                  NodeTask(config(tmp_path, "full")),
                  printer=lambda *_: None)
    assert summary["final test_accuracy (best epoch)"] > 0.8  # chance is 0.25


@pytest.mark.slow
@pytest.mark.parametrize("options", [
    dict(sampler="neighbor"),
    dict(sampler="labor", dependent=3, cache_size=300),
])
def test_sampled_resume_is_exact(tmp_path, options):
    sampled = dict(mode="sampled", fanouts=[5, 5], batch_size=64, checkpoint_every=1, **options)
    reference_config = config(tmp_path, "reference", **sampled)
    reference_summary = fit(reference_config, NodeTask(reference_config),
                            printer=lambda *_: None)
    broken_config = config(tmp_path, "broken", **sampled)
    with pytest.raises(Interrupted):
        fit(broken_config, FailingTask(broken_config, fail_after=6), printer=lambda *_: None)
    progress = load_checkpoint(tmp_path / "broken" / "checkpoint.pt")["progress"]
    assert (progress["epoch"], progress["step"]) == (1, 2)  # mid-epoch: 4 batches an epoch
    resumed_config = config(tmp_path, "broken", resume=True, **sampled)
    resumed_summary = fit(resumed_config, NodeTask(resumed_config), printer=lambda *_: None)
    expected = load_checkpoint(tmp_path / "reference" / "checkpoint.pt")["model"]
    actual = load_checkpoint(tmp_path / "broken" / "checkpoint.pt")["model"]
    for name, value in expected.items():
        assert torch.equal(value, actual[name]), name
    # Per-epoch statistics (sampled edges per batch, cache miss rate) and the summary are
    # those of the uninterrupted run too; only wall-clock figures may differ.
    assert _untimed_history(tmp_path / "broken") == _untimed_history(tmp_path / "reference")
    assert _untimed(resumed_summary) == _untimed(reference_summary)
    assert "sampled_edges_per_batch" in resumed_summary


_TIMING = ("train_seconds", "nodes_per_s", "train time (s)", "nodes/s (train)")


def _untimed(row):
    return {key: value for key, value in row.items() if key not in _TIMING}


def _untimed_history(out_dir):
    import json

    return [_untimed(row) for row in json.loads((out_dir / "metrics.json").read_text())["epochs"]]


def _sparse_feature_graph():
    """The SBM with its features replaced by sparse non-negative bag-of-words rows."""
    from gnnforge.train._node_task import _synthetic_sbm

    graph = _synthetic_sbm(0)
    generator = torch.Generator().manual_seed(0)
    words = torch.rand(graph.num_nodes, 200, generator=generator)
    words = words * (torch.rand(graph.num_nodes, 200, generator=generator) < 0.02)
    y = graph.node_data["y"]
    words[torch.arange(graph.num_nodes), y * 50] += 1.0  # one informative word per block
    return graph.with_node_data(x=words)


@pytest.mark.parametrize("options", [dict(model="gcn"), dict(model="sage"),
                                     dict(mode="sampled", fanouts=[5, 5], batch_size=64)])
def test_sparse_inputs_train_like_dense_inputs(tmp_path, monkeypatch, options):
    from gnnforge.nn import SparseFeatures
    from gnnforge.train import _node_task

    graph = _sparse_feature_graph()
    summaries, params = [], []
    for name, threshold in (("sparse", 0.1), ("dense", 0.0)):
        monkeypatch.setattr(_node_task, "SPARSE_INPUT_DENSITY", threshold)
        run = config(tmp_path, name, dropout=0.0, epochs=3, **options)
        task = NodeTask(run, graph, "sparse words")
        assert isinstance(task.inputs, SparseFeatures) == (name == "sparse")
        summaries.append(fit(run, task, printer=lambda *_: None))
        params.append(load_checkpoint(tmp_path / name / "checkpoint.pt")["model"])
    for key, value in params[1].items():
        torch.testing.assert_close(params[0][key], value, rtol=1e-4, atol=1e-5)
    assert "sparse input" in summaries[0]["dataset"]
