"""`--distributed cooperative`: two gloo processes train one sampled minibatch together.

Both processes end with identical parameters, equal (to float rounding) to one process
training on the same global minibatches (NS with the same keys); an interrupted
cooperative run resumes to exactly the uninterrupted parameters; bad launches and
combinations fail with a message.
"""

from __future__ import annotations

import json

import pytest
import torch

from gnnforge.distributed import spawn
from gnnforge.train import ConfigError, NodeTask, fit, load_config
from gnnforge.train._checkpoint import load_checkpoint
from tests._timeouts import SPAWN_TIMEOUT_S

pytestmark = pytest.mark.distributed


class Interrupted(Exception):
    pass


def _config(out_dir, **options):
    base = dict(task="node", dataset="sbm", mode="sampled", fanouts=[5, 5], batch_size=64,
                epochs=2, hidden=16, layers=2, lr=0.01, dropout=0.0, progress=False,
                out_dir=str(out_dir), distributed="cooperative")
    base.update(options)
    return load_config(base)


def _train(rank, world_size, out_dir, options, fail_after):
    config = _config(out_dir, **options)
    task = NodeTask(config)
    models = []
    build, batch = task.build_model, task.batch
    task.build_model = lambda: models.append(build()) or models[-1]
    calls = [0]

    def failing_batch(index):  # both processes stop before the same step, like a kill
        calls[0] += 1
        if fail_after and calls[0] > fail_after:
            raise Interrupted
        return batch(index)

    task.batch = failing_batch
    try:
        summary = fit(config, task, printer=lambda *_: None)
    except Interrupted:
        return "interrupted"
    return summary, {k: v.clone() for k, v in models[0].state_dict().items()}


def _run(out_dir, fail_after=0, **options):
    results = spawn(_train, 2, args=(out_dir, options, fail_after), timeout_s=SPAWN_TIMEOUT_S,
                    collective_timeout_s=30)
    for result in results:
        assert result.error is None, result.error
    return [result.value for result in results]


def test_two_processes_match_one_and_resume_exactly(tmp_path):
    (summary, params), (_, params_1) = _run(tmp_path / "coop")
    for name, value in params.items():  # the processes stayed in lock step
        assert torch.equal(value, params_1[name]), name
    history = json.loads((tmp_path / "coop" / "metrics.json").read_text())["epochs"]
    assert len(history) == 2 and history[0]["remote_rows_per_batch"] > 0
    assert summary["epochs run"] == 2

    single = _config(tmp_path / "single", distributed="independent", dependent=1)
    task = NodeTask(single)
    fit(single, task, printer=lambda *_: None)
    reference = load_checkpoint(tmp_path / "single" / "checkpoint.pt")["model"]
    for name, value in reference.items():  # same global batches, same keys
        torch.testing.assert_close(params[name], value, rtol=1e-4, atol=1e-5)

    options = dict(checkpoint_every=1, dropout=0.3)
    (_, expected), _ = _run(tmp_path / "reference", **options)
    assert _run(tmp_path / "broken", fail_after=3, **options) == ["interrupted"] * 2
    assert load_checkpoint(tmp_path / "broken" / "checkpoint.pt")["progress"]["step"] == 3
    (_, resumed), (_, resumed_1) = _run(tmp_path / "broken", resume=True, **options)
    for name, value in expected.items():
        assert torch.equal(value, resumed[name]) and torch.equal(value, resumed_1[name]), name


def test_bad_combinations_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="needs --task node --mode sampled"):
        load_config(dict(task="node", dataset="sbm", distributed="cooperative"))
    with pytest.raises(ConfigError, match="needs --task node --mode sampled"):
        load_config(dict(task="graph", distributed="cooperative"))
    with pytest.raises(ConfigError, match="--distributed must be one of"):
        _config(tmp_path, distributed="sharded")
    with pytest.raises(ConfigError, match="--partition applies to --distributed cooperative"):
        _config(tmp_path, distributed="independent", partition="metis")
    with pytest.raises(ConfigError, match="needs 2 or more processes"):
        NodeTask(_config(tmp_path))
