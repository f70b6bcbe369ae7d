"""The early-stopping rules on hand-made validation curves: which epoch is kept and when
patience runs out."""

from __future__ import annotations

import pytest

from gnnforge.train import ConfigError, NodeTask, fit, load_config
from gnnforge.train._early_stopping import Standing, judge


def _replay(rule, metrics, losses, higher=True):
    standing, kept, bad = Standing(), [], []
    for epoch, (metric, loss) in enumerate(zip(metrics, losses)):
        kept.append(judge(rule, standing, epoch, metric, loss, higher))
        bad.append(standing.bad_epochs)
    return standing, kept, bad


def test_metric_rule_keeps_the_first_best_epoch():
    standing, kept, bad = _replay("metric", [0.5, 0.7, 0.7, 0.6], [1.0, 0.9, 0.8, 0.7])
    assert kept == [True, True, False, False] and bad == [0, 0, 1, 2]
    assert (standing.kept, standing.kept_epoch) == (0.7, 1)


def test_loss_rule_keeps_the_lowest_loss():
    standing, kept, bad = _replay("loss", [0.5, 0.7, 0.7, 0.6], [1.0, 0.9, 0.95, 0.8])
    assert kept == [True, True, False, True] and bad == [0, 0, 1, 0]
    assert (standing.kept, standing.kept_epoch) == (0.8, 3)


def test_loss_and_metric_rule_is_the_gat_codes():
    # Epoch 1: both records (kept). Epoch 2: accuracy ties its record, loss rises: patience
    # restarts, weights not kept. Epoch 3: neither: one bad epoch. Epoch 4: both (tie on
    # the accuracy counts): kept.
    standing, kept, bad = _replay("loss-and-metric", [0.5, 0.7, 0.7, 0.6, 0.7],
                                  [1.0, 0.9, 0.95, 0.96, 0.85])
    assert kept == [True, True, False, False, True] and bad == [0, 0, 0, 1, 0]
    assert standing.kept_epoch == 4 and standing.lowest_loss == 0.85


def test_loss_rules_need_a_loss():
    with pytest.raises(ValueError, match="needs a validation loss"):
        judge("loss", Standing(), 0, 0.5, None, True)
    with pytest.raises(ConfigError, match="only --task node"):
        load_config({"task": "graph", "early_stopping": "loss"})
    with pytest.raises(ConfigError, match="--early-stopping must be one of"):
        load_config({"task": "node", "early_stopping": "accuracy"})


def test_node_task_reports_the_validation_loss(tmp_path):
    config = load_config(dict(task="node", dataset="sbm", epochs=3, hidden=8, progress=False,
                              out_dir=str(tmp_path), early_stopping="loss-and-metric"))
    summary = fit(config, NodeTask(config), printer=lambda *_: None)
    assert 1 <= summary["best epoch"] <= 3
