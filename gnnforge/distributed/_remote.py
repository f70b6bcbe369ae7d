"""Independent minibatches over partitioned data: owners sample and serve for requesters.

With per-rank storage, a process holds only the in-edges and feature rows of the
vertices it owns. For its own (independent) minibatch it therefore asks the owners:
layer by layer, each process sends the destinations it does not own to their owners
(all_to_all of ids), every owner samples the requested in-edges with the *requester's*
key (so the picks equal what the whole graph would give that requester), and the picks
travel back: four collectives per layer (request counts, request ids, pick counts, then
sources and edge ids together). Input features come the same
way (`fetch_rows`). Every process calls these once per step: they are collectives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

from gnnforge.distributed._exchange import all_to_all_ids, all_to_all_rows
from gnnforge.sampling._block import Block
from gnnforge.sampling._common import InEdges, check_seed_ids, make_block
from gnnforge.sampling._kernels import compact
from gnnforge.sampling._variates import VariateKey

__all__ = ["fetch_rows", "sample_remote"]


def _by_owner(ids: np.ndarray, owner: np.ndarray, world: int) -> tuple[np.ndarray, list[int]]:
    owners = np.asarray(owner[ids], dtype=np.int64)
    order = np.argsort(owners, kind="stable")
    return order, np.bincount(owners, minlength=world).tolist()


def _serve(edges: InEdges, layer_fn: Callable, asked: list[Tensor], layer: int,
           keys: Sequence[VariateKey]) -> tuple[list[Tensor], list[Tensor], list[Tensor]]:
    """Sample the requested destinations of each requester with that requester's key."""
    counts, src, eid = [], [], []
    for requester, ids in enumerate(asked):
        frontier = ids.numpy()
        c, s, e, weight = layer_fn(edges, edges.rows(frontier), frontier, layer,
                                   keys[requester].for_layer(layer))
        if weight is not None:
            raise ValueError("sample_remote: samplers with importance weights (LABOR-*) "
                             "optimise over the requester's whole frontier; use NS or LABOR-0")
        counts.append(torch.from_numpy(c))
        src.append(torch.from_numpy(s))
        eid.append(torch.from_numpy(e))
    return counts, src, eid


def _answer(counts: list[Tensor], src: list[Tensor], eid: list[Tensor], asked: list[Tensor],
            sizes: list[int], group) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Picks back to their requesters in two collectives: both sides know how many counts
    travel (one per requested vertex), and then how many picks; sources and edge ids
    travel together as the two columns of one [k, 2] tensor."""
    counts_back = all_to_all_rows(torch.cat(counts), [int(a.numel()) for a in asked], sizes,
                                  "all_to_all of sampled counts", group)
    per_owner = [int(c.sum()) for c in counts_back.split(sizes)]
    picks = torch.stack([torch.cat(src), torch.cat(eid)], dim=1)  # [k, 2]
    picks_back = all_to_all_rows(picks, [int(c.numel()) for c in src], per_owner,
                                 "all_to_all of sampled sources and edge ids", group)
    return counts_back.numpy(), picks_back[:, 0].numpy(), picks_back[:, 1].numpy()


def sample_remote(sampler, edges: InEdges, owner: np.ndarray, seeds: Tensor,
                  keys: Sequence[VariateKey], group=None) -> list[Block]:
    """Blocks of this process's independent minibatch, sampled by the vertices' owners.

    Args:
        sampler: a NeighborSampler or LaborSampler (LABOR-0).
        edges: this process's in-edges (`Partition.in_edges`).
        owner: [N] process of every vertex.
        seeds: [b] distinct seeds (any owner; empty when this process has none left).
        keys: keys[q] is process q's key for this step (every process passes the same list).
        group: process group (None: default).

    Returns:
        `sampler.num_layers` blocks, input layer first, equal to `sampler.sample(graph,
        seeds, key=keys[rank])` on the whole graph.
    """
    world = dist.get_world_size(group)
    if len(keys) != world:
        raise ValueError(f"sample_remote: need one key per process ({world}), got {len(keys)}")
    frontier = check_seed_ids(seeds, edges.num_nodes)
    layer_fn = sampler.layer_fn(None)
    blocks = []
    for layer in reversed(range(sampler.num_layers)):
        order, sizes = _by_owner(frontier, owner, world)
        requests = list(torch.from_numpy(frontier[order]).split(sizes))
        asked = all_to_all_ids(requests, "all_to_all of vertices to sample", group)
        counts, src, eid = _serve(edges, layer_fn, asked, layer, keys)
        counts_back, src_back, eid_back = _answer(counts, src, eid, asked, sizes, group)
        # Responses arrive grouped by owner in request order; put them in frontier order.
        starts = np.zeros(counts_back.size + 1, dtype=np.int64)
        np.cumsum(counts_back, out=starts[1:])
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size)
        per_seed = counts_back[inverse]
        out_starts = np.zeros(per_seed.size + 1, dtype=np.int64)
        np.cumsum(per_seed, out=out_starts[1:])
        positions = np.repeat(starts[:-1][inverse] - out_starts[:-1], per_seed) \
            + np.arange(out_starts[-1])
        picked, picked_eid = src_back[positions], eid_back[positions]
        col, src_nodes = compact(frontier, picked)
        blocks.append(make_block(src_nodes, per_seed, col, picked_eid, None))
        frontier = src_nodes
    return blocks[::-1]


def fetch_rows(ids: Tensor, owner: np.ndarray, serve: Callable[[Tensor], Tensor],
               width: int, dtype: torch.dtype = torch.float32, group=None) -> Tensor:
    """Rows of any vertices, each served by its owner (all_to_all of ids, then rows).

    Args:
        ids: [n] int64 global ids this process needs.
        owner: [N] process of every vertex.
        serve: owned global ids [k] -> their rows [k, width] (e.g. through a FeatureStore).
        width, dtype: of a row (a process asked for nothing still sends a typed empty).
        group: process group (None: default).

    Returns:
        [n, width] rows in the order of `ids`.
    """
    world = dist.get_world_size(group)
    ids_np = np.ascontiguousarray(ids.numpy(), dtype=np.int64)
    order, sizes = _by_owner(ids_np, owner, world)
    asked = all_to_all_ids(list(torch.from_numpy(ids_np[order]).split(sizes)),
                           "all_to_all of feature row ids", group)
    asked_all = torch.cat(asked) if asked else torch.zeros(0, dtype=torch.int64)
    rows = serve(asked_all) if asked_all.numel() else torch.zeros((0, width), dtype=dtype)
    arrived = all_to_all_rows(rows.to(dtype), [int(a.numel()) for a in asked], sizes,
                              "all_to_all of feature rows", group)
    out = torch.empty((ids_np.size, width), dtype=dtype)
    out[torch.from_numpy(order)] = arrived
    return out
