"""gnnforge.nn layers on an XLA StaticBatch: a 10-step forward/backward loop over packs
of one shape compiles once (the first step), never falls back to the CPU, and computes
what the CPU does.

Where they differ from the CPU path: degrees from the CSR the CPU built (`ops._degree`),
max/min scatters XLA lowers (`ops._static_extreme`), and no planner race (`plan._auto`).
"""

from __future__ import annotations

import pytest
import torch

from gnnforge.nn import GATConv, GatedGraphConv, GCNConv, GINConv, GINEConv, RGCNConv, SAGEConv
from gnnforge.packing import StaticBatch
from gnnforge.train import PackedSplit
from tests.nn.test_models import molecules

pytestmark = pytest.mark.xla

WIDTH = 8
STEPS = 10
LAYERS = {
    "gcn": lambda: GCNConv(WIDTH, 8),
    "gin": lambda: GINConv(torch.nn.Sequential(torch.nn.Linear(WIDTH, 8), torch.nn.ReLU())),
    "gine": lambda: GINEConv(torch.nn.Linear(WIDTH, 8), edge_dim=3),
    "gat": lambda: GATConv(WIDTH, 4, heads=2),
    "sage": lambda: SAGEConv(WIDTH, 8),
    "ggnn": lambda: GatedGraphConv(8, 2),   # GGNN (Li et al.) on the kernel protocol
    "rgcn": lambda: RGCNConv(WIDTH, 8, num_relations=BOND_TYPES, aggr="mean"),
}
BOND_TYPES = 5  # edge_attr[:, 0] of the molecules: the bond type, the relation


def _run(layer: torch.nn.Module, batch: StaticBatch) -> torch.Tensor:
    x = batch.node_data["x"][:, :WIDTH].float() / 10                       # [N, WIDTH]
    if isinstance(layer, GINEConv):
        return layer(batch, x, batch.edge_data["edge_attr"].float())
    if isinstance(layer, RGCNConv):
        return layer(batch, x, batch.edge_data["edge_attr"][:, 0])
    return layer(batch, x)


@pytest.fixture(scope="module")
def packs() -> list[StaticBatch]:
    split = PackedSplit(molecules(120, seed=1), list(range(120)), 8, seed=0)
    split.plan(0)
    return [StaticBatch.from_batch(split.batch(step % len(split))) for step in range(STEPS)]


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_compiles_once_and_never_falls_back(name, packs):
    import torch_xla
    import torch_xla.core.xla_model as xm

    from gnnforge.train._xla_meter import xla_counts

    device = torch_xla.device()
    torch.manual_seed(0)
    cpu = LAYERS[name]()
    torch.manual_seed(0)
    layer = LAYERS[name]().to(device)
    start, executions = xla_counts(), 0
    for step, batch in enumerate(packs):
        layer.zero_grad(set_to_none=True)
        cpu.zero_grad(set_to_none=True)
        before = xla_counts()
        out = _run(layer, batch.to(device))
        out.square().sum().backward()
        torch_xla.sync()
        xm.wait_device_ops()  # the execution's count lands when it finishes
        executions += xla_counts()[1] - before[1]
        expected = _run(cpu, batch)
        expected.square().sum().backward()
        # Reading a view of the step's output is a small graph of its own (compiled once).
        torch.testing.assert_close(out.detach().cpu(), expected.detach(), rtol=0, atol=1e-5)
        if step == 0:
            first = xla_counts()
    for ours, theirs in zip(layer.parameters(), cpu.parameters()):
        scale = theirs.grad.abs().max().clamp(min=1.0)  # sums over ~500 rows: relative
        torch.testing.assert_close(ours.grad.cpu() / scale, theirs.grad / scale, rtol=0,
                                   atol=1e-4)
    end = xla_counts()
    assert end[0] - first[0] == 0, f"{name}: compiled again after the first step"
    assert end[2] - start[2] == 0, f"{name}: {end[2] - start[2]} CPU fallbacks"
    assert executions == STEPS, f"{name}: {executions} executions in {STEPS} steps"
