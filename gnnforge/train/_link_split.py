"""Link prediction data: an edge split, the message graph, negatives that are not edges.

The graph's undirected pairs {u, v} (u != v, duplicates merged) are split at random into
train / val / test. Messages pass over the training pairs only, in both directions: edge
e < M is training pair e as (u, v), edge e + M the same pair as (v, u), so a batch's
pairs name their own two edge ids and can be removed from the blocks sampled for them.
Negatives are uniform node pairs rejected when they are a pair of the whole graph (any
split), so no positive is ever scored as a negative.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from gnnforge.graph import Graph

__all__ = ["LinkSplit", "remove_edges"]


class LinkSplit:
    """The split pairs of `graph` and the message graph over the training pairs.

    Attributes:
        pairs: split -> [P, 2] int64 node pairs (u < v).
        message_graph: `Graph` with the 2M directed training edges described above.
        num_nodes: nodes of the graph.
    """

    def __init__(self, graph: Graph, seed: int, val: float = 0.05, test: float = 0.1) -> None:
        u, v = graph.src.numpy(), graph.dst.numpy()
        low, high = np.minimum(u, v), np.maximum(u, v)
        keep = low != high
        keys = np.unique(low[keep] * graph.num_nodes + high[keep])
        if keys.size < 3:
            raise ValueError(f"link prediction needs at least 3 distinct edges, got {keys.size}")
        self.num_nodes = graph.num_nodes
        self._keys = keys                                          # sorted, every pair
        order = np.random.default_rng(seed).permutation(keys.size)
        n_val = max(1, int(round(val * keys.size)))
        n_test = max(1, int(round(test * keys.size)))
        parts = {"val": order[:n_val], "test": order[n_val:n_val + n_test],
                 "train": order[n_val + n_test:]}
        self.pairs = {name: torch.from_numpy(np.stack(divmod(keys[np.sort(index)],
                                                             graph.num_nodes), axis=1))
                      for name, index in parts.items()}
        train = self.pairs["train"]
        src = torch.cat([train[:, 0], train[:, 1]])
        dst = torch.cat([train[:, 1], train[:, 0]])
        self.message_graph = Graph(src, dst, num_nodes=graph.num_nodes)

    @property
    def num_train(self) -> int:
        return int(self.pairs["train"].shape[0])

    def edge_ids(self, train_pair_ids: Tensor) -> Tensor:
        """Sorted message-graph edge ids of training pairs `train_pair_ids` (both ways)."""
        return torch.sort(torch.cat([train_pair_ids, train_pair_ids + self.num_train])).values

    def is_edge(self, u: Tensor, v: Tensor) -> Tensor:
        """[n] bool: {u, v} is a pair of the graph (any split)."""
        keys = (torch.minimum(u, v) * self.num_nodes + torch.maximum(u, v)).numpy()
        position = np.searchsorted(self._keys, keys).clip(max=self._keys.size - 1)
        return torch.from_numpy(self._keys[position] == keys)

    def negatives(self, heads: Tensor, per_head: int, generator: torch.Generator) -> Tensor:
        """[len(heads), per_head] tails w != head with {head, w} not an edge, uniform.

        Raises:
            ValueError: when a head is joined to every other node (no negative exists).
        """
        tails = torch.randint(self.num_nodes, (heads.numel(), per_head), generator=generator)
        for _ in range(100):
            bad = (tails == heads[:, None]) | self.is_edge(
                heads[:, None].expand_as(tails).reshape(-1), tails.reshape(-1)).view_as(tails)
            if not bool(bad.any()):
                return tails
            tails[bad] = torch.randint(self.num_nodes, (int(bad.sum()),), generator=generator)
        raise ValueError("link prediction: could not draw negatives in 100 rounds; the graph "
                         "is (nearly) complete around some node")


def remove_edges(block, excluded: Tensor):
    """`block` without the edges whose parent edge id is in `excluded` (sorted)."""
    from gnnforge.sampling import Block

    keep = ~torch.isin(block.edge_ids, excluded)
    if bool(keep.all()):
        return block
    src, dst = block.coo()
    counts = torch.bincount(dst[keep], minlength=block.num_dst_nodes)
    rowptr = torch.zeros(block.num_dst_nodes + 1, dtype=torch.int64)
    torch.cumsum(counts, 0, out=rowptr[1:])
    weight = None if block.edge_weight is None else block.edge_weight[keep]
    return Block(block.src_nodes, rowptr, src[keep], block.edge_ids[keep], weight)
