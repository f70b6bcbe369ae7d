"""Sampler kernels split over threads: nogil numba calls on short-lived Python threads.

The samplers' kernels release the GIL, so T Python threads run T pieces at once. The
threads are started per call and joined before it returns (about 0.1 ms each, against
milliseconds of work per piece): no pool outlives a call, so a process forked between
calls (`--workers`, DataLoader workers) inherits nothing to break. numba's own
`parallel=True` is not used here because GNU OpenMP aborts a forked child once its parent
has started a pool.

The thread count follows torch's intra-op count, as DGL's samplers follow OpenMP's: a
training loop at `torch.set_num_threads(2)` samples on two threads, and a DataLoader
worker (which torch sets to one thread) on one. A sampler called from any thread but the
main one (a `Prefetcher` overlapping the next batch with this one's compute) runs on that
thread alone: torch's pool is busy on the same cores then, and more threads than cores
make its spinning barriers wait on descheduled threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["run_on_threads", "sampler_threads"]

# At most this many threads per call, and at least this much work per thread (items:
# picks or ids), below which a thread costs more than it saves.
MAX_THREADS = 8
MIN_ITEMS_PER_THREAD = 16384


def sampler_threads(items: int, threads: int | None = None) -> int:
    """Threads for a call over `items` items: `threads` (when None, torch's count on the
    main thread and 1 on any other), at most one per `MIN_ITEMS_PER_THREAD` items and
    `MAX_THREADS`, at least 1."""
    if threads is not None:
        wanted = threads
    elif threading.current_thread() is threading.main_thread():
        wanted = torch.get_num_threads()
    else:
        wanted = 1
    return max(1, min(wanted, MAX_THREADS, items // MIN_ITEMS_PER_THREAD))


def run_on_threads(calls: Sequence[Callable[[], Any]]) -> list[Any]:
    """Each call's result, in order: the first on this thread, the rest on new threads.

    Raises the first call's exception (in call order) after every thread has finished.
    """
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            results[index] = calls[index]()
        except BaseException as error:  # handed to the caller below
            errors[index] = error

    threads = [threading.Thread(target=run, args=(index,)) for index in range(1, len(calls))]
    for thread in threads:
        thread.start()
    if calls:
        run(0)
    for thread in threads:
        thread.join()
    for error in errors:
        if error is not None:
            raise error
    return results
