"""Measured selection: run the surviving candidates on the real input during the first
iterations and lock in the fastest (empirical selection, as cuDNN's benchmark mode and
TVM's tuning do), with its cost counted and bounded.

A race is pure bookkeeping: `next_call` says which plan the layer runs now and whether
that call is timed, `record` takes the call's seconds (forward, plus backward when
training). Every call is a real iteration (all plans compute the same values), so the
race costs only what its calls take beyond the winner's: the overhead. It is bounded
by a budget, a fraction of a run of `horizon` iterations of the best plan (2% of 100 by
default), which the layer's planning time counts against too: a call that would pass it
is not made.

Every timed run follows a run of the same plan, as every call of a locked-in plan does:
a call's page faults depend on what the call before it freed (glibc gives freed
multi-megabyte tensors back to the kernel), so a plan timed right after another plan
pays for its neighbour's frees. On Cora, GCN 32 -> 256 inference (glibc's thresholds
at 3 MB), the dynamic (ÂX)W took 0.59 ms after itself and 1.76-1.84 ms after another
order (645 faults: one fresh 2708 x 256 tensor); in one state of the planner
benchmark's process, the default 0.99 ms after itself and 1.74-1.86 ms after either
other order. Timed after each other, the race called the dynamic order the best where
the benchmark's rotations (timed after other plans too) found it 1.05x or 0.70x the
default. So a candidate whose last call ran another plan first runs once untimed (its
*settling* run, a real iteration counted in the overhead), then timed.

Timed runs come in interleaved rounds (every surviving candidate once per round, in
their order, then in reverse, and so on: a round starts with the plan the last one
ended with, which needs no settling run), so a slow phase of a shared machine hits the
candidates alike instead of whichever ran then. Candidates are compared by the median
of their runs in rounds. (Their fastest run, used before, is the estimate external
interference leaves alone, but some plans run fast or slow by turns on a quiet machine
too, e.g. 5.7 or 6.9 ms on Cora, and the fastest run then picks the lucky one; replayed
on the planner benchmark's own runs, the median chose better: docs/planner.md.) How far
two candidates may still be mistaken for each other is read from their own runs: the
*spread* of a candidate is the relative gap between its two fastest runs. After each
round the candidates clearly slower than the best leave (after one round only gross
losers, 4x: a single run may have been preempted; later, those slower by more than 10%
and their spread); after `samples` rounds every candidate whose gap to the best
exceeds the two plans' spread leaves, and while one remains within it, another round
decides between two, the best and the decision (`keep`; the runner-up when the decision
is the best), up to `max_samples`; then the decision stays if it is still in, else the
best. Near-equal candidates cost almost nothing per extra round,
which is where extra rounds are spent. The overhead is counted against the
winner's median, which includes the noise.

Runs are compared as timed, page faults included. Before runs were settled, the faults
beyond a candidate's fewest were discounted (`fault_s` seconds each): they followed what
the neighbour before it freed (on Cora, 1 ms of faults in a 4 ms call, after one
neighbour and not after another). A settled run has no neighbour, and its faults are
the plan's own in this process state: discounted, a plan faulting in every other run
looked faster than it runs (SAGE Mycielski-11 256 -> 256 training, 2 threads: M(XWl)
timed 8.33, 7.83, 8.37, 7.51 ms with 768, 0, 1151, 0 faults, compared as 6.73, 7.83,
5.99, 7.51, beat (MX)Wl's 7.50-7.94 and was locked in; the benchmark found it 8%
slower, in two races of six, 2026-11-27). The faults a run takes are still recorded:
a first plan that spends its runs faulting brings the default into the race
(`own_fault_share`, `_auto`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Generic, TypeVar

__all__ = ["Race"]

P = TypeVar("P")

# After one round a candidate leaves only when its one run is this much slower than the
# best's: a lone run may have been preempted (on the loaded 2-core machine a
# 1 ms run took 11-19 ms, measured). From the second round on, a loss beyond this margin
# (or beyond the two plans' spread, if larger) is a consistent one. The budget, not
# these rules, bounds what slow candidates cost.
_DROP_AFTER_ONE = 4.0
_DROP_MARGIN = 0.10
# After one round, a run this much slower than the best's drops its candidate when the
# cost models also predicted it slower than the best: two independent signs, where a
# preempted lone run is one. Keeping such a candidate for a second round cost one more
# run at 1.5-2.4x the best's in the planner benchmark (GAT/SAGE 256 -> 32 and 32 -> 256):
# 0.5-1.4% of 100 iterations, more than the race's whole budget allows the slow plans.
_DROP_AFTER_ONE_AGREED = 1.5
# After `samples` rounds the decision (`keep`) leaves only when a paired sign test over
# the rounds says the best beat it more often than a tie would, at this level.
_SIGN_LEVEL = 0.2
# ... and only for a plan whose median is this much faster than the decision's: on a tie
# the medians of a few runs each fall apart by chance (GAT Cora 256 -> 256 inference, both
# orders the same work, six races: 0-4.5%), and a sign test alone let such a tie leave
# the default for a plan the planner benchmark then found 2-3% slower (GAT Cora 256 ->
# 256, SAGE Mycielski-11 256 -> 256 training; 2026-11-27). The gains given up are small:
# of the best plans' gains over the default at 256 -> 256 in two benchmark runs (48
# configurations: GCN, GAT, SAGE; native and numba kernels), the four between 0 and 3%
# were 0.6-2.2%.
_LEAVE_DECISION_GAIN = 0.03


class Race(Generic[P]):
    """Which candidate to run on each call until a winner is locked in.

    Each candidate's first run is untimed, the first plan's first (it pays the
    per-graph preparation every plan shares; the others pay their own one-off costs,
    such as a kernel compiled on first use: 16 s once, measured), and settles it: its
    timed run of the first round follows. The first plan's, the *probe*, predicts the
    others' first-run costs. Then timed rounds (module docstring), each timed run right
    after a run of the same plan, until one candidate remains, or after `samples`
    rounds none is within the best's spread, or after `max_samples` rounds. A call
    whose expected overhead would pass the budget is not made: its candidate is
    dropped.

    Args:
        plans: the candidates, the first to run first (the auto layers put the models'
            decision there); ties go to the earlier plan.
        samples: timed rounds before a winner may be locked in.
        budget: the overhead allowed, as a fraction of `horizon` runs of the best.
        horizon: iterations the budget is a fraction of (a 100-epoch run: 100).
        predicted: the cost models' seconds per plan, if any: a candidate whose first
            run is predicted (relative to the first plan's probe) to pass the budget is
            dropped without running (measured: a default 66x slower than the best cost
            65 iterations in its one untimed run).
        max_samples: timed rounds at most, when the best two stay within their spread
            (default samples + 2: each extra round costs what the candidates still
            in it take beyond the best).
        keep: the plan kept when no other is measured faster beyond the noise (the
            models' decision), which need not run first: the auto layers run the
            cheapest prediction first, so a slow decision (the default when in doubt)
            runs once untimed and once timed in the first round, after which pruning
            and the budget can stop it (run first, before runs were settled, it ran
            twice before any comparison and a third time in the first round: 2.7
            iterations of the best each, at 3.7x, once).
        fault_s: seconds one page fault costs (`_faults.page_fault_seconds`): what the
            faults `record` reports cost (`own_fault_share`; runs are compared as
            timed).
        spent_s: seconds already spent on this decision before its first call (the
            layer's planning), counted against the budget: the target bounds planning
            and measuring together (Mycielski-11, GCN 32 -> 256: planning took 0.75% of
            100 iterations and the race 1.6% more within its own budget).

    Raises:
        ValueError: with no plans, samples < 1, max_samples < samples, a negative budget,
            horizon < 1 or `keep` not an index of `plans`.
    """

    def __init__(self, plans: Sequence[P], samples: int = 3, budget: float = 0.02,
                 horizon: int = 100, predicted: Sequence[float] | None = None,
                 max_samples: int | None = None, keep: int = 0, fault_s: float = 0.0,
                 spent_s: float = 0.0) -> None:
        max_samples = samples + 2 if max_samples is None else max_samples
        if (not plans or samples < 1 or max_samples < samples or budget < 0 or horizon < 1
                or not 0 <= keep < len(plans) or fault_s < 0 or spent_s < 0):
            raise ValueError(f"Race: need at least one plan, samples >= 1, max_samples >= "
                             f"samples, budget >= 0, horizon >= 1, 0 <= keep < plans, "
                             f"fault_s >= 0 and spent_s >= 0; got {len(plans)} plans, "
                             f"samples={samples}, max_samples={max_samples}, budget="
                             f"{budget}, horizon={horizon}, keep={keep}, fault_s={fault_s}, "
                             f"spent_s={spent_s}")
        self.keep, self.fault_s, self.spent_s = keep, fault_s, spent_s
        self.plans = list(plans)
        self.samples, self.max_samples = samples, max_samples
        self.budget, self.horizon = budget, horizon
        self.predicted = list(predicted) if predicted is not None else None
        self.times: dict[int, list[float]] = {i: [] for i in range(len(self.plans))}
        self._timed: dict[int, list[tuple[float, int]]] = {i: [] for i in self.times}
        self.calls: list[tuple[int, float | None]] = []  # (plan, seconds or None: untimed)
        self.alive = list(range(len(self.plans)))
        self.rounds = 0  # timed rounds completed
        self.winner: P | None = self.plans[0] if len(self.plans) == 1 else None

    @property
    def done(self) -> bool:
        return self.winner is not None

    @property
    def max_calls(self) -> int:
        """Calls the race takes at most: a timed and a settling run per plan and round."""
        return 2 * len(self.plans) * self.max_samples

    def next_call(self) -> tuple[P, bool]:
        """(plan to run now, whether to time it). After the race: (winner, False)."""
        if self.winner is not None:
            return self.winner, False
        while not self._end_rounds():
            index = self._due()
            if self.calls and self.calls[-1] == (index, None):
                return self.plans[index], True  # its settling run was made: time this one
            settled = bool(self.calls) and self.calls[-1][0] == index
            if all(i != index for i, _ in self.calls):  # its first run: untimed
                if self._predicted_over_budget(index):
                    self.alive.remove(index)
                    continue
            elif (self._over_budget(index, 1 if settled else 2)
                  and not self._owed_a_second_run(index)):
                self.alive.remove(index)
                continue
            if settled:
                return self.plans[index], True
            self.calls.append((index, None))
            return self.plans[index], False
        return self.winner, False

    def record(self, plan: P, seconds: float, faults: int = 0) -> None:
        """Seconds (and minor page faults) of the last timed call of `plan`; may end a
        round and lock in the winner. The call counts, and is compared, at its
        seconds."""
        if self.winner is not None:
            return
        index = self.plans.index(plan)
        self.calls.append((index, float(seconds)))
        self._timed[index].append((float(seconds), int(faults)))
        self.times[index].append(float(seconds))
        self._end_rounds()

    @property
    def probe(self) -> float | None:
        """The first plan's first timed run, from which the others' first runs are
        predicted (with the models' cost ratios); None before it."""
        return self.times[0][0] if self.times[0] else None

    def own_fault_share(self, index: int) -> float:
        """The share of `index`'s median timed run that the page faults it took in every
        run cost (its fewest, at `fault_s` each: faults no neighbour caused, since every
        timed run follows a run of the same plan); 0 without runs."""
        if not self._timed[index]:
            return 0.0
        own = min(faults for _, faults in self._timed[index])
        median = statistics.median(seconds for seconds, _ in self._timed[index])
        return min(own * self.fault_s / median, 1.0) if median > 0 else 0.0

    def _due(self) -> int:
        """The next candidate of the current round. Rounds run the candidates in their
        order, then in reverse, and so on: each round starts with the plan the previous
        one ended with, whose last run settles it (no extra run), and the first plan's
        next run, after its first run and first timed run, comes last in the second
        round, after the others were measured, so the budget can stop it (with the
        second round starting at the first plan, then always the decision, a default
        3.8x slower than the best cost 8.5% of 100 iterations)."""
        order = self.alive if self.rounds % 2 == 0 else self.alive[::-1]
        return next(i for i in order if len(self.times[i]) <= self.rounds)

    def _end_rounds(self) -> bool:
        """Close every round all candidates have run (pruning after each); True once
        the winner is locked in."""
        if len(self.alive) == 1:
            self.winner = self.plans[self.alive[0]]
        while self.winner is None and all(len(self.times[i]) > self.rounds
                                          for i in self.alive):
            self.rounds += 1
            self._prune()
            if len(self.alive) == 1:
                self.winner = self.plans[self.alive[0]]
            elif self.rounds >= self.max_samples:
                # still within the spread of the best: the decision (`keep`) is left
                # only for one measured beyond the noise
                self.winner = self.plans[self.keep if self.keep in self.alive
                                         else self._best()]
        return self.winner is not None

    def spread(self, index: int) -> float:
        """The relative gap between `index`'s two fastest runs in rounds (0 with fewer
        than two): how far apart two runs of the same plan fall here and now."""
        runs = sorted(self.times[index])
        return runs[1] / runs[0] - 1.0 if len(runs) >= 2 and runs[0] > 0 else 0.0

    def _prune(self) -> None:
        """After round `rounds`: drop the candidates slower than the best by more than
        the round's threshold (gross after one round, clear after two, beyond the two
        plans' spread once `samples` rounds are in)."""
        best = self._best()
        fastest = self._score(best)
        for index in [i for i in self.alive if i != best]:
            spread = max(self.spread(index), self.spread(best))
            if self.rounds >= self.samples:
                if index == self.keep and not (self._beaten_consistently(index, best)
                                               and self._score(index) > fastest * (
                                                   1.0 + _LEAVE_DECISION_GAIN)):
                    continue  # a tie within the noise: the decision stays in
                allowed = spread
            elif self.rounds == 1:
                allowed = (_DROP_AFTER_ONE_AGREED if self._predicted_slower(index, best)
                           else _DROP_AFTER_ONE) - 1.0
            else:
                allowed = max(_DROP_MARGIN, spread)
            if self._score(index) > (1.0 + allowed) * fastest:
                self.alive.remove(index)
        if self.rounds >= self.samples:
            self._keep_two(best)

    def _keep_two(self, best: int) -> None:
        """Extra rounds decide between two candidates: the best and the decision
        (`keep`), or the best and the runner-up when the decision is the best or gone.
        Only these two can be the outcome (after the last round the decision stays
        unless the best beat it consistently and by more than 3%), and every candidate
        in a round costs a settling and a timed run: on GCN 256 -> 256 training, four
        plans the race saw within 4% ran two extra rounds each, which the planner
        benchmark's longer measurements priced at 2.0-2.2% of 100 iterations (they
        found the plans up to 1.17x apart; 2026-11-27)."""
        if len(self.alive) <= 2:
            return
        others = sorted((i for i in self.alive if i != best),
                        key=lambda i: (i != self.keep, self._score(i), i))
        self.alive = [i for i in self.alive if i in (best, others[0])]

    def _beaten_consistently(self, index: int, best: int) -> bool:
        """Whether `best` ran faster than `index` in so many of the rounds both ran that
        a tie would do so with probability at most `_SIGN_LEVEL` (a one-sided paired sign
        test: the runs of one round share the machine's phase; with 3, 4, 5 rounds:
        every round, every round, 4 of 5). The decision (`keep`) leaves after `samples`
        rounds only on such a consistent loss: on a tie (GAT 256 -> 256, where both
        orders do the same sparse work) the gap between medians is noise, and the spread
        (two fastest runs) can be narrower than it, which let the race swap the decision
        for a plan the benchmark's later runs found up to 4-16% slower. Rounds are
        aligned: every candidate still in has run once in each round."""
        pairs = list(zip(self.times[index], self.times[best]))
        wins = sum(theirs < ours for ours, theirs in pairs)
        tail = sum(math.comb(len(pairs), k) for k in range(wins, len(pairs) + 1))
        return bool(pairs) and tail / 2 ** len(pairs) <= _SIGN_LEVEL

    def _score(self, index: int) -> float:
        """What candidates are compared by: the median of their runs in rounds."""
        return statistics.median(self.times[index]) if self.times[index] else math.inf

    def _best(self) -> int:
        """The candidate with the lowest median in rounds (ties: `keep`, then the earlier
        plan)."""
        return min(self.alive, key=lambda i: (self._score(i), i != self.keep, i))

    def _predicted_slower(self, index: int, best: int) -> bool:
        """Whether the cost models predicted `index` slower than `best` (False without
        predictions)."""
        return self.predicted is not None and self.predicted[index] > self.predicted[best]

    # ---- cost: every call counts, timed, settling or first

    def _runs(self, index: int) -> list[float]:
        return self.times[index]

    def _reference(self) -> int | None:
        """The plan overheads are counted against: the winner, else the fastest so far."""
        if self.winner is not None:
            return self.plans.index(self.winner)
        timed = [i for i in self.alive if self._runs(i)]
        return min(timed, key=lambda i: (min(self._runs(i)), i)) if timed else None

    def budget_s(self) -> float:
        """Seconds of overhead allowed: `budget` x `horizon` runs of the best so far."""
        best = self._reference()
        if best is None or not self._runs(best):
            return float("inf")
        return self.budget * self.horizon * statistics.median(self._runs(best))

    def overhead_s(self) -> float:
        """What the calls so far took beyond as many calls of the reference plan (the
        winner, once locked in); an untimed call counts at its plan's median, or, for a
        plan never timed, at its predicted seconds (0 extra without a prediction)."""
        best = self._reference()
        if best is None or not self._runs(best):
            return 0.0
        base = statistics.median(self._runs(best))
        extra = 0.0
        for index, seconds in self.calls:
            if seconds is None:
                runs = self._runs(index)
                seconds = statistics.median(runs) if runs else self._predicted_s(index, base)
            extra += seconds - base
        return extra

    def _predicted_s(self, index: int, otherwise: float) -> float:
        """`index`'s seconds by the models' cost ratio to the first plan, from its probe
        (`otherwise` without a prediction or probe)."""
        if self.predicted is None or self.probe is None or self.predicted[0] <= 0:
            return otherwise
        return self.probe * self.predicted[index] / self.predicted[0]

    def _predicted_over_budget(self, index: int) -> bool:
        """Whether `index`'s first run and the timed run that judges it, predicted from
        the probe and the models' cost ratio, would pass the budget: an untimed run
        alone decides nothing (a candidate 1.8x slower than the best used to be started
        and then timed past the budget, Mycielski-11 GCN 32 -> 256)."""
        if self.predicted is None or self.probe is None or self.predicted[0] <= 0:
            return False
        expected = self._predicted_s(index, self.probe) - self.probe
        return self._spent() + 2 * max(expected, 0.0) > self.budget_s()

    def _over_budget(self, index: int, runs: int) -> bool:
        """Whether `runs` more runs of `index` (its timed run, and its settling run if the
        last call ran another plan) are expected to pass the budget."""
        best = self._reference()
        if best is None or index == best or not self._runs(index):
            return False
        # what one more run is expected to cost, by the medians `overhead_s` counts with
        # (by the fastest runs, the race spent up to 2.9% of 100 iterations where its
        # budget was 2%: GCN 256 -> 256 training, four candidates within 10%)
        expected = (statistics.median(self._runs(index))
                    - statistics.median(self._runs(best)))
        return self._spent() + runs * max(expected, 0.0) > self.budget_s()

    def _owed_a_second_run(self, index: int) -> bool:
        """Whether `index` is the decision (`keep`) with one timed run: one run decides
        nothing (a preempted or faulting run), and the budget, priced by that one run,
        must not drop the decision on it. SAGE Cora 256 -> 256 inference, 2 threads:
        the default's one timed run took 4.52 ms where its later runs take 3.4-3.6, the
        other order's 3.54; priced at 0.98 ms a run, the default's next two runs passed
        the budget, and the other order, 2-4% slower by the benchmark's runs, was locked
        in (2026-11-27). Owed only while that run is within `_DROP_AFTER_ONE_AGREED`
        of the best's, as the first round's pruning would keep it too (a default 3.8x
        slower is not run again): the two runs then cost at most one run of the best
        beyond the race's budget, which aims at half of what the user allowed."""
        best = self._reference()
        return (index == self.keep and len(self.times[index]) == 1 and best is not None
                and self.times[index][0] <= _DROP_AFTER_ONE_AGREED * self._score(best))

    def _spent(self) -> float:
        """What counts against the budget so far: the planning before the race and the
        race's own overhead."""
        return self.spent_s + self.overhead_s()
