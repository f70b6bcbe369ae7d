"""Repack the emptiest pack: local search that removes packs one at a time.

Given a valid plan with P packs, take the emptiest pack out, put each of its items into
the pack where it overflows least, and repair the overflow by moving items between
packs and swapping pairs of items (steepest descent on the total overflow, with
sideways moves on plateaus so that tight instances can shuffle). When the overflow
reaches zero, the plan has P - 1 valid packs and the next emptiest pack goes; when the
budget or the step limit runs out, the last valid plan stands.

Overflow of a pack = sum_k max(0, load_k - limit_k) / limit_k + max(0, items - cap).
A step looks at one overflowing pack: for each of its items a, the change in overflow
of moving a to every other pack and of swapping a with every other item, vectorised
over packs and items (O(m (P + n) k) for m items in the pack, n items in all).
This works at the item level, so it runs only on plans of at most `MAX_ITEMS` graphs.
"""

from __future__ import annotations

import time

import numba
import numpy as np

from gnnforge.packing._tuple_pack import Content

__all__ = ["MAX_ITEMS", "remove_packs"]

MAX_ITEMS = 200_000
_PAIR_GRID = 2e6  # capacity grid points up to which two packs are re-split exactly
_UPHILL = 0.2  # probability of taking the best step when it increases the overflow


def _overflow(loads: np.ndarray, numbers: np.ndarray, limits: np.ndarray, cap: int
              ) -> np.ndarray:
    """[...] overflow of packs with loads [..., k] and item numbers [...]."""
    return (np.maximum(loads - limits, 0) / limits).sum(axis=-1) + np.maximum(numbers - cap, 0)


class _State:
    def __init__(self, pack_of: np.ndarray, item_bin: np.ndarray, bins: np.ndarray,
                 num_packs: int, limits: np.ndarray, cap: int) -> None:
        self.pack_of, self.item_bin, self.bins = pack_of, item_bin, bins
        self.limits, self.cap = limits.astype(np.float64), cap
        sizes = bins[item_bin].astype(np.float64)  # [n, k]
        self.sizes = sizes
        self.loads = np.zeros((num_packs, bins.shape[1]))
        np.add.at(self.loads, pack_of, sizes)
        self.numbers = np.bincount(pack_of, minlength=num_packs).astype(np.float64)

    def overflow(self) -> np.ndarray:
        return _overflow(self.loads, self.numbers, self.limits, self.cap)

    def move(self, item: int, target: int) -> None:
        source = self.pack_of[item]
        self.loads[source] -= self.sizes[item]
        self.loads[target] += self.sizes[item]
        self.numbers[source] -= 1
        self.numbers[target] += 1
        self.pack_of[item] = target

    def best_step(self, pack: int, rng: np.random.Generator) -> tuple[float, int, int, int]:
        """(change, item, target pack, swap partner or -1) of the best step out of `pack`."""
        here = self.overflow()
        best = (np.inf, -1, -1, -1)
        members = np.flatnonzero(self.pack_of == pack)
        others = np.flatnonzero(self.pack_of != pack)
        for item in rng.permutation(members).tolist():
            size = self.sizes[item]
            without = _overflow(self.loads[pack] - size, self.numbers[pack] - 1, self.limits,
                                self.cap) - here[pack]
            # Moves: item -> every other pack.
            gain = (_overflow(self.loads + size, self.numbers + 1, self.limits, self.cap)
                    - here) + without
            gain[pack] = np.inf
            target = int(np.argmin(gain))
            if gain[target] < best[0]:
                best = (float(gain[target]), item, target, -1)
            # Swaps: item <-> every item of another pack.
            partner_sizes = self.sizes[others]
            partner_packs = self.pack_of[others]
            change = (_overflow(self.loads[pack] - size + partner_sizes, self.numbers[pack],
                                self.limits, self.cap) - here[pack]
                      + _overflow(self.loads[partner_packs] - partner_sizes + size,
                                  self.numbers[partner_packs], self.limits, self.cap)
                      - here[partner_packs])
            change[self.item_bin[others] == self.item_bin[item]] = np.inf  # same size: no-op
            at = int(np.argmin(change)) if change.size else -1
            if at >= 0 and change[at] < best[0]:
                best = (float(change[at]), item, int(partner_packs[at]), int(others[at]))
        return best

    def apply(self, step: tuple[float, int, int, int]) -> None:
        _, item, target, partner = step
        source = self.pack_of[item]
        self.move(item, target)
        if partner >= 0:
            self.move(partner, source)


