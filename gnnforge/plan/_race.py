"""Measured selection: run the surviving candidates on the real input during the first
iterations and lock in the fastest (empirical selection, as cuDNN's benchmark mode and
TVM's tuning do), with its cost counted and bounded.

A race is pure bookkeeping: `next_call` says which plan the layer runs now and whether
that call is timed, `record` takes the call's seconds (forward, plus backward when
training). Every call is a real iteration (all plans compute the same values), so the
race costs only what its calls take beyond the winner's: the overhead. It is bounded
by a budget, a fraction of a run of `horizon` iterations of the best plan (2% of 100 by
default): a call that would pass it is not made, and a candidate clearly slower than
the best is dropped early.

Candidates are compared by their fastest timed run. On a shared machine timing noise
only adds time (another job takes the core), so the minimum is the estimate it leaves
alone; the overhead is counted against the winner's median, which includes it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Generic, TypeVar

__all__ = ["Race"]

P = TypeVar("P")

# A candidate is dropped when even its fastest run is this much slower than the best
# plan's fastest: after one timed run (only a gross loss: on the loaded 2-core machine a
# 1 ms run was preempted to 11-19 ms, measured), and after two or more (a small but
# consistent one). The budget, not this rule, bounds what slow candidates cost.
_DROP_AFTER_ONE = 4.0
_DROP_AFTER_MORE = 1.1


class Race(Generic[P]):
    """Which candidate to run on each call until a winner is locked in.

    Each candidate's first run is untimed, the predicted best first (it pays the
    per-graph preparation every plan shares; the others pay their own one-off costs,
    such as a kernel compiled on first use: 16 s once, measured); then the candidate
    with the fewest timed runs goes next, until every remaining candidate has `samples`
    of them or one remains. A call whose expected overhead would pass the budget is not
    made: its candidate is dropped.

    Args:
        plans: the candidates, the predicted best first.
        samples: timed runs per candidate.
        budget: the overhead allowed, as a fraction of `horizon` runs of the best.
        horizon: iterations the budget is a fraction of (a 100-epoch run: 100).
        predicted: the cost models' seconds per plan, if any: a candidate whose first
            run is predicted (relative to the first plan's measured run) to pass the
            budget is dropped without running (measured: a default 66x slower than the
            best cost 65 iterations in its one untimed run).

    Raises:
        ValueError: with no plans, samples < 1, a negative budget or horizon < 1.
    """

    def __init__(self, plans: Sequence[P], samples: int = 3, budget: float = 0.02,
                 horizon: int = 100, predicted: Sequence[float] | None = None) -> None:
        if not plans or samples < 1 or budget < 0 or horizon < 1:
            raise ValueError(f"Race: need at least one plan, samples >= 1, budget >= 0 and "
                             f"horizon >= 1; got {len(plans)} plans, samples={samples}, "
                             f"budget={budget}, horizon={horizon}")
        self.plans = list(plans)
        self.samples, self.budget, self.horizon = samples, budget, horizon
        self.predicted = list(predicted) if predicted is not None else None
        self.times: dict[int, list[float]] = {i: [] for i in range(len(self.plans))}
        self.calls: list[tuple[int, float | None]] = []  # (plan, seconds or None: untimed)
        self.alive = list(range(len(self.plans)))
        self.winner: P | None = self.plans[0] if len(self.plans) == 1 else None

    @property
    def done(self) -> bool:
        return self.winner is not None

    def next_call(self) -> tuple[P, bool]:
        """(plan to run now, whether to time it). After the race: (winner, False)."""
        if self.winner is not None:
            return self.winner, False
        if len(self.calls) == 1 and self.calls[0] == (0, None) and not self.times[0]:
            return self.plans[0], True  # the predicted best's measured run comes first
        called = {index for index, _ in self.calls}
        for index in list(self.alive):  # a plan's first run pays one-off costs: not timed
            if index not in called:
                if self._predicted_over_budget(index):
                    self.alive.remove(index)
                    continue
                self.calls.append((index, None))
                return self.plans[index], False
        if self._settle():
            return self.winner, False
        while True:
            index = min(self.alive, key=lambda i: (len(self.times[i]), i))
            if not self._over_budget(index):
                return self.plans[index], True
            self.alive.remove(index)
            if self._settle():
                return self.winner, False

    def record(self, plan: P, seconds: float) -> None:
        """Seconds of the last timed call of `plan`; may lock in the winner."""
        if self.winner is not None:
            return
        index = self.plans.index(plan)
        self.times[index].append(float(seconds))
        self.calls.append((index, float(seconds)))
        self._drop_slow()
        self._settle()

    def _settle(self) -> bool:
        finished = all(len(self.times[i]) >= self.samples for i in self.alive)
        if len(self.alive) == 1 or finished:
            self.winner = self.plans[self._best()]
        return self.winner is not None

    def _fastest(self, index: int) -> float:
        return min(self.times[index])

    def _best(self) -> int:
        timed = [i for i in self.alive if self.times[i]] or self.alive
        return min(timed, key=lambda i: (self._fastest(i) if self.times[i] else 0.0, i))

    def _drop_slow(self) -> None:
        best = self._fastest(self._best())
        for index in list(self.alive):
            runs = self.times[index]
            factor = _DROP_AFTER_ONE if len(runs) == 1 else _DROP_AFTER_MORE
            if runs and min(runs) > factor * best:
                self.alive.remove(index)

    def _reference(self) -> int | None:
        """The plan overheads are counted against: the winner, else the best so far."""
        if self.winner is not None:
            return self.plans.index(self.winner)
        timed = [i for i in self.alive if self.times[i]]
        return min(timed, key=lambda i: (self._fastest(i), i)) if timed else None

    def budget_s(self) -> float:
        """Seconds of overhead allowed: `budget` x `horizon` runs of the best so far."""
        best = self._reference()
        if best is None or not self.times[best]:
            return float("inf")
        return self.budget * self.horizon * statistics.median(self.times[best])

    def overhead_s(self) -> float:
        """What the calls so far took beyond as many calls of the reference plan (the
        winner, once locked in); an untimed call counts at its plan's median (0 extra
        when that plan was never timed)."""
        best = self._reference()
        if best is None or not self.times[best]:
            return 0.0
        base = statistics.median(self.times[best])
        extra = 0.0
        for index, seconds in self.calls:
            if seconds is None:
                seconds = statistics.median(self.times[index]) if self.times[index] else base
            extra += seconds - base
        return extra

    def _predicted_over_budget(self, index: int) -> bool:
        """Whether `index`'s first run, predicted from the first plan's measured run and
        the models' cost ratio, would pass the budget."""
        if self.predicted is None or not self.times[0] or self.predicted[0] <= 0:
            return False
        first = self._fastest(0)
        expected = first * (self.predicted[index] / self.predicted[0] - 1.0)
        return self.overhead_s() + max(expected, 0.0) > self.budget_s()

    def _over_budget(self, index: int) -> bool:
        best = self._reference()
        if best is None or not self.times[best] or not self.times[index] or index == best:
            return False
        # what one more run is expected to cost, from the runs least hit by noise
        expected = self._fastest(index) - self._fastest(best)
        return self.overhead_s() + max(expected, 0.0) > self.budget_s()
