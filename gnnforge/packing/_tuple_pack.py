"""Tuple histogram packing: LPFHP (best fit) and SPFHP (first fit from the emptiest pack).

Krell et al., "Tuple Packing: Efficient Batching of Small Graphs in Graph Neural
Networks" (Graphcore, 2022), extending the 1-D histogram packing of Krell et al. 2021.

Histogram bins are visited in descending order of a monotone heuristic of their size
tuple. Open packs are grouped by their remaining-space tuple; a group holds how many
packs have each content, so a bin's whole count moves in a few steps however large it
is. For a bin of size s with count c:

* LPFHP takes the group with the smallest heuristic of remaining space among those that
  fit s in every component (the fullest pack that fits), SPFHP the one with the largest
  (shortest pack first);
* min(c, group size) of its packs receive one item each and move to remaining r - s;
  this repeats until c is used up or nothing fits; then new packs open, each taking as
  many copies as fit (what placing the items one by one would do, since no older pack
  fits this size).

A pack closes (leaves the search) when it holds `max_graphs_per_pack` graphs or when its
remaining space is below the component-wise minimum of every bin still to come. The
graph cap is checked on the pack's content, not kept in the remaining-space key, so
packs with equal remaining space share one group whatever their graph counts.

Complexity. The open groups are mirrored in contiguous numpy arrays (remaining [G, k],
priority [G]); a query is one compiled (numba) pass of dominance test and arg-min over
them, O(G k) with a small constant (no temporaries).
Each step either finishes a bin or empties a group, so there are at most B + P steps
(B bins, P distinct (content, remaining) groups created), and the total is
O((B + P) G k) numpy work plus O(B log B) for the sort. G stays small in practice because
closed packs leave: on the 1.58M MOSES molecules B is in the hundreds; on 100,000
distinct random bins it is a few seconds (see docs/packing.md for measurements).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np

__all__ = ["PackWork", "histogram_pack"]

Content = tuple[int, ...]  # bin indices in a pack, in the order they were added

# One query's fixed cost (the Python between the compiled searches) in units of one open
# group scanned, the ratio of the two costs on this machine (order of magnitude).
_QUERY_COST = 3000


@dataclass
class PackWork:
    """Work a packing run did, counted (not timed), so budgets on it are deterministic.

    `units` = groups scanned by the open-pack searches + `_QUERY_COST` per search: the same
    number on any machine and under any load (the plain run on 107,304 random bins is
    9.1e8 units, about 3 s on this machine when quiet).
    """

    units: int = 0


@numba.njit(cache=True, nogil=True)
def _find(remaining: np.ndarray, priority: np.ndarray, count: int, size: np.ndarray,
          best_fit: bool) -> int:
    """Arg-min (best fit) or arg-max priority over the first `count` groups that fit `size`.

    One pass, no temporaries: this query is the inner loop of the whole algorithm.
    """
    best = -1
    best_value = 0.0
    k = size.shape[0]
    for row in range(count):
        value = priority[row]
        # A row that cannot beat the best so far needs no fit test: with thousands of
        # open groups (the improvement step's pre-opened packs) most rows end here.
        if best >= 0 and not (value < best_value if best_fit else value > best_value):
            continue
        fits = True
        for column in range(k):
            if remaining[row, column] < size[column]:
                fits = False
                break
        if fits:
            best, best_value = row, value
    return best


class _OpenPacks:
    """Open packs grouped by remaining space, mirrored in arrays for vectorised search."""

    def __init__(self, width: int, priority: Callable[[tuple[int, ...]], float]) -> None:
        self.remaining = np.empty((64, width), dtype=np.int64)
        self.priority = np.empty(64, dtype=np.float64)
        self.size = 0
        self.work = 0
        self.position: dict[tuple[int, ...], int] = {}
        self.keys: list[tuple[int, ...]] = []
        self.groups: list[dict[Content, int]] = []
        self._priority_of = priority

    def add(self, remaining: tuple[int, ...], content: Content, count: int) -> None:
        at = self.position.get(remaining)
        if at is None:
            if self.size == self.priority.size:
                self.remaining = np.concatenate([self.remaining, np.empty_like(self.remaining)])
                self.priority = np.concatenate([self.priority, np.empty_like(self.priority)])
            at = self.size
            self.size += 1
            self.remaining[at] = remaining
            self.priority[at] = self._priority_of(remaining)
            self.position[remaining] = at
            self.keys.append(remaining)
            self.groups.append({})
        group = self.groups[at]
        group[content] = group.get(content, 0) + count

    def find(self, size: np.ndarray, best_fit: bool) -> int:
        """Position of the group to fill, or -1 when no open pack fits `size`."""
        self.work += self.size + _QUERY_COST
        return int(_find(self.remaining, self.priority, self.size, size, best_fit))

    def remove(self, at: int) -> dict[Content, int]:
        """Take group `at` out (the last group moves into its place)."""
        last = self.size - 1
        group = self.groups[at]
        del self.position[self.keys[at]]
        if at != last:
            self.remaining[at] = self.remaining[last]
            self.priority[at] = self.priority[last]
            self.keys[at] = self.keys[last]
            self.groups[at] = self.groups[last]
            self.position[self.keys[at]] = at
        self.keys.pop()
        self.groups.pop()
        self.size = last
        return group

    def close_below(self, floor: np.ndarray, closed: list[tuple[Content, int]]) -> None:
        """Close every group that cannot fit the component-wise smallest future item."""
        dead = np.flatnonzero((self.remaining[:self.size] < floor).any(axis=1))
        for at in dead[::-1]:  # descending, so swapping the last group in is safe
            closed.extend(self.remove(int(at)).items())


def histogram_pack(bins: np.ndarray, counts: np.ndarray, limits: np.ndarray,
                   heuristic: Callable[[np.ndarray], np.ndarray], best_fit: bool,
                   max_items: int | None = None, initial_packs: int = 0,
                   work: PackWork | None = None) -> list[tuple[Content, int]]:
    """Pack a histogram; returns [(bin indices of one pack shape, number of such packs)].

    Args:
        bins: [B, k] int64 size tuples, each within `limits` (callers check).
        counts: [B] int64 > 0.
        limits: [k] int64 capacity per component (graph count included by the caller).
        heuristic: vectorised monotone priority on [n, k] sizes.
        best_fit: True for LPFHP, False for SPFHP.
        max_items: cap on items per pack (graph slots), or None.
        initial_packs: empty packs opened before the first bin (the improvement step's
            target count); those still empty at the end are discarded.
        work: when given, its `units` grow by this run's work (see `PackWork`).
    """
    if bins.shape[0] == 0:
        return []
    k_heuristic = bins.shape[1]
    cap = max_items if max_items else int(counts.sum()) + 1
    order = _descending(bins, counts, heuristic, k_heuristic)
    bins, counts = bins[order], counts[order]
    floors = np.minimum.accumulate(bins[::-1], axis=0)[::-1]  # min size of bins b..B-1
    limit_tuple = limits.astype(np.int64)

    scalar = getattr(heuristic, "scalar", None)

    def priority(remaining: tuple[int, ...]) -> float:
        if scalar is not None:
            return scalar(remaining)
        return float(heuristic(np.asarray([remaining], dtype=np.float64))[0])

    packs = _OpenPacks(bins.shape[1], priority)
    if initial_packs:
        packs.add(tuple(int(v) for v in limit_tuple), (), initial_packs)
    closed: list[tuple[Content, int]] = []
    limits_t = tuple(int(v) for v in limit_tuple)
    floor_rows = [tuple(row) for row in floors.tolist()]
    bin_rows = [tuple(row) for row in bins.tolist()]
    count_list = counts.tolist()
    floor_t = floor_rows[0]
    for b in range(bins.shape[0]):
        if floor_rows[b] != floor_t:
            floor_t = floor_rows[b]
            packs.close_below(floors[b], closed)
        _place_bin(packs, closed, b, bins[b], bin_rows[b], count_list[b], limits_t, floor_t,
                   best_fit, cap)
    packs.close_below(np.full(bins.shape[1], np.iinfo(np.int64).max), closed)
    if work is not None:
        work.units += packs.work
    # Map positions in the sorted order back to the caller's bin indices.
    return [(tuple(int(order[i]) for i in content), count) for content, count in closed if content]


def _descending(bins: np.ndarray, counts: np.ndarray,
                heuristic: Callable[[np.ndarray], np.ndarray], width: int) -> np.ndarray:
    values = np.asarray(heuristic(bins[:, :width].astype(np.float64)), dtype=np.float64)
    # Descending heuristic, ties broken by descending size tuple (deterministic order).
    keys = [-bins[:, c] for c in range(bins.shape[1] - 1, -1, -1)] + [-values]
    return np.lexsort(keys)


def _place_bin(packs: _OpenPacks, closed: list[tuple[Content, int]], b: int, size: np.ndarray,
               size_t: tuple[int, ...], count: int, limits: tuple[int, ...],
               floor: tuple[int, ...], best_fit: bool, cap: int) -> None:
    # Tuples, not small arrays, in this loop: numpy's per-call overhead on 3-element
    # arrays costs more than the arithmetic.
    while count:
        at = packs.find(size, best_fit)
        if at < 0:
            _open_new(packs, closed, b, size_t, count, limits, floor, cap)
            return
        key = packs.keys[at]
        new_remaining = tuple(r - v for r, v in zip(key, size_t))
        group = packs.remove(at)
        while count and group:
            content, available = group.popitem()
            taken = min(available, count)
            if available > taken:
                group[content] = available - taken
            _add(packs, closed, new_remaining, content + (b,), taken, floor, cap)
            count -= taken
        for content, left in group.items():  # packs of this group that got nothing
            packs.add(key, content, left)


def _open_new(packs: _OpenPacks, closed: list[tuple[Content, int]], b: int,
              size_t: tuple[int, ...], count: int, limits: tuple[int, ...],
              floor: tuple[int, ...], cap: int) -> None:
    """Open packs for `count` items of one size that fit no open pack.

    Item by item, best fit (and first fit from the emptiest pack alike) would put each
    next copy into the newest pack until it is full, since no older pack fits this size;
    so each new pack takes m = as many copies as fit, and one pack takes the rest.
    """
    per_pack = min([cap] + [limit // v for limit, v in zip(limits, size_t) if v > 0])
    full, rest = divmod(count, per_pack)
    for copies, packs_needed in ((per_pack, full), (rest, 1 if rest else 0)):
        if packs_needed:
            remaining = tuple(limit - copies * v for limit, v in zip(limits, size_t))
            _add(packs, closed, remaining, (b,) * copies, packs_needed, floor, cap)


def _add(packs: _OpenPacks, closed: list[tuple[Content, int]], remaining: tuple[int, ...],
         content: Content, count: int, floor: tuple[int, ...], cap: int) -> None:
    if len(content) >= cap or any(r < f for r, f in zip(remaining, floor)):
        closed.append((content, count))
    else:
        packs.add(remaining, content, count)
