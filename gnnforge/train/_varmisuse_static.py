"""The VarMisuse loss over every node of a banded batch, for `--compile`.

`candidate_loss` selects the candidate nodes (`scores[role == candidate]`), a size that
depends on the data; under torch.compile every batch would be a new shape. Here the scores
of all N slots are kept and non-candidates are masked: the softmax over each example's
candidates becomes a masked log-sum-exp per graph slot, segment sums run over N segments
(an upper bound on the number of graphs, so the graph count never enters a shape), and
the loss is averaged over the hole targets. A banded batch has N = K*S slots and blocks of
fixed shape, so one compiled graph serves every batch.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor, nn

from gnnforge.banded import BandedBlocks
from gnnforge.graph import GraphBatch
from gnnforge.train._varmisuse_data import ROLE_CANDIDATE

__all__ = ["banded_inputs", "static_banded_loss"]


def banded_inputs(batch: GraphBatch, blocks: BandedBlocks) -> tuple[Tensor, ...]:
    """The compiled step's arguments: per-slot tensors and the blocks without `kept` (its
    length is the batch's edge count, the one size that varies)."""
    data = batch.node_data
    return (data["label"], data["role"], data["target"], batch.node_graph,
            replace(blocks, kept=blocks.kept[:0]))


def static_banded_loss(model: nn.Module, label: Tensor, role: Tensor, target: Tensor,
                       node_graph: Tensor, blocks: BandedBlocks) -> tuple[Tensor, Tensor, Tensor]:
    """(mean loss, correct, examples) as `candidate_loss`, computed masked over all slots.

    Args:
        model: a `VarMisuseModel`.
        label, role, target: [N] node data; node_graph: [N] graph slot of each node.
        blocks: the batch's banded blocks.
    """
    h = model.encoder(model.embed(label) + model.role(role), blocks)           # [N, H]
    scores = model.readout(h).squeeze(-1)                                       # [N]
    candidate = role == ROLE_CANDIDATE
    hit = candidate & target.bool()
    slots = scores.shape[0]
    masked = torch.where(candidate, scores.detach(), float("-inf"))
    top = masked.new_full((slots,), float("-inf")).scatter_reduce(
        0, node_graph, masked, "amax")                                          # [N] per graph
    top = torch.where(torch.isfinite(top), top, 0.0)[node_graph]                # [N] per node
    shifted = torch.where(candidate, scores - top, float("-inf"))
    total = scores.new_zeros(slots).index_add(0, node_graph, torch.exp(shifted))[node_graph]
    total = torch.where(total > 0, total, 1.0)       # graphs without candidates: log(1)
    per_node = torch.log(total) + top - scores                                  # [N]
    count = hit.sum()
    loss = torch.where(hit, per_node, 0.0).sum() / count.clamp(min=1)
    correct = (hit & (scores.detach() >= top)).sum()
    return loss, correct, count
