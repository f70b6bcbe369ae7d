"""The learning rate of each epoch: constant, or multiplied by `gamma` every `step` epochs.

`step_lr(lr, epoch, step, gamma) = lr * gamma ** (epoch // step)`, what
`torch.optim.lr_scheduler.StepLR(optimizer, step, gamma)` gives when `scheduler.step()`
follows each epoch. The training loop sets it at every epoch's start from the epoch
number alone, so a resumed run needs no scheduler state.

No torch here: the CLI validates without loading it.
"""

from __future__ import annotations

__all__ = ["step_lr"]


def step_lr(lr: float, epoch: int, step: int, gamma: float) -> float:
    """The learning rate of 0-based `epoch`: `lr * gamma ** (epoch // step)`; `lr` when
    step is 0 (no schedule).

    Raises:
        ValueError: a negative epoch or step.
    """
    if epoch < 0 or step < 0:
        raise ValueError(f"step_lr: epoch and step must be >= 0, got epoch={epoch}, "
                         f"step={step}")
    return lr if step == 0 else lr * gamma ** (epoch // step)
