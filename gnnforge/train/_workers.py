"""Training batches built in worker processes (`--workers N`), handed over in step order.

The engine asks its task for `batch(index)` step by step. With workers, a torch
DataLoader over the step indices calls the same `batch` in N forked processes and returns
the results in order, so the model trains on exactly the batches it would get with 0
workers: each task makes `batch` a pure function of (seed, epoch, index) and keeps its
per-epoch counters in the main process. Fork keeps the task (dataset, packing plan,
sampler) shared with the workers, with nothing pickled on the way in; a worker's
exception is raised by the engine's next step, and an unsendable batch fails in the
worker (`gnnforge._worker_send`) instead of hanging.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch.utils.data

from gnnforge._worker_send import check_sendable

__all__ = ["step_batches"]


class _Steps(torch.utils.data.Dataset):
    """Item i is `produce(indices[i])`, checked to be sendable to the main process."""

    def __init__(self, produce: Callable[[int], Any], indices: Sequence[int]) -> None:
        self.produce, self.indices = produce, list(indices)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, position: int) -> Any:
        return check_sendable(self.produce(self.indices[position]), "a training batch")


def _start_method() -> str | None:
    """Fork where the platform has it (the task is inherited, not pickled)."""
    return "fork" if "fork" in multiprocessing.get_all_start_methods() else None


def step_batches(produce: Callable[[int], Any], indices: Sequence[int],
                 workers: int) -> Iterator[Any]:
    """`produce(i)` for each i of `indices` in order, built by `workers` processes (0: here).

    Raises:
        ValueError: when `workers` is negative.
    """
    if workers < 0:
        raise ValueError(f"workers must be >= 0, got {workers}")
    if workers == 0 or not indices:
        return (produce(index) for index in indices)
    loader = torch.utils.data.DataLoader(
        _Steps(produce, indices), batch_size=None, num_workers=min(workers, len(indices)),
        multiprocessing_context=_start_method(),
        # The loader seeds its workers from this generator, not from torch's global one,
        # which would then draw other dropout masks than a run without workers.
        generator=torch.Generator())
    return iter(loader)