@numba.njit(cache=True, nogil=True)
def _subset_reach(weights: np.ndarray, strides: np.ndarray, digits: np.ndarray,
                  limits: np.ndarray) -> np.ndarray:
    """reach[c] = index of the item that first reached load c (-1: empty set, -2: never).

    0/1 subset sums of the items' size tuples on the capacity grid; following reach back
    (c -> c - weights[reach[c]]) lists a subset with load exactly c.
    """
    size = digits.shape[0]
    k = digits.shape[1]
    reach = np.full(size, -2, dtype=np.int32)
    reach[0] = -1
    for item in range(weights.shape[0]):
        offset = 0
        for j in range(k):
            offset += weights[item, j] * strides[j]
        for c in range(size - 1, -1, -1):
            if reach[c] == -2:
                continue
            fits = True
            for j in range(k):
                if digits[c, j] + weights[item, j] > limits[j]:
                    fits = False
                    break
            if fits and reach[c + offset] == -2:
                reach[c + offset] = item
    return reach


class _PairRepacker:
    """Exact re-split of the items of two packs: the split with the least overflow.

    One side always fits (it is a point of the capacity grid); the other side's
    overflow is minimised over every reachable load, so an overflowing pair becomes
    valid whenever any split of its items is.
    """

    def __init__(self, limits: np.ndarray) -> None:
        self.limits = limits.astype(np.int64)
        grid = self.limits + 1
        self.strides = np.concatenate([np.cumprod(grid[::-1])[::-1][1:], [1]]).astype(np.int64)
        size = int(np.prod(grid))
        self.digits = (np.arange(size, dtype=np.int64)[:, None] // self.strides) % grid

    def split(self, weights: np.ndarray, cap: int) -> tuple[float, np.ndarray] | None:
        """(overflow of the best split, bool side of each item) or None if no split fits cap.

        Items of size zero in every dimension (empty graphs) do not move any load, so the
        subset sums leave them out; they then fill whichever side keeps both item counts
        within cap.
        """
        empty = ~weights.any(axis=1)
        sized = np.flatnonzero(~empty)
        reach = _subset_reach(weights[sized], self.strides, self.digits, self.limits)
        points = np.flatnonzero(reach != -2)
        rest = weights.sum(axis=0) - self.digits[points]  # [R, k]
        over = (np.maximum(rest - self.limits, 0) / self.limits).sum(axis=1)
        zeros = int(empty.sum())
        for at in np.argsort(over, kind="stable")[:64].tolist():
            side = np.zeros(weights.shape[0], dtype=bool)
            c = int(points[at])
            while reach[c] >= 0:
                side[sized[reach[c]]] = True
                c -= int(weights[sized[reach[c]]] @ self.strides)
            taken = int(side.sum())
            left = sized.size - taken
            # Empty items on the taken side: as many as fit there while the rest fit beside.
            extra = min(max(cap - taken, 0), zeros)
            if taken + extra <= cap and left + zeros - extra <= cap:
                side[np.flatnonzero(empty)[:extra]] = True
                return float(over[at]), side
        return None


def _expand(shapes: list[tuple[Content, int]]) -> tuple[np.ndarray, np.ndarray, int]:
    item_bin, pack_of, pack = [], [], 0
    for content, count in shapes:
        for _ in range(count):
            item_bin.extend(content)
            pack_of.extend([pack] * len(content))
            pack += 1
    return np.asarray(item_bin, np.int64), np.asarray(pack_of, np.int64), pack


def _collapse(state: _State, num_packs: int) -> list[tuple[Content, int]]:
    order = np.lexsort((state.item_bin, state.pack_of))
    merged: dict[Content, int] = {}
    bounds = np.searchsorted(state.pack_of[order], np.arange(num_packs + 1))
    for p in range(num_packs):
        content = tuple(state.item_bin[order[bounds[p]:bounds[p + 1]]].tolist())
        if content:
            merged[content] = merged.get(content, 0) + 1
    return list(merged.items())


def _pair_step(state: _State, pack: int, pairs: _PairRepacker, rng: np.random.Generator,
               partners: int = 12) -> bool:
    """Re-split `pack` with one of the emptiest packs if that lowers the overflow."""
    over = state.overflow()
    fill = (state.loads / state.limits).max(axis=1)
    fill[pack] = np.inf
    for other in np.argsort(fill, kind="stable")[:partners].tolist():
        items = np.flatnonzero((state.pack_of == pack) | (state.pack_of == other))
        result = pairs.split(state.bins[state.item_bin[items]], state.cap)
        if result is not None and result[0] < over[pack] + over[other] - 1e-12:
            for item, side in zip(items.tolist(), result[1].tolist()):
                if state.pack_of[item] != (pack if side else other):
                    state.move(item, pack if side else other)
            return True
    return False


def _repair(state: _State, rng: np.random.Generator, deadline: float, max_steps: int,
            pairs: _PairRepacker | None) -> bool:
    for _ in range(max_steps):
        over = state.overflow()
        bad = np.flatnonzero(over > 1e-12)
        if bad.size == 0:
            return True
        if time.perf_counter() > deadline:
            return False
        pack = int(rng.choice(bad))
        if pairs is not None and _pair_step(state, pack, pairs, rng):
            continue
        step = state.best_step(pack, rng)
        if step[1] < 0:
            return False
        if step[0] < 1e-12 or rng.random() < _UPHILL:
            state.apply(step)  # downhill or sideways; uphill now and then to leave a minimum
    return False


def remove_packs(shapes: list[tuple[Content, int]], bins: np.ndarray, limits: np.ndarray,
                 max_items: int | None, floor: int, time_limit: float, seed: int = 0,
                 max_steps: int = 2000) -> list[tuple[Content, int]]:
    """A valid plan with as few packs as the search reaches (never more than `shapes`).

    Args:
        shapes: a valid plan as (bin indices, count) pairs.
        bins, limits, max_items: the packing input.
        floor: a lower bound on packs; the search stops there.
        time_limit: seconds.
        seed: for the random choices (runs are reproducible).
        max_steps: repair steps per removed pack.
    """
    deadline = time.perf_counter() + time_limit
    item_bin, pack_of, num_packs = _expand(shapes)
    if item_bin.size == 0 or item_bin.size > MAX_ITEMS:
        return shapes
    cap = int(max_items) if max_items else item_bin.size
    rng = np.random.default_rng(seed)
    grid = float(np.prod(limits.astype(np.float64) + 1))
    pairs = _PairRepacker(limits) if grid <= _PAIR_GRID else None
    best = shapes
    while num_packs > floor and time.perf_counter() < deadline:
        state = _State(pack_of.copy(), item_bin, bins, num_packs, limits, cap)
        fill = (state.loads / state.limits).max(axis=1)
        emptiest = int(np.argmin(fill))
        last = num_packs - 1  # the last pack takes the emptiest one's index, which goes
        removed, moved = state.pack_of == emptiest, state.pack_of == last
        state.pack_of[moved] = emptiest
        state.pack_of[removed] = -1
        state.loads[emptiest], state.numbers[emptiest] = state.loads[last], state.numbers[last]
        state.loads, state.numbers = state.loads[:last].copy(), state.numbers[:last].copy()
        for item in np.flatnonzero(state.pack_of == -1).tolist():
            gain = _overflow(state.loads + state.sizes[item], state.numbers + 1, state.limits,
                             cap) - state.overflow()
            slack = (state.loads / state.limits).max(axis=1)  # tie-break: emptier first
            target = int(np.lexsort((slack, gain))[0])
            state.pack_of[item] = target
            state.loads[target] += state.sizes[item]
            state.numbers[target] += 1
        if not _repair(state, rng, deadline, max_steps, pairs):
            break
        pack_of, num_packs = state.pack_of, last
        best = _collapse(state, num_packs)
    return best
