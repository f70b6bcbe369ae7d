"""The DGL side of benchmarks/end_to_end.py: each workload as DGL's own examples write it.

- GCN (examples/pytorch/gcn/train.py): `dgl.nn.GraphConv(norm='both')` layers on the graph
  with its self-loops removed and one added per node (`dgl.remove_self_loop`,
  `dgl.add_self_loop`), dense input features.
- SAGE (examples/pytorch/graphsage/node_classification.py): `dgl.dataloading.NeighborSampler
  (fanouts, prefetch_node_feats=['feat'], prefetch_labels=['label'])` and
  `dgl.dataloading.DataLoader` over the train ids (shuffled, num_workers=0: the loader
  gathers each batch's features and labels), `dgl.nn.SAGEConv(aggregator_type='mean')` on
  the blocks. `dgl_blocks` converts gnnforge's blocks with `dgl.create_block` for the rows
  that share gnnforge's sampling.
- GIN (examples/pytorch/ogb/ogbg-mol*: per-column atom/bond embeddings, a batched graph per
  step): `dgl.nn.GINEConv(learn_eps=True)` on `dgl.batch`ed molecules from
  `dgl.dataloading.GraphDataLoader`, `dgl.nn.SumPooling`. DGL 2.1's GINEConv computes
  its messages relu(x_src + e) with a Python edge function (`update_all(self.message,
  fn.sum)`), not a fused built-in: that is the layer DGL ships, so it is what is timed.

Every model starts from the gnnforge model's weights (the names map below).
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Mapping
from types import ModuleType

import torch
import torch.nn.functional as F
from torch import nn


def import_dgl(threads: int) -> ModuleType:
    """dgl, with its OpenMP pool at `threads` threads (like torch's and numba's)."""
    # Read when DGL's OpenMP runtime starts; set_num_threads covers a runtime already started.
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    import dgl

    dgl.utils.set_num_threads(threads)
    # Its DataLoader suggests pinning worker processes to cores; these runs have no workers.
    warnings.filterwarnings("ignore", message="Dataloader CPU affinity opt is not enabled")
    return dgl


# ----------------------------------------------------------------------------- GCN


class DglGCN(nn.Module):
    """end_to_end's OurGCN with `dgl.nn.GraphConv(norm='both')`, weights copied from it."""

    def __init__(self, reference: nn.Module) -> None:
        super().__init__()
        from dgl.nn import GraphConv

        convs = []
        for source in (reference.conv1, reference.conv2):
            width_out, width_in = source.lin.weight.shape
            conv = GraphConv(width_in, width_out, norm="both")
            with torch.no_grad():
                conv.weight.copy_(source.lin.weight.t())  # DGL keeps W as [in, out]
                conv.bias.copy_(source.bias)
            convs.append(conv)
        self.conv1, self.conv2 = convs

    def forward(self, graph, x):
        x = F.dropout(x, 0.5, self.training)
        x = F.dropout(F.relu(self.conv1(graph, x)), 0.5, self.training)
        return self.conv2(graph, x)


def gcn_graph(dgl: ModuleType, src, dst, num_nodes: int):
    """The DGL GCN example's graph: self-loops removed, then one added per node."""
    graph = dgl.add_self_loop(dgl.remove_self_loop(dgl.graph((src, dst), num_nodes=num_nodes)))
    graph.create_formats_()  # built once, outside the timing (like PyG's cached gcn_norm)
    return graph


# ----------------------------------------------------------------------------- SAGE


class DglSAGE(nn.Module):
    """3 `dgl.nn.SAGEConv('mean')` layers with ReLU between, weights from a gnnforge/PyG SAGE.

    PyG's names (gnnforge uses them): lin_l (neighbour mean, with the bias), lin_r (self).
    DGL's: fc_neigh (no bias), fc_self (with the bias); the sums are the same.
    `reference`: the model, or its state_dict with `dropout` (GraphBolt's child, which
    cannot import gnnforge, gets the weights as arrays).
    """

    def __init__(self, reference: nn.Module | Mapping[str, torch.Tensor],
                 dropout: float | None = None) -> None:
        super().__init__()
        from dgl.nn import SAGEConv

        state = reference if isinstance(reference, Mapping) else reference.state_dict()
        layers = sorted({int(key.split(".")[1]) for key in state if key.startswith("convs.")})
        self.convs = nn.ModuleList()
        for i in layers:
            weight_l, weight_r = state[f"convs.{i}.lin_l.weight"], state[f"convs.{i}.lin_r.weight"]
            width_out, width_in = weight_l.shape
            conv = SAGEConv(width_in, width_out, aggregator_type="mean")
            with torch.no_grad():
                conv.fc_neigh.weight.copy_(weight_l)
                conv.fc_self.weight.copy_(weight_r)
                conv.fc_self.bias.copy_(state[f"convs.{i}.lin_l.bias"])
            self.convs.append(conv)
        # nn.Dropout in DGL's example
        self.dropout = getattr(reference, "dropout", 0.0) if dropout is None else dropout

    def forward(self, blocks, x):
        last = len(self.convs) - 1
        for i, (conv, block) in enumerate(zip(self.convs, blocks)):
            x = conv(block, x)
            if i != last:
                x = F.dropout(F.relu(x), self.dropout, self.training)
        return x


