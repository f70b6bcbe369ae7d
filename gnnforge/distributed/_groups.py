"""Which processes cooperate: all of them, or those of one node (torchrun's local group)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch.distributed as dist

__all__ = ["Cooperation", "cooperation_groups"]

MODES = ("all", "local")


@dataclass(frozen=True)
class Cooperation:
    """This process's cooperating group.

    Attributes:
        group: process group of the cooperating processes (None: the default group).
        sampling_group: the same processes, in the same order, on a group of its own, for
            a prefetching thread's collectives (None when not asked for).
        index: which group this process is in (0 .. count - 1).
        count: number of groups; groups take turns over the global batches.
        rank, size: this process's rank in its group, and the group's size.
    """

    group: Any
    sampling_group: Any
    index: int
    count: int
    rank: int
    size: int


def cooperation_groups(mode: str, local_world_size: int | None = None,
                       sampling_group: bool = False) -> Cooperation:
    """Build the cooperating groups; collective (every process calls it the same way).

    Args:
        mode: "all" (one group of every process) or "local" (one group per node of
            `local_world_size` consecutive ranks, torchrun's LOCAL_WORLD_SIZE by default:
            exchanges then stay inside a node, and nodes train independently).
        local_world_size: processes per node (None: from the environment).
        sampling_group: also create a twin group for a prefetching thread.

    Raises:
        ValueError: on an unknown mode or a world size that is not a multiple of the
            node size.
    """
    if mode not in MODES:
        raise ValueError(f"cooperate must be one of {MODES}, got {mode!r}")
    world, rank = dist.get_world_size(), dist.get_rank()
    size = world
    if mode == "local":
        size = int(local_world_size or os.environ.get("LOCAL_WORLD_SIZE", world))
        if size < 1 or world % size:
            raise ValueError(f"--cooperate local: {world} processes do not split into nodes "
                             f"of LOCAL_WORLD_SIZE={size}")
    count = world // size
    groups, twins = [], []
    for index in range(count):  # every process creates every group, in the same order
        ranks = list(range(index * size, (index + 1) * size))
        groups.append(None if count == 1 else dist.new_group(ranks))
        twins.append(dist.new_group(ranks) if sampling_group else None)
    index = rank // size
    return Cooperation(groups[index], twins[index], index, count, rank % size, size)
