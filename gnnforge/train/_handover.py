"""The one place a sampled minibatch moves from the host to the model's device.

Samplers, the all_to_all of vertex ids and the exchange of input feature rows run on the
CPU (gloo); the model, its blocks, its input rows and its labels live on `--device`. The
embedding exchanges between layers run where the model runs (NCCL under a
'cpu:gloo,cuda:nccl' process group when that is a GPU), so their plans' index tensors
move too. Every tensor the model or the loss receives comes through `handover`, which
copies with `gnnforge._device.to_device` (pinned, non-blocking); `stage` page-locks a
minibatch ahead of time (in the prefetching thread), so `handover` only issues copies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import Tensor

from gnnforge import _device
from gnnforge.distributed._exchange import ExchangePlan, exchange
from gnnforge.sampling._block import Block

__all__ = ["OnDevice", "handover", "stage"]


@dataclass(frozen=True)
class OnDevice:
    """A minibatch as the model takes it, every tensor on the model's device.

    Attributes:
        blocks: per layer (input first), the blocks.
        x: [n, F] input rows (cooperative: the rows this process owns, or, when the input
            exchange already happened on the host, the first block's source rows).
        labels: [b] int64 labels of this process's seeds.
        exchanges: per layer, the embedding exchange to pass as `exchange=` (None: the
            model runs without exchanges).
    """

    blocks: list[Block]
    x: Tensor
    labels: Tensor
    exchanges: list[Callable[[Tensor], Tensor]] | None


def _identity(x: Tensor) -> Tensor:
    return x


def handover(blocks: Sequence[Block], x: Tensor, labels: Tensor,
             plans: Sequence[ExchangePlan | None] | None, group: Any,
             device: torch.device) -> OnDevice:
    """The minibatch on `device`, with exchanges that run there.

    Args:
        blocks: the sampled blocks (CPU).
        x: input rows (CPU).
        labels: labels of the seeds (CPU).
        plans: per layer, the exchange plan of the embeddings before that layer, None for a
            layer whose rows arrived already (the input rows, exchanged on the host); None
            for no exchanges at all.
        group: the process group of the exchanges (None: the default group).
        device: the model's device.
    """
    exchanges = None
    if plans is not None:
        exchanges = [_identity if plan is None
                     else partial(exchange, plan=plan.to(device), group=group)
                     for plan in plans]
    return OnDevice([block.to(device) for block in blocks], _device.to_device(x, device),
                    _device.to_device(labels, device), exchanges)


def stage(blocks: Sequence[Block], x: Tensor | None, labels: Tensor, device: torch.device
          ) -> tuple[list[Block], Tensor | None, Tensor]:
    """The minibatch's host tensors page-locked when `device` is a GPU (else themselves),
    so that `handover` only issues the non-blocking copies. `x` None: rows still in flight
    (they are page-locked by `handover`'s copy)."""
    return ([block.pin(device) for block in blocks],
            None if x is None else _device.pin(x, device), _device.pin(labels, device))
