"""Early stopping and model selection: which epoch's weights are kept, and when to stop.

Three rules (`--early-stopping`), each a pure function of the validation numbers so far:

- `metric` (the default): keep the weights of the epoch with the best validation metric
  (the task's, e.g. val_accuracy); stop `--patience` epochs after it.
- `loss`: the same on the validation loss (lower is better), which the task must report
  as `val_loss`.
- `loss-and-metric`: Velickovic et al.'s GAT code (github.com/PetarV-/GAT, execute_cora.py):
  patience restarts whenever the loss reaches a new minimum or the metric a new best
  (ties count), and the weights are kept only at an epoch where both do at once.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RULES", "Standing", "judge"]

RULES = ("metric", "loss", "loss-and-metric")


@dataclass
class Standing:
    """The validation record the rules read and update (kept in every checkpoint).

    kept: the value (metric, or loss for the `loss` rule) of the kept epoch; kept_epoch
    its index (-1: none yet); best_metric / lowest_loss: the records seen so far;
    bad_epochs: epochs since patience last restarted.
    """

    kept: float | None = None
    kept_epoch: int = -1
    best_metric: float | None = None
    lowest_loss: float | None = None
    bad_epochs: int = 0


def _better(value: float, record: float | None, higher: bool, ties: bool) -> bool:
    if record is None:
        return True
    if ties and value == record:
        return True
    return value > record if higher else value < record


def judge(rule: str, standing: Standing, epoch: int, metric: float, loss: float | None,
          higher_is_better: bool) -> bool:
    """Update `standing` with epoch `epoch`'s validation numbers; True when this epoch's
    weights are to be kept.

    Raises:
        ValueError: an unknown rule, or a loss rule without a validation loss.
    """
    if rule not in RULES:
        raise ValueError(f"--early-stopping must be one of {RULES}, got {rule!r}")
    if rule != "metric" and loss is None:
        raise ValueError(f"--early-stopping {rule} needs a validation loss, which this task "
                         "does not report; use --early-stopping metric")
    if rule == "loss-and-metric":
        metric_record = _better(metric, standing.best_metric, higher_is_better, ties=True)
        loss_record = _better(loss, standing.lowest_loss, False, ties=True)
        keep = metric_record and loss_record
        if metric_record or loss_record:
            standing.bad_epochs = 0
        else:
            standing.bad_epochs += 1
        if keep:
            standing.kept, standing.kept_epoch = metric, epoch
    else:
        value, higher = (metric, higher_is_better) if rule == "metric" else (loss, False)
        keep = _better(value, standing.kept, higher, ties=False)
        if keep:
            standing.kept, standing.kept_epoch, standing.bad_epochs = value, epoch, 0
        else:
            standing.bad_epochs += 1
    if metric is not None and _better(metric, standing.best_metric, higher_is_better, False):
        standing.best_metric = metric
    if loss is not None and _better(loss, standing.lowest_loss, False, False):
        standing.lowest_loss = loss
    return keep
