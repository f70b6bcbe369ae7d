"""The prefetching thread: results in order, errors re-raised, and at most `depth` steps
alive beside the one the caller holds."""

from __future__ import annotations

import threading
import time

import pytest

from gnnforge.train._prefetch import Prefetcher


class _Tracker:
    """Counts steps started by the producer and steps released by the consumer."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = 0
        self.released = 0
        self.most_ahead = 0

    def produce(self, step: int) -> int:
        with self.lock:
            self.started += 1
            self.most_ahead = max(self.most_ahead, self.started - self.released)
        time.sleep(0.001)
        return step * step

    def release(self) -> None:
        with self.lock:
            self.released += 1


def _wait_until(condition, timeout_s=30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the prefetch thread made no progress"
        time.sleep(0.002)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_results_in_order_and_at_most_depth_steps_ahead(depth):
    tracker = _Tracker()
    start, stop = 2, 12
    prefetcher = Prefetcher(tracker.produce, start, stop, depth)
    for step in range(start, stop):
        assert prefetcher.get(step) == step * step
        # While the caller "computes", the thread fills every free slot, and no more.
        ahead = min(step + 1 + depth, stop) - start
        _wait_until(lambda: tracker.started >= ahead)
        time.sleep(0.02)  # room for a step too many to start, were it allowed
        tracker.release()  # the caller is done with this step
    # The step the caller holds plus `depth` started by the thread.
    assert tracker.most_ahead == depth + 1


def test_the_thread_waits_for_a_free_slot():
    tracker = _Tracker()
    prefetcher = Prefetcher(tracker.produce, 0, 10, 2)
    _wait_until(lambda: tracker.started == 2)
    time.sleep(0.1)  # nobody consumes: a third step must not start
    assert tracker.started == 2
    prefetcher.get(0)
    _wait_until(lambda: tracker.started == 3)
    time.sleep(0.1)
    assert tracker.started == 3


def test_an_error_is_raised_by_the_get_of_its_step():
    def produce(step):
        if step == 3:
            raise KeyError("boom at 3")
        return step

    prefetcher = Prefetcher(produce, 0, 6, 2)
    assert [prefetcher.get(s) for s in range(3)] == [0, 1, 2]
    with pytest.raises(KeyError, match="boom at 3"):
        prefetcher.get(3)


def test_out_of_order_and_bad_depth_are_refused():
    prefetcher = Prefetcher(lambda s: s, 0, 2, 1)
    with pytest.raises(ValueError, match="asked for step 1, next is 0"):
        prefetcher.get(1)
    assert prefetcher.get(0) == 0 and prefetcher.get(1) == 1
    with pytest.raises(ValueError, match="asked for step 2"):
        prefetcher.get(2)
    with pytest.raises(ValueError, match="depth must be >= 1"):
        Prefetcher(lambda s: s, 0, 2, 0)
