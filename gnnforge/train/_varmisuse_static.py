"""The VarMisuse loss over every node of a banded batch, for `--compile`.

`candidate_loss` selects the candidate nodes (`scores[role == candidate]`), a size that
depends on the data; under torch.compile every batch would be a new shape. Here the scores
of all N slots are kept and non-candidates are masked: the softmax over each example's
candidates becomes a masked log-sum-exp per graph slot, segment sums run over N segments
(an upper bound on the number of graphs, so the graph count never enters a shape), and
the loss is averaged over the hole targets. A banded batch has N = K*S slots and blocks of
fixed shape, so one compiled graph serves every batch.

On XLA (`--device xla`) both backends train through this loss. Banded blocks are built on
the CPU and moved (building them on XLA costs compiles and `nonzero` fallbacks). A sparse
batch is padded to one size for the whole run (`SparsePad`: K*S + 1 nodes, the largest
edge and graph counts), its padding edges loops on a padding node that no real node hears,
so every step has one shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from gnnforge.banded import BandedBlocks
from gnnforge.graph import Graph, GraphBatch
from gnnforge.train._varmisuse_data import ROLE_CANDIDATE

__all__ = ["SparsePad", "banded_inputs", "move_inputs", "sparse_inputs", "static_candidate_loss"]


def banded_inputs(batch: GraphBatch, blocks: BandedBlocks) -> tuple[Tensor, ...]:
    """The compiled step's arguments: per-slot tensors and the blocks without `kept` (its
    length is the batch's edge count, the one size that varies)."""
    data = batch.node_data
    return (data["label"], data["role"], data["target"], batch.node_graph,
            replace(blocks, kept=blocks.kept[:0]))


@dataclass(frozen=True)
class SparsePad:
    """The one size every sparse batch of a run is padded to (nodes, edges, graph slots)."""

    num_nodes: int
    num_edges: int
    num_graphs: int

    @classmethod
    def covering(cls, num_slots: int, edges: Sequence[int], graphs: Sequence[int]) -> SparsePad:
        """Room for every batch: `num_slots` plus one padding node, the most edges, the most
        graphs plus one padding graph slot."""
        return cls(num_slots + 1, max(edges, default=0), max(graphs, default=0) + 1)


def sparse_inputs(batch: GraphBatch, pad: SparsePad) -> tuple[Tensor, ...]:
    """The static step's arguments for sparse propagation: node data and the batch padded
    to `pad` (node data first, then the padded graph), all on the batch's device.

    Raises:
        ValueError: when the batch does not fit `pad` (from `GraphBatch.pad`).
    """
    padded = batch.pad(pad.num_nodes, pad.num_edges, pad.num_graphs)
    data = padded.node_data
    graph = Graph._trusted(padded.src, padded.dst, padded.num_nodes, padded.edge_type)
    return data["label"], data["role"], data["target"], padded.node_graph, graph


def move_inputs(inputs: tuple, device: torch.device) -> tuple:
    """The step's arguments (tensors, a Graph or BandedBlocks) on `device`."""
    return tuple(item.to(device) for item in inputs)


def static_candidate_loss(model: nn.Module, label: Tensor, role: Tensor, target: Tensor,
                          node_graph: Tensor, structure: Graph | BandedBlocks
                          ) -> tuple[Tensor, Tensor, Tensor]:
    """(mean loss, correct, examples) as `candidate_loss`, computed masked over all slots.

    Args:
        model: a `VarMisuseModel`.
        label, role, target: [N] node data; node_graph: [N] graph slot of each node.
        structure: the batch's banded blocks, or its (padded) graph for sparse propagation.
    """
    h = model.encoder(model.embed(label) + model.role(role), structure)        # [N, H]
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