def dgl_blocks(dgl: ModuleType, blocks) -> list:
    """gnnforge's sampled blocks as DGL blocks (same local ids, same bipartite sizes)."""
    out = []
    for block in blocks:
        src, dst = block.coo()
        out.append(dgl.create_block((src, dst), num_src_nodes=block.num_src_nodes,
                                    num_dst_nodes=block.num_dst_nodes))
    return out


def dgl_loader_side(dgl: ModuleType, src, dst, num_nodes: int, x, y, train, test,
                    model: DglSAGE, steps: int, epochs: int, timed, labelled: bool):
    """(epoch time, accuracy) of DGL's own pipeline: NeighborSampler + DataLoader + model."""
    graph = dgl.graph((src, dst), num_nodes=num_nodes)
    graph.ndata["feat"], graph.ndata["label"] = x, y
    graph.create_formats_()  # the CSC the sampler reads, outside the timing
    sampler = dgl.dataloading.NeighborSampler([10, 10, 10], prefetch_node_feats=["feat"],
                                              prefetch_labels=["label"])
    loader = dgl.dataloading.DataLoader(graph, train, sampler, batch_size=1024, shuffle=True,
                                        drop_last=False, num_workers=0)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)

    def epoch():
        model.train()
        for step, (_, _, blocks) in enumerate(loader):
            if step == steps:
                break
            logits = model(blocks, blocks[0].srcdata["feat"])
            optimizer.zero_grad()
            F.cross_entropy(logits, blocks[-1].dstdata["label"]).backward()
            optimizer.step()

    torch.manual_seed(0)  # DGL's loader shuffles with torch's global generator
    seconds = timed(epoch, epochs)
    if not labelled:
        return seconds, None
    model.eval()
    correct = 0
    with torch.no_grad():
        for _, _, blocks in dgl.dataloading.DataLoader(graph, test, sampler, batch_size=1024,
                                                       shuffle=False, num_workers=0):
            logits = model(blocks, blocks[0].srcdata["feat"])
            correct += int((logits.argmax(1) == blocks[-1].dstdata["label"]).sum())
    return seconds, correct / test.numel()


# ----------------------------------------------------------------------------- GIN


class DglMoleculeGIN(nn.Module):
    """end_to_end's PygMoleculeGIN (OGB encoders, gnnforge's MLPs and norms) with
    `dgl.nn.GINEConv(learn_eps=True)` and `SumPooling`, loaded with its weights."""

    def __init__(self, reference: nn.Module) -> None:
        super().__init__()
        from dgl.nn import GINEConv, SumPooling

        self.atom_encoder = copy.deepcopy(reference.atom_encoder)
        self.bond_encoders = copy.deepcopy(reference.bond_encoders)
        self.convs = nn.ModuleList(GINEConv(learn_eps=True) for _ in reference.convs)
        self.mlps = copy.deepcopy(reference.mlps)
        self.norms = copy.deepcopy(reference.norms)
        self.head = copy.deepcopy(reference.head)
        self.pool = SumPooling()
        self.load_state_dict(reference.state_dict())  # eps: [1] on both sides

    def forward(self, graph):
        h = self.atom_encoder(graph.ndata["feat"])
        last = len(self.convs) - 1
        for layer, (conv, mlp, norm, bond) in enumerate(
                zip(self.convs, self.mlps, self.norms, self.bond_encoders)):
            h = norm(mlp(conv(graph, h, bond(graph.edata["feat"])), None), None)
            if layer != last:
                h = F.relu(h)
        return self.head(self.pool(graph, h))


def molecule_graph(dgl: ModuleType, graph):
    """A gnnforge molecule as a DGL graph: OGB atom features `feat`, bond features `feat`."""
    out = dgl.graph((graph.src, graph.dst), num_nodes=graph.num_nodes)
    out.ndata["feat"] = graph.node_data["x"]
    out.edata["feat"] = graph.edge_data["edge_attr"]
    return out


def molecule_loader(dgl: ModuleType, graphs, batch_size: int):
    """GraphDataLoader over (DGL graph, y [1]) pairs, shuffled, as the OGB examples; a
    batch is (dgl.batch of the graphs, y [B, 1])."""
    pairs = [(molecule_graph(dgl, g), g.graph_data["y"].view(1)) for g in graphs]
    return dgl.dataloading.GraphDataLoader(pairs, batch_size=batch_size, shuffle=True,
                                           generator=torch.Generator().manual_seed(0))
