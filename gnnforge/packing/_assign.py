"""From a packing plan (shapes with counts) to concrete packs of dataset indices.

The plan fixes which size tuples share a pack; which graphs fill those places is drawn
anew every epoch ("fix the sizes, sample the graphs", Krell et al.): the graphs of each
size tuple are permuted and dealt to the places that take that size, then the packs are
shuffled. Every graph is used exactly once per epoch.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from gnnforge.packing._plan import PackingPlan

__all__ = ["PackAssigner"]


class PackAssigner:
    """Deals dataset indices into a plan's packs, reshuffled per epoch with a seed.

    Args:
        plan: a PackingPlan built on the histogram of `sizes` (dropped graphs excluded).
        sizes: [n, k] size tuple of every dataset item.
        keep: [n] bool, False for items the plan dropped (oversized); None keeps all.
        seed: base seed; epoch e uses numpy's default_rng((seed, e)).

    Raises:
        ValueError: when the plan's size tuples do not match the dataset's histogram.
    """

    def __init__(self, plan: PackingPlan, sizes: np.ndarray, keep: np.ndarray | None = None,
                 seed: int = 0) -> None:
        self.plan = plan
        self.seed = seed
        members: dict[tuple[int, ...], list[int]] = defaultdict(list)
        rows = np.asarray(sizes, dtype=np.int64).reshape(len(sizes), -1).tolist()
        for index, row in enumerate(rows):
            if keep is None or keep[index]:
                members[tuple(row)].append(index)
        self._members = {key: np.asarray(value, dtype=np.int64) for key, value in members.items()}
        # Places: for pack p, the size tuple of each of its graphs, flattened.
        wanted: dict[tuple[int, ...], int] = defaultdict(int)
        self._shapes: list[list[tuple[int, ...]]] = []
        for shape, count in plan.packs:
            for _ in range(count):
                self._shapes.append(list(shape))
            for size in shape:
                wanted[size] += count
        for key in set(wanted) | set(self._members):
            have = self._members.get(key, np.zeros(0)).size
            if wanted.get(key, 0) != have:
                raise ValueError(f"plan holds {wanted.get(key, 0)} graphs of size {key} but the "
                                 f"dataset has {have}; build the plan from this dataset's sizes")

    def __len__(self) -> int:
        return len(self._shapes)

    def epoch(self, epoch: int, shuffle: bool = True) -> list[np.ndarray]:
        """The packs of one epoch: a list of index arrays, each one pack."""
        rng = np.random.default_rng((self.seed, epoch))
        queues = {key: (rng.permutation(value) if shuffle else value).tolist()
                  for key, value in self._members.items()}
        cursor = dict.fromkeys(queues, 0)
        packs = []
        for shape in self._shapes:
            indices = []
            for size in shape:
                indices.append(queues[size][cursor[size]])
                cursor[size] += 1
            packs.append(np.asarray(indices, dtype=np.int64))
        if shuffle:
            order = rng.permutation(len(packs))
            packs = [packs[i] for i in order]
        return packs
