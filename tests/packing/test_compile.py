"""A GIN compiled with static shapes runs a whole epoch of packed batches without recompiling.

The model takes plain tensors so the test isolates what packing promises (fixed shapes,
hence one compiled graph); the aggregation is index_add_ on those tensors. That gnnforge.ops
kernels themselves trace under torch.compile is tested in tests/ops.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter

from gnnforge.data import random_molecule_like
from gnnforge.graph import GraphBatch
from gnnforge.nn import sum_pool
from gnnforge.packing import PackedLoader


class TinyGIN(torch.nn.Module):
    def __init__(self, width: int = 16, layers: int = 2) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(9, width)
        self.mlps = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, width)) for _ in range(layers))
        self.head = torch.nn.Linear(width, 1)

    def forward(self, x, src, dst, node_graph, node_mask, graph_mask, num_graphs: int):
        h = self.embed(x[:, 0])  # [N, W]
        for mlp in self.mlps:
            aggregated = torch.zeros_like(h).index_add_(0, dst, h[src])  # [N, W]
            h = torch.relu(mlp(h + aggregated))
        return self.head(sum_pool(h, node_graph, num_graphs, node_mask, graph_mask))[:, 0]


def _inputs(batch: GraphBatch):
    return (batch.node_data["x"], batch.src, batch.dst, batch.node_graph, batch.node_mask,
            batch.graph_mask, batch.num_graphs)


def _epoch(model, batches):
    counter = CompileCounter()
    compiled = torch.compile(model, backend=counter, dynamic=False)
    compiles_after = []
    for batch in batches:
        out = compiled(*_inputs(batch))
        out.sum().backward()
        compiles_after.append(counter.frame_count)
    return compiles_after


@pytest.fixture(scope="module")
def graphs():
    return random_molecule_like(160, mean_atoms=10, max_atoms=24, seed=7)


def test_packed_epoch_compiles_once(graphs):
    torch._dynamo.reset()
    loader = PackedLoader(graphs, limits=(96, 256), max_graphs_per_pack=16, seed=0)
    compiles = _epoch(TinyGIN(), list(loader))
    assert len(compiles) == len(loader) > 5
    assert compiles[0] >= 1
    assert compiles[-1] == compiles[0], f"recompiled during the epoch: {compiles}"


def test_check_fails_with_dynamic_shapes(graphs):
    # The control: unpadded batches of varying size do recompile, so the check above bites.
    torch._dynamo.reset()
    batches = [GraphBatch.from_graphs(graphs[i:i + 8]) for i in range(0, 48, 8)]
    compiles = _epoch(TinyGIN(), batches)
    assert compiles[-1] > compiles[0]


@pytest.mark.slow
def test_packed_epoch_inductor_no_recompile(graphs):
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    loader = PackedLoader(graphs[:120], limits=(96, 256), max_graphs_per_pack=16, seed=0)
    compiled = torch.compile(TinyGIN(), dynamic=False)
    seen = []
    for batch in loader:
        compiled(*_inputs(batch)).sum().backward()
        seen.append(counters["stats"]["unique_graphs"])
    assert seen[0] >= 1 and seen[-1] == seen[0], seen
