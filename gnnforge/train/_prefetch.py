"""Prepare the next minibatches in a background thread while the current one computes."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Prefetcher"]


class Prefetcher:
    """Runs `produce(step)` for steps start, start + 1, ..., stop - 1 in a thread.

    Memory is bounded: the thread takes one of `depth` slots before it starts a step and
    `get` gives the slot back when it hands the step out, so at most `depth` steps exist
    beside the one the caller computes on (finished and waiting, or being produced), and
    the thread keeps no reference to a step it has queued. (A bounded queue alone is not
    enough: with `depth` results waiting, the thread would already be producing one more,
    so `depth + 2` minibatches were alive at once.)

    The numba sampling kernels release the GIL and torch's gloo collectives block outside
    it, so the thread overlaps with the main thread's forward and backward passes. An
    exception in the thread is raised by the `get` that would have returned its step. A
    producer that uses collectives must use a process group of its own (the main thread's
    collectives would interleave).
    """

    def __init__(self, produce: Callable[[int], Any], start: int, stop: int, depth: int) -> None:
        if depth < 1:
            raise ValueError(f"Prefetcher: depth must be >= 1, got {depth}")
        self.next_step = start
        self.stop = stop
        self._slots = threading.Semaphore(depth)
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, args=(produce, start, stop),
                                        name="gnnforge-prefetch", daemon=True)
        self._thread.start()

    def _run(self, produce: Callable[[int], Any], start: int, stop: int) -> None:
        for step in range(start, stop):
            self._slots.acquire()
            try:
                self._queue.put((step, produce(step), None))
            except BaseException as error:  # handed to the consumer, which re-raises
                self._queue.put((step, None, error))
                return

    def get(self, step: int) -> Any:
        """The result of `step`, which must be the next one in order."""
        if step != self.next_step or step >= self.stop:
            raise ValueError(f"Prefetcher: asked for step {step}, next is {self.next_step} "
                             f"(of {self.stop})")
        got, item, error = self._queue.get()
        self._slots.release()  # the caller owns this step now; the thread may start another
        if error is not None:
            raise error
        self.next_step = got + 1
        if self.next_step == self.stop:
            self._thread.join()
        return item
