"""End-to-end training time, gnnforge vs PyG and DGL, same models and initial weights.

Rows (see BENCHMARKS.md, "End to end"):
  gcn     GCN 2-layer full graph: Cora, CiteSeer, PubMed, and the largest real graph in
          shared/datasets (soc-Slashdot0902, random features and labels: no accuracy).
  sage    GraphSAGE 3-layer, sampled fanouts [10,10,10], batch 1024: R-MAT 2^17/2^21
          (random features and labels) and PubMed (every labelled node, 80/20 split).
  gin     GIN (OGB-style, 3 layers, 64 wide) regressing RDKit-computed TPSA on the first
          MOSES molecules: gnnforge fixed-shape packed batches vs PyG's DataLoader and
          DGL's GraphDataLoader.

Every side starts from the same weights (gnnforge's, copied), runs the same number of
optimiser steps per epoch (the peers' GIN batch size is chosen to give the packed loader's
step count), and uses one intra-op thread (this machine's 2 cores are shared): torch,
numba and DGL's OpenMP pool (OMP_NUM_THREADS before DGL loads, then
dgl.utils.set_num_threads). An epoch's time is the median over the timed epochs after one
warm-up epoch (full-graph GCN: after as many as gnnforge's planned layers take to finish
racing their plans, the same count on every side). "vs PyG" is PyG time / gnnforge time, "vs fastest peer" is the faster of
PyG and DGL over gnnforge (>1: we win).

How DGL is configured (benchmarks/_end_to_end_dgl.py), each as DGL's own examples do:
  gcn     examples/pytorch/gcn: dgl.nn.GraphConv(norm='both') on the graph with its
          self-loops removed and one added per node; dense inputs. (Slashdot is directed:
          DGL normalises by out-degree at the source, PyG and gnnforge by in-degree.)
  sage    examples/pytorch/graphsage/node_classification.py: NeighborSampler([10,10,10],
          prefetch_node_feats, prefetch_labels) + dgl.dataloading.DataLoader over the train
          ids (batch 1024, shuffled, the loader gathers features and labels per batch),
          dgl.nn.SAGEConv('mean') on the blocks, the same steps per epoch. The model-only
          and shared-sampling rows give DGL gnnforge's blocks through dgl.create_block.
  gin     examples/pytorch/ogb (ogbg-mol*): GINEConv(learn_eps=True) with per-column
          atom/bond embeddings, dgl.batch'ed molecules from GraphDataLoader (PyG's batch
          size), SumPooling.

PyG's NeighborLoader needs pyg-lib or torch-sparse; when neither imports, its cell says so
and the "peers on gnnforge blocks" row (the PyG and DGL models on the subgraphs gnnforge
samples) is the PyG comparison. When DGL does not import, every DGL cell says so.

--products replaces the rows with one workload at ogbn-products' scale (synthetic-products,
--products-nodes for smaller): sampled GraphSAGE-mean 3x256, fanouts [15,10,5], batch 1024,
dropout 0.5 after the hidden layers (--products-dropout), a fixed number of steps,
gnnforge vs DGL vs PyG NeighborLoader, each side in its own child process for its peak
RSS (benchmarks/_end_to_end_products.py says how each is set up); --products-sides picks
the sides (PyG's NeighborLoader on torch-sparse runs every layer on the whole sampled
subgraph: a step takes tens of seconds, so the long runs leave it to a short one).
DGL's GraphBolt pipeline is a fourth side there when an interpreter with a working GraphBolt
is found (--graphbolt-python; DGL 2.1's has libraries for torch <= 2.2.1 only,
benchmarks/_end_to_end_graphbolt.py).
--products --products-gcn: full-graph GCN 2x256 there instead, a training step and
inference (benchmarks/_end_to_end_products_gcn.py).

The GIN rows need RDKit and molsets to build the molecules; the built molecules are cached
(gnnforge's cache folder), so a venv without RDKit (a peers' venv) runs them after one run
in a venv with it.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # _end_to_end_dgl, when loaded by a test

from _end_to_end_products import SIDES  # noqa: E402

from gnnforge.graph import Graph, GraphBatch  # noqa: E402

# ----------------------------------------------------------------------------- helpers


def timed_epochs(run_epoch: Callable[[], None], epochs: int, warmup: int = 1) -> float:
    """Median seconds per epoch over `epochs` timed epochs after `warmup` untimed ones."""
    for _ in range(warmup):
        run_epoch()
    times = []
    for _ in range(epochs):
        start = time.perf_counter()
        run_epoch()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def settle_plans(run_epoch: Callable[[], None], model: nn.Module, cap: int = 12) -> int:
    """Untimed epochs until no planned layer of `model` still races its training plans
    (gnnforge times candidate plans on its first calls), at least one, at most `cap`;
    returns how many ran, so the peers can be given as many."""
    from gnnforge.plan import auto_plans

    def racing() -> bool:
        return any(entry.plan is None and key[6] for module in model.modules()
                   for key, entry in auto_plans(module).items())

    count = 0
    while count == 0 or (racing() and count < cap):
        run_epoch()
        count += 1
    return count


def dgl_reason() -> str | None:
    """Why DGL cannot run here (one line), or None when it imports."""
    if importlib.util.find_spec("dgl") is None:
        return "DGL skipped: not installed"
    try:
        import dgl  # noqa: F401
    except Exception as error:  # DGL fails to import with some torch builds
        return f"DGL skipped: import fails with this torch ({type(error).__name__}: " \
               f"{str(error).splitlines()[0][:100]})"
    return None


Seconds = float | str | None  # a peer's time; str: why it was not measured; None: no such row


def print_row(rows: list, name: str, ours: float, pyg: Seconds, dgl: Seconds, acc_ours,
              acc_pyg, acc_dgl, note: str = "") -> None:
    fmt = lambda a: "n/a" if a is None else f"{a:.3f}"  # noqa: E731
    def ms(seconds: Seconds) -> str:
        return (seconds if isinstance(seconds, str) else "n/a" if seconds is None
                else f"{seconds * 1e3:.1f}")

    measured = {peer: t for peer, t in (("PyG", pyg), ("DGL", dgl)) if isinstance(t, float)}
    vs_pyg = f"{pyg / ours:.2f}x" if "PyG" in measured else "n/a"
    fastest = min(measured, key=measured.get) if measured else None
    vs_fastest = f"{measured[fastest] / ours:.2f}x ({fastest})" if fastest else "n/a"
    cells = (name, f"{ours * 1e3:.1f}", ms(pyg), ms(dgl), vs_pyg, vs_fastest, fmt(acc_ours),
             fmt(acc_pyg), fmt(acc_dgl), note)
    rows.append(cells)
    print("| " + " | ".join(cells) + " |", flush=True)


def dgl_side(args):
    """The dgl module, or None when DGL is not importable (args.dgl_missing says why)."""
    return getattr(args, "dgl", None)


# ----------------------------------------------------------------------------- GCN rows

# Below this fraction of non-zeros the gnnforge GCN takes its input as SparseFeatures.
SPARSE_INPUT_DENSITY = 0.1



class OurGCN(nn.Module):
    """x: a dense tensor, or `SparseFeatures` (input dropout and X W over the non-zeros).

    Dropout is gnnforge's (`ops.dropout`, `ops.relu_dropout`: the mask hashed from a seed,
    never stored), as in OurSAGE; the peers' models use torch's, as their examples do."""

    def __init__(self, width_in: int, hidden: int, classes: int) -> None:
        super().__init__()
        from gnnforge.nn import GCNConv

        self.conv1, self.conv2 = GCNConv(width_in, hidden), GCNConv(hidden, classes)

    def forward(self, graph, x):
        from gnnforge import ops
        from gnnforge.nn import SparseFeatures

        x = (x.dropout(0.5, self.training) if isinstance(x, SparseFeatures)
             else ops.dropout(x, 0.5, self.training))
        x = ops.relu_dropout(self.conv1(graph, x), 0.5, self.training)  # dropout(relu(x))
        return self.conv2(graph, x)


class PygGCN(nn.Module):
    def __init__(self, width_in: int, hidden: int, classes: int) -> None:
        super().__init__()
        from torch_geometric.nn import GCNConv

        # cached=True: gcn_norm once per graph, as gnnforge's GCNConv caches its prepared
        # graph (self-loops, degrees) for the graph object it last saw.
        self.conv1 = GCNConv(width_in, hidden, cached=True)
        self.conv2 = GCNConv(hidden, classes, cached=True)

    def forward(self, edge_index, x):
        x = F.dropout(F.relu(self.conv1(F.dropout(x, 0.5, self.training), edge_index)), 0.5,
                      self.training)
        return self.conv2(x, edge_index)


def full_graph_row(rows, name, graph: Graph, x, y, train, test, epochs, args, labelled=True):
    classes = int(y.max()) + 1
    torch.manual_seed(0)
    ours = OurGCN(x.shape[1], 16, classes)
    theirs = PygGCN(x.shape[1], 16, classes)
    theirs.load_state_dict(ours.state_dict())
    dgl = dgl_side(args)
    if dgl is not None:
        from _end_to_end_dgl import DglGCN, gcn_graph

        dgl_model, dgl_graph = DglGCN(ours), gcn_graph(dgl, graph.src, graph.dst,
                                                       graph.num_nodes)
    edge_index = torch.stack([graph.src, graph.dst])
    from gnnforge.nn import SparseFeatures

    # Mostly-zero inputs (Planetoid bag-of-words) go in as SparseFeatures, built once per
    # dataset like PyG's dataset tensors: dropout and X W then touch only the non-zeros.
    density = int(torch.count_nonzero(x)) / max(x.numel(), 1)
    sparse = SparseFeatures.from_dense(x) if density < SPARSE_INPUT_DENSITY else None
    x_ours = sparse if sparse is not None else x

    def trainer(model, call):
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

        def epoch():
            model.train()
            optimizer.zero_grad()
            F.cross_entropy(call(model)[train], y[train]).backward()
            optimizer.step()
        return epoch

    def accuracy(model, call):
        model.eval()
        with torch.no_grad():
            return float((call(model)[test].argmax(1) == y[test]).float().mean())

    run_ours = lambda m: m(graph, x_ours)  # noqa: E731
    run_theirs = lambda m: m(edge_index, x)  # noqa: E731
    # Every side trains the same epochs: as many untimed ones as gnnforge's plan races
    # take (with one, a 10-epoch Slashdot median had timed the race), then the timed ones.
    torch.manual_seed(1)
    epoch_ours = trainer(ours, run_ours)
    warmup = settle_plans(epoch_ours, ours)
    t_ours = timed_epochs(epoch_ours, epochs, warmup=0)
    torch.manual_seed(1)
    t_theirs = timed_epochs(trainer(theirs, run_theirs), epochs, warmup)
    t_dgl, acc_dgl = args.dgl_missing, None
    if dgl is not None:
        run_dgl = lambda m: m(dgl_graph, x)  # noqa: E731
        torch.manual_seed(1)
        t_dgl = timed_epochs(trainer(dgl_model, run_dgl), epochs, warmup)
        acc_dgl = accuracy(dgl_model, run_dgl) if labelled else None
    print_row(rows, f"GCN full graph, {name} ({epochs} epochs after {warmup})", t_ours,
              t_theirs, t_dgl,
              accuracy(ours, run_ours) if labelled else None,
              accuracy(theirs, run_theirs) if labelled else None, acc_dgl,
              ("" if labelled else "random features/labels; ")
              + (f"gnnforge: sparse input ({density:.2%} non-zero)"
                 if sparse is not None else "dense input"))


def accuracy_spread(name: str, graph: Graph, data, args) -> None:
    """Test accuracy over seeds 0..K-1 (weights and dropout) after 1 + --epochs steps.

    The sparse input path draws dropout masks for the non-zeros only, so its random
    stream differs from PyG's dense one; this shows that the accuracies agree within the
    seed-to-seed spread. Untimed.
    """
    from gnnforge.nn import SparseFeatures

    x, y, train, test = data["x"], data["y"], data["train_mask"], data["test_mask"]
    sparse = SparseFeatures.from_dense(x)
    edge_index = torch.stack([graph.src, graph.dst])
    classes = int(y.max()) + 1
    sides = [("gnnforge (sparse input)", OurGCN, lambda m: m(graph, sparse)),
             ("PyG", PygGCN, lambda m: m(edge_index, x))]
    dgl = dgl_side(args)
    if dgl is not None:
        from _end_to_end_dgl import DglGCN, gcn_graph

        dgl_graph = gcn_graph(dgl, graph.src, graph.dst, graph.num_nodes)
        sides.append(("DGL", lambda *widths: DglGCN(OurGCN(*widths)),
                      lambda m: m(dgl_graph, x)))
    results: dict[str, list[float]] = {side: [] for side, _, _ in sides}
    for seed in range(args.accuracy_seeds):
        for side, model, call in sides:
            torch.manual_seed(seed)
            net = model(x.shape[1], 16, classes)
            optimizer = torch.optim.Adam(net.parameters(), lr=0.01, weight_decay=5e-4)
            net.train()
            for _ in range(args.epochs + 1):
                optimizer.zero_grad()
                F.cross_entropy(call(net)[train], y[train]).backward()
                optimizer.step()
            net.eval()
            with torch.no_grad():
                results[side].append(float((call(net)[test].argmax(1) == y[test]).float()
                                           .mean()))
    cells = [f"{statistics.mean(v):.3f} +- {statistics.stdev(v):.3f}" if len(v) > 1
             else f"{v[0]:.3f}" for v in results.values()]
    print(f"| GCN {name}, test accuracy over {args.accuracy_seeds} seeds "
          f"({args.epochs + 1} steps) | {' | '.join(cells)} |", flush=True)


def planetoid(name: str):
    from gnnforge.data import read_planetoid, shared_datasets_dir

    graph, _ = read_planetoid(shared_datasets_dir() / "planetoid", name)
    return graph


def gcn_rows(rows, args) -> None:
    from gnnforge.data import shared_datasets_dir

    if shared_datasets_dir() is None:
        print("GCN rows skipped: shared/datasets not found")
        return
    for name in ("cora", "citeseer", "pubmed"):
        graph = planetoid(name)
        data = graph.node_data
        if args.accuracy_seeds:
            accuracy_spread(name, graph, data, args)
            continue
        full_graph_row(rows, name, graph, data["x"], data["y"], data["train_mask"],
                       data["test_mask"], args.epochs, args)
    if args.accuracy_seeds:
        return
    from gnnforge.data import read_edge_list

    path = shared_datasets_dir() / "snap_soc_slashdot0902" / "soc-Slashdot0902.txt.gz"
    graph, _ = read_edge_list(path)
    graph = graph.remove_self_loops()
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(graph.num_nodes, 64, generator=generator)
    y = torch.randint(0, 8, (graph.num_nodes,), generator=generator)
    train = torch.rand(graph.num_nodes, generator=generator) < 0.5
    full_graph_row(rows, f"soc-Slashdot0902 ({graph.num_nodes} nodes, {graph.num_edges} "
                   "edges)", graph, x, y, train, ~train, max(3, args.epochs // 10),
                   args, labelled=False)


# ----------------------------------------------------------------------------- SAGE rows


class OurSAGE(nn.Module):
    """3 SAGE layers, ReLU between; `dropout` after each hidden ReLU, as in DGL's and PyG's
    ogbn-products examples (0.5 there), fused with it (`ops.relu_dropout`)."""

    def __init__(self, width_in: int, hidden: int, classes: int, dropout: float = 0.0) -> None:
        super().__init__()
        from gnnforge.nn import SAGEConv

        widths = [width_in, hidden, hidden, classes]
        self.convs = nn.ModuleList(SAGEConv(widths[i], widths[i + 1]) for i in range(3))
        self.dropout = dropout

    def forward(self, blocks, x):
        from gnnforge import ops

        for i, (conv, block) in enumerate(zip(self.convs, blocks)):
            x = conv(block, x)
            if i < 2:
                x = ops.relu_dropout(x, self.dropout, self.training)  # dropout(relu(x))
        return x


class PygSAGE(nn.Module):
    def __init__(self, width_in: int, hidden: int, classes: int, dropout: float = 0.0) -> None:
        super().__init__()
        from torch_geometric.nn import SAGEConv

        widths = [width_in, hidden, hidden, classes]
        self.convs = nn.ModuleList(SAGEConv(widths[i], widths[i + 1]) for i in range(3))
        self.dropout = dropout

    def forward(self, blocks, x):
        for i, (conv, (edge_index, size)) in enumerate(zip(self.convs, blocks)):
            x = conv((x, x[: size[1]]), edge_index, size=size)
            if i < 2:
                x = F.dropout(F.relu(x), self.dropout, self.training)
        return x


def pyg_loader_forward(model: PygSAGE, batch):
    """PyG's NeighborLoader recipe: layers on the sampled subgraph, the seeds' rows out;
    the model's dropout after each hidden ReLU, as PygSAGE.forward applies it.

    With pyg-lib the batch reports nodes and edges per hop and each layer trims the
    subgraph to what later layers need (PyG's hierarchical recipe); torch-sparse's
    sampler does not report them, so every layer runs on the whole subgraph.
    """
    from torch_geometric.utils import trim_to_layer

    x, edge_index = batch.x, batch.edge_index
    hops = getattr(batch, "num_sampled_nodes", None)
    for i, conv in enumerate(model.convs):
        if hops is not None:
            x, edge_index, _ = trim_to_layer(i, hops, batch.num_sampled_edges, x, edge_index)
        x = conv(x, edge_index)
        if i < 2:
            x = F.dropout(F.relu(x), model.dropout, model.training)
    return x[: batch.batch_size]


def pyg_loader_side(graph: Graph, x, y, train, test, theirs, steps, args, labelled):
    """(epoch time, accuracy) of PyG's own pipeline: NeighborLoader + the PyG model."""
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader

    data = Data(x=x, y=y, edge_index=torch.stack([graph.src, graph.dst]),
                num_nodes=graph.num_nodes)
    loader = NeighborLoader(data, num_neighbors=[10, 10, 10], batch_size=1024,
                            input_nodes=train, shuffle=True,
                            generator=torch.Generator().manual_seed(0))
    optimizer = torch.optim.Adam(theirs.parameters(), lr=0.003)

    def epoch():
        theirs.train()
        for step, batch in enumerate(loader):
            if step == steps:
                break
            logits = pyg_loader_forward(theirs, batch)
            optimizer.zero_grad()
            F.cross_entropy(logits, batch.y[: batch.batch_size]).backward()
            optimizer.step()

    seconds = timed_epochs(epoch, args.sage_epochs)
    if not labelled:
        return seconds, None
    theirs.eval()
    correct = 0
    with torch.no_grad():
        for batch in NeighborLoader(data, num_neighbors=[10, 10, 10], batch_size=1024,
                                    input_nodes=test, shuffle=False):
            logits = pyg_loader_forward(theirs, batch)
            correct += int((logits.argmax(1) == batch.y[: batch.batch_size]).sum())
    return seconds, correct / test.numel()


def pyg_blocks(blocks):
    out = []
    for block in blocks:
        src, dst = block.coo()
        out.append((torch.stack([src, dst]), (block.num_src_nodes, block.num_dst_nodes)))
    return out


def sampled_row(rows, name, graph: Graph, x, y, train, test, args, labelled=True):
    from gnnforge.sampling import NeighborSampler, NodeSeeds

    classes = int(y.max()) + 1
    torch.manual_seed(0)
    ours, theirs = OurSAGE(x.shape[1], 64, classes), PygSAGE(x.shape[1], 64, classes)
    theirs.load_state_dict(ours.state_dict())
    dgl = dgl_side(args)
    if dgl is not None:
        from _end_to_end_dgl import DglSAGE, dgl_blocks, dgl_loader_side

        dgl_initial = DglSAGE(ours)
        dgl_model = copy.deepcopy(dgl_initial)
        convert_dgl = lambda blocks: dgl_blocks(dgl, blocks)  # noqa: E731
    sampler = NeighborSampler([10, 10, 10])
    seeds = NodeSeeds(train, 1024, seed=0)
    steps = min(len(seeds), args.sage_steps)
    graph.csr()  # the sides share the sampler; build the CSR outside the timing
    from gnnforge.nn import SparseFeatures

    # Mostly-zero inputs (PubMed's TF-IDF) stay sparse on the gnnforge side: a batch
    # gathers the non-zeros of its input rows and layer 0 projects over them.
    density = int(torch.count_nonzero(x)) / max(x.numel(), 1)
    sparse = SparseFeatures.from_dense(x) if density < SPARSE_INPUT_DENSITY else None
    # gnnforge: ops.gather_rows (what `gnnforge train` gathers with: index_select or the
    # prefetching native copy, whichever measured faster); the peers on shared blocks:
    # index_select, as PyG's NeighborLoader gathers a batch's features (filter_data); on
    # one thread it is about 6x faster than x[nodes] for these [29k, 64] gathers.
    from gnnforge.ops import gather_rows

    gather_ours = ((lambda nodes: sparse.rows(nodes)) if sparse is not None
                   else (lambda nodes: gather_rows(x, nodes)))
    gather_theirs = lambda nodes: x.index_select(0, nodes)  # noqa: E731

    def trainer(model, convert, gather):
        optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
        generator = torch.Generator().manual_seed(0)
        state = {"epoch": 0}

        def epoch():
            seeds.set_epoch(state["epoch"])
            state["epoch"] += 1
            model.train()
            for step, batch in enumerate(seeds):
                if step == steps:
                    break
                blocks = sampler.sample(graph, batch, generator=generator)
                logits = model(convert(blocks), gather(blocks[0].src_nodes))
                optimizer.zero_grad()
                F.cross_entropy(logits, y[batch]).backward()
                optimizer.step()
        return epoch

    def accuracy(model, convert, gather):
        if not labelled:
            return None
        model.eval()
        generator = torch.Generator().manual_seed(1)
        correct = 0
        with torch.no_grad():
            for batch in NodeSeeds(test, 1024, shuffle=False):
                blocks = sampler.sample(graph, batch, generator=generator)
                logits = model(convert(blocks), gather(blocks[0].src_nodes))
                correct += int((logits.argmax(1) == y[batch]).sum())
        return correct / test.numel()

    t_ours = timed_epochs(trainer(ours, lambda b: b, gather_ours), args.sage_epochs)
    initial = {k: v.clone() for k, v in theirs.state_dict().items()}
    t_theirs = timed_epochs(trainer(theirs, pyg_blocks, gather_theirs), args.sage_epochs)
    t_dgl, acc_dgl = args.dgl_missing, None
    if dgl is not None:
        t_dgl = timed_epochs(trainer(dgl_model, convert_dgl, gather_theirs), args.sage_epochs)
        acc_dgl = accuracy(dgl_model, convert_dgl, gather_theirs)
    model_only_row(rows, name, (ours, theirs, dgl_model if dgl is not None else None),
                   graph, sampler, seeds, steps, (gather_ours, gather_theirs), y, args)
    extra = ("" if labelled else "; random features/labels") + (
        f"; gnnforge: sparse input ({density:.2%} non-zero)" if sparse is not None else "")
    acc_ours = accuracy(ours, lambda b: b, gather_ours)
    print_row(rows, f"SAGE sampled [10,10,10] b1024, {name} ({steps} steps/epoch), peers on "
              "gnnforge blocks", t_ours, t_theirs, t_dgl, acc_ours,
              accuracy(theirs, pyg_blocks, gather_theirs), acc_dgl,
              "PyG and DGL models on the blocks gnnforge samples (sampling shared)" + extra)
    if not pyg_sampling() and dgl is None:
        print(f"SAGE {name}: peers' own samplers row skipped: PyG's NeighborLoader needs "
              f"pyg-lib or torch-sparse; {args.dgl_missing}")
        return
    t_loader, acc_loader = "skipped: needs pyg-lib or torch-sparse", None
    if pyg_sampling():
        theirs.load_state_dict(initial)
        t_loader, acc_loader = pyg_loader_side(graph, x, y, train, test, theirs, steps, args,
                                               labelled)
    t_dgl_loader, acc_dgl_loader = args.dgl_missing, None
    if dgl is not None:
        t_dgl_loader, acc_dgl_loader = dgl_loader_side(
            dgl, graph.src, graph.dst, graph.num_nodes, x, y, train, test,
            copy.deepcopy(dgl_initial), steps, args.sage_epochs, timed_epochs, labelled)
    pyg_how = pyg_sampler_words() if pyg_sampling() else "not measured"
    print_row(rows, f"SAGE sampled [10,10,10] b1024, {name} ({steps} steps/epoch), peers' "
              "own samplers", t_ours, t_loader, t_dgl_loader, acc_ours, acc_loader,
              acc_dgl_loader,
              f"the peers' own pipelines: PyG NeighborLoader ({pyg_how}), DGL NeighborSampler + "
              "DataLoader" + ("" if dgl is not None else " (not measured)") + extra)


def model_only_row(rows, name, models, graph, sampler, seeds, steps, gathers, y, args):
    """Forward+backward of the models on the same pre-sampled batches (no sampling).

    models: (gnnforge, PyG, DGL or None); gathers: (gnnforge's, the peers')."""
    ours, theirs, dgl_model = models
    dgl = dgl_side(args)
    seeds.set_epoch(0)
    generator = torch.Generator().manual_seed(2)
    batches = []
    for step, batch in enumerate(seeds):
        if step == steps:
            break
        blocks = sampler.sample(graph, batch, generator=generator)
        converted = {"ours": blocks, "pyg": pyg_blocks(blocks)}
        if dgl is not None:
            from _end_to_end_dgl import dgl_blocks

            converted["dgl"] = dgl_blocks(dgl, blocks)
        batches.append((converted, gathers[0](blocks[0].src_nodes),
                        gathers[1](blocks[0].src_nodes), y[batch]))

    def run(model, side: str):
        def epoch():
            for converted, ours_x, theirs_x, labels in batches:
                model.zero_grad()
                F.cross_entropy(model(converted[side], ours_x if side == "ours" else theirs_x),
                                labels).backward()
        return epoch

    print_row(rows, f"SAGE model only, {name} ({steps} pre-sampled batches)",
              timed_epochs(run(ours, "ours"), args.sage_epochs),
              timed_epochs(run(theirs, "pyg"), args.sage_epochs),
              timed_epochs(run(dgl_model, "dgl"), args.sage_epochs) if dgl is not None
              else args.dgl_missing, None, None, None,
              "forward+backward on identical blocks; sampling excluded")


def pyg_sampling() -> bool:
    return any(importlib.util.find_spec(m) is not None for m in ("pyg_lib", "torch_sparse"))


def pyg_sampler_words() -> str:
    """The backend PyG's NeighborLoader samples with here, and what it means for the
    layers: pyg-lib reports per-hop counts (trim_to_layer), torch-sparse does not."""
    from importlib.metadata import version

    if importlib.util.find_spec("pyg_lib") is not None:
        return f"pyg-lib {version('pyg_lib')}, trim_to_layer"
    return f"torch-sparse {version('torch_sparse')}; layers on the whole subgraph"


def sage_rows(rows, args) -> None:
    from gnnforge.data import rmat, shared_datasets_dir

    root = shared_datasets_dir()
    if root is not None and (root / "synthetic" / "rmat_s17_e21.npz").exists():
        arrays = np.load(root / "synthetic" / "rmat_s17_e21.npz")
        graph = Graph(torch.from_numpy(arrays["src"].astype(np.int64)),
                      torch.from_numpy(arrays["dst"].astype(np.int64)), int(arrays["num_nodes"]))
    else:
        graph = rmat(17, 2**21, seed=0)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(graph.num_nodes, 64, generator=generator)
    y = torch.randint(0, 8, (graph.num_nodes,), generator=generator)
    nodes = torch.randperm(graph.num_nodes, generator=generator)
    sampled_row(rows, "R-MAT 2^17/2^21", graph, x, y, nodes[:-4096], nodes[-4096:], args,
                labelled=False)
    if root is None:
        print("SAGE PubMed row skipped: shared/datasets not found")
        return
    graph = planetoid("pubmed")
    labelled = torch.nonzero(graph.node_data["has_label"]).flatten()
    order = labelled[torch.randperm(labelled.numel(), generator=generator)]
    cut = int(0.8 * order.numel())
    sampled_row(rows, "PubMed", graph, graph.node_data["x"], graph.node_data["y"],
                order[:cut], order[cut:], args)


# ----------------------------------------------------------------------------- GIN rows


def moses_tpsa(count: int) -> list[Graph]:
    """The first `count` MOSES training molecules with RDKit-computed TPSA as `y`.

    Cached in gnnforge's cache folder once built, so that an interpreter without RDKit or
    molsets (the peers' venv) can read them; without either and without the cache entry,
    raises ModuleNotFoundError naming the way out.
    """
    from gnnforge.data import cache_dir, load_graphs, save_graphs

    path = cache_dir() / f"end_to_end-moses-tpsa-{count}.npz"
    if path.exists():
        return load_graphs(path)[0]
    if importlib.util.find_spec("rdkit") is None:
        raise ModuleNotFoundError(
            f"GIN rows need RDKit to build the MOSES TPSA molecules (none cached at {path}); "
            f"run `benchmarks/end_to_end.py --rows gin --molecules {count}` once in a venv "
            "with RDKit and molsets to cache them")
    graphs = _build_moses_tpsa(count)
    save_graphs(path, graphs, {"source": "moses train", "count": count, "y": "RDKit TPSA"})
    return graphs


def _build_moses_tpsa(count: int) -> list[Graph]:
    from rdkit import Chem
    from rdkit.Chem import rdMolDescriptors

    from gnnforge.data import read_smiles, smiles_to_graph

    smiles, _, _ = read_smiles("moses")
    graphs = []
    for text in smiles[:count]:
        mol = Chem.MolFromSmiles(text)
        if mol is None:
            continue
        graph = smiles_to_graph(text)
        tpsa = torch.tensor([rdMolDescriptors.CalcTPSA(mol)], dtype=torch.float32)
        graphs.append(graph.with_graph_data(y=tpsa))
    return graphs


class OgbEncoder(nn.Module):
    """OGB's AtomEncoder / BondEncoder (ogb.graphproppred.mol_encoder): the sum of one
    nn.Embedding lookup per feature column, as PyG's OGB examples use it. Same parameter
    names as gnnforge's FeatureEncoder, whose embedding_bag computes the same sum."""

    def __init__(self, vocabulary_sizes, dim: int) -> None:
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(v, dim) for v in vocabulary_sizes)

    def forward(self, features):
        out = 0
        for column, embedding in enumerate(self.embeddings):
            out = out + embedding(features[:, column])
        return out


class PygMoleculeGIN(nn.Module):
    """gnnforge's MoleculeGIN with PyG's GINEConv and pooling and OGB's encoders (same
    parameter names, weights loaded from the gnnforge model)."""

    def __init__(self, reference) -> None:
        super().__init__()
        from torch_geometric.nn import GINEConv

        import copy

        hidden = reference.head.in_features
        self.atom_encoder = OgbEncoder(reference.atom_encoder.vocabulary_sizes, hidden)
        self.bond_encoders = nn.ModuleList(OgbEncoder(bond.vocabulary_sizes, hidden)
                                           for bond in reference.bond_encoders)
        self.convs = nn.ModuleList(GINEConv(nn.Identity(), train_eps=True)
                                   for _ in reference.convs)
        self.mlps = copy.deepcopy(reference.mlps)
        self.norms = copy.deepcopy(reference.norms)
        self.head = copy.deepcopy(reference.head)
        self.load_state_dict(reference.state_dict())

    def forward(self, data):
        from torch_geometric.nn import global_add_pool

        h = self.atom_encoder(data.x)
        last = len(self.convs) - 1
        for layer, (conv, mlp, norm, bond) in enumerate(
                zip(self.convs, self.mlps, self.norms, self.bond_encoders)):
            h = norm(mlp(conv(h, data.edge_index, bond(data.edge_attr)), None), None)
            if layer != last:
                h = F.relu(h)
        return self.head(global_add_pool(h, data.batch, size=data.num_graphs))


def gin_rows(rows, args) -> None:
    from torch_geometric.data import Data
    from torch_geometric.loader import DataLoader

    from gnnforge.data import ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS
    from gnnforge.nn import MoleculeGIN
    from gnnforge.train import PackedSplit, split_indices

    try:
        graphs = moses_tpsa(args.molecules)
    except ModuleNotFoundError as error:
        print(f"GIN rows skipped: {error}")
        return
    split = split_indices(len(graphs), seed=0)
    y = torch.stack([g.graph_data["y"] for g in graphs])
    mean, std = y[split["train"]].mean(), y[split["train"]].std()
    torch.manual_seed(0)
    ours = MoleculeGIN(ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS, hidden=64, num_layers=3)
    theirs = PygMoleculeGIN(ours)
    theirs_compiled = PygMoleculeGIN(ours) if args.pyg_compile else None  # same weights
    dgl = dgl_side(args)
    if dgl is not None:
        from _end_to_end_dgl import DglMoleculeGIN, molecule_graph, molecule_loader

        dgl_model = DglMoleculeGIN(theirs)  # before anything trains: the same weights
    packed = PackedSplit(graphs, split["train"], 128, seed=0)
    steps = len(packed.plan(0))
    pyg_train = [Data(x=g.node_data["x"], edge_index=torch.stack([g.src, g.dst]),
                      edge_attr=g.edge_data["edge_attr"], y=g.graph_data["y"].view(1, 1),
                      num_nodes=g.num_nodes) for g in (graphs[i] for i in split["train"])]
    batch_size = -(-len(pyg_train) // steps)
    loader = DataLoader(pyg_train, batch_size=batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(0))

    # Both sides: Adam's fused CPU kernel (one pass over each parameter per step).

    def our_epoch_fn():
        optimizer = torch.optim.Adam(ours.parameters(), lr=1e-3, fused=True)
        state = {"epoch": 0}

        def epoch():
            ours.train()
            packed.plan(state["epoch"])
            state["epoch"] += 1
            for number in range(len(packed)):
                batch = packed.batch(number)
                target = (batch.graph_data["y"] - mean) / std
                mask = batch.graph_mask.unsqueeze(1)
                loss = (((ours(batch) - target) ** 2) * mask).sum() / mask.sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        return epoch

    def their_epoch_fn(model=theirs, forward=None):
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
        forward = model if forward is None else forward

        def epoch():
            model.train()
            for data in loader:
                loss = F.mse_loss(forward(data), (data.y - mean) / std)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        return epoch

    def dgl_epoch_fn():
        optimizer = torch.optim.Adam(dgl_model.parameters(), lr=1e-3, fused=True)
        dgl_loader = molecule_loader(dgl, [graphs[i] for i in split["train"]], batch_size)

        def epoch():
            dgl_model.train()
            for batched, target in dgl_loader:
                loss = F.mse_loss(dgl_model(batched), (target - mean) / std)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        return epoch

    def mae(model, pyg: bool, on_dgl: bool = False) -> float:
        model.eval()
        test = [graphs[i] for i in split["test"]]
        with torch.no_grad():
            if on_dgl:
                prediction = model(dgl.batch([molecule_graph(dgl, g) for g in test]))
            elif pyg:
                data = next(iter(DataLoader(
                    [Data(x=g.node_data["x"], edge_index=torch.stack([g.src, g.dst]),
                          edge_attr=g.edge_data["edge_attr"], num_nodes=g.num_nodes)
                     for g in test], batch_size=len(test))))
                prediction = model(data)
            else:
                prediction = model(GraphBatch.from_graphs(test))
        target = torch.stack([g.graph_data["y"] for g in test])
        return float((prediction * std + mean - target).abs().mean())

    t_ours = timed_epochs(our_epoch_fn(), args.gin_epochs)
    t_theirs = timed_epochs(their_epoch_fn(), args.gin_epochs)
    t_dgl, mae_dgl = args.dgl_missing, None
    if dgl is not None:
        t_dgl = timed_epochs(dgl_epoch_fn(), args.gin_epochs)
        mae_dgl = mae(dgl_model, False, on_dgl=True)
    nodes, edges = packed.padding_fraction()
    print_row(rows, f"GIN MOSES TPSA, {len(graphs)} mols ({steps} steps/epoch)", t_ours,
              t_theirs, t_dgl, mae(ours, False), mae(theirs, True), mae_dgl,
              f"test MAE (A^2); packed node/edge padding {nodes:.1%}/{edges:.1%}; PyG "
              f"and DGL batch {batch_size}")
    if theirs_compiled is not None:
        epoch = their_epoch_fn(theirs_compiled,
                               torch.compile(theirs_compiled, dynamic=True))
        start = time.perf_counter()
        epoch()                                   # compiles (dynamic shapes: once)
        first = time.perf_counter() - start
        t_compiled = timed_epochs(epoch, args.gin_epochs)
        print_row(rows, f"GIN MOSES TPSA, {len(graphs)} mols ({steps} steps/epoch), PyG "
                  "torch.compile(dynamic=True)", t_ours, t_compiled, None, mae(ours, False),
                  mae(theirs_compiled, True), None,
                  f"PyG compiled; its first epoch incl. compile {first * 1e3:.0f} ms, "
                  f"not in its ms/epoch; gnnforge eager (same run as the row above)")


def products(args) -> int:
    """--products (the parent: one child per side) or --products-side (a child)."""
    from _end_to_end_products import print_result, products_rows, run_side

    from gnnforge.data import PRODUCTS_NODES

    args.products_nodes = args.products_nodes or PRODUCTS_NODES
    models = {"OurSAGE": OurSAGE, "PygSAGE": PygSAGE, "pyg_loader_forward": pyg_loader_forward}
    if args.products_side is not None:
        if args.products_side == "DGL":
            from _end_to_end_dgl import import_dgl

            models["dgl"] = import_dgl(args.threads)
        if args.products_gcn:
            from _end_to_end_products_gcn import run_gcn_side

            models.update(OurGCN=OurGCN, PygGCN=PygGCN)
            print_result(run_gcn_side(args.products_side, args.products_nodes,
                                      args.products_steps, models))
        else:
            print_result(run_side(args.products_side, args.products_nodes,
                                  args.products_steps, models, args.products_dropout[0]))
        return 0
    print(f"torch {torch.__version__}, torch_geometric "
          f"{importlib.import_module('torch_geometric').__version__}, {args.threads} thread(s)")
    reason = dgl_reason()
    print(reason or f"dgl {importlib.import_module('dgl').__version__}")
    skipped = {}
    if reason is not None:
        skipped["DGL"] = reason.split("(")[0].removeprefix("DGL ").strip()
    if args.products_gcn:
        skipped["note PyG"] = "torch.sparse CSR adj_t (PyG's large-graph path)"
    elif not pyg_sampling():
        skipped["PyG"] = "skipped: NeighborLoader needs pyg-lib or torch-sparse"
    elif "PyG" in args.products_sides:
        print(f"PyG NeighborLoader: {pyg_sampler_words()}")
    if not args.products_gcn and "GraphBolt" in args.products_sides:
        _graphbolt_side(args, skipped)
    left_out = [side for side in SIDES if side not in args.products_sides]
    if left_out:
        print(f"not in this run (--products-sides): {', '.join(left_out)}")
    products_rows(str(Path(__file__).resolve()), args, skipped, models)
    return 0


def _graphbolt_side(args, skipped: dict[str, str]) -> None:
    """args.graphbolt: the GraphBolt child's interpreter, or skipped["GraphBolt"]: why not."""
    from _end_to_end_graphbolt import graphbolt_python

    args.graphbolt, reason = graphbolt_python(args.graphbolt_python)
    if reason is None:
        print(f"GraphBolt: {args.graphbolt}")
    else:
        skipped["GraphBolt"] = reason


def _sides(text: str) -> list[str]:
    sides = [part.strip() for part in text.split(",")]
    unknown = [side for side in sides if side not in SIDES]
    if unknown:
        raise argparse.ArgumentTypeError(f"sides among {', '.join(SIDES)}; got {unknown}")
    return sides


def _probabilities(text: str) -> list[float]:
    values = [float(part) for part in text.split(",")]
    if not values or not all(0.0 <= value < 1.0 for value in values):
        raise argparse.ArgumentTypeError(f"dropout probabilities in [0, 1), got {text!r}")
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="gcn,sage,gin", help="which rows: gcn,sage,gin")
    parser.add_argument("--epochs", type=int, default=100, help="timed GCN epochs (Planetoid)")
    parser.add_argument("--sage-epochs", type=int, default=5)
    parser.add_argument("--sage-steps", type=int, default=8, help="steps per SAGE epoch")
    parser.add_argument("--gin-epochs", type=int, default=5)
    parser.add_argument("--molecules", type=int, default=20000)
    parser.add_argument("--pyg-compile", action="store_true",
                        help="gin: add a row with the PyG model under "
                             "torch.compile(dynamic=True)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--accuracy-seeds", type=int, default=0,
                        help="GCN Planetoid rows: instead of timing, report test accuracy "
                             "mean +- std over this many seeds for both sides")
    parser.add_argument("--products", action="store_true",
                        help="instead of the rows: sampled GraphSAGE on synthetic-products, "
                             "gnnforge vs DGL vs PyG NeighborLoader, each in its own process "
                             "(time per step, seeds/s, peak RSS, accuracy)")
    parser.add_argument("--products-nodes", type=int, default=None,
                        help="--products: nodes of the synthetic graph (default: "
                             "ogbn-products' 2,449,029)")
    parser.add_argument("--products-steps", type=int, default=50,
                        help="--products: timed optimiser steps per side")
    parser.add_argument("--products-gcn", action="store_true",
                        help="--products: full-graph GCN 2x256 instead (training step and "
                             "inference, median of --products-steps after one)")
    parser.add_argument("--products-dropout", type=_probabilities, default=[0.5],
                        help="--products (SAGE): dropout after each hidden ReLU, as DGL's and "
                             "PyG's examples (default 0.5); a comma list runs every side at "
                             "each (0: rows marked 'no dropout')")
    parser.add_argument("--keep-freed-memory", action="store_true",
                        help="--products: every side again with glibc keeping freed blocks "
                             "for reuse (GLIBC_TUNABLES mmap_max=0, a 16 GiB trim "
                             "threshold), as a tuned allocator would")
    parser.add_argument("--products-sides", type=_sides, default=list(SIDES),
                        help="--products: the sides to run, a comma list (default all; a "
                             "PyG NeighborLoader step takes tens of seconds here)")
    parser.add_argument("--graphbolt-python", metavar="PATH",
                        default=os.environ.get("GNNFORGE_GRAPHBOLT_PYTHON"),
                        help="--products: the interpreter of a venv whose DGL GraphBolt "
                             "works (DGL 2.1: torch <= 2.2.1; benchmarks/graphbolt_venv.sh "
                             "makes one); default: $GNNFORGE_GRAPHBOLT_PYTHON, else this "
                             "one when its GraphBolt works")
    # The child process of --products (GraphBolt's child is _end_to_end_graphbolt.py).
    parser.add_argument("--products-side", choices=[s for s in SIDES if s != "GraphBolt"],
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    from gnnforge.train._cli import set_threads

    set_threads(args.threads)  # torch and numba: idle spinning pools slow each other down
    if args.products or args.products_side:
        return products(args)
    print(f"torch {torch.__version__}, torch_geometric "
          f"{importlib.import_module('torch_geometric').__version__}, {args.threads} thread(s)")
    reason = dgl_reason()
    # a DGL cell when DGL cannot run: "skipped: not installed" or "skipped: import fails ..."
    args.dgl, args.dgl_missing = None, (reason or "").split("(")[0].removeprefix("DGL ").strip()
    if reason is None:
        from _end_to_end_dgl import import_dgl

        args.dgl = import_dgl(args.threads)
        print(f"dgl {args.dgl.__version__}, {args.dgl.utils.get_num_threads()} OpenMP "
              "thread(s)")
    else:
        print(reason)
    if args.accuracy_seeds:
        dgl_column = " DGL acc |" if args.dgl is not None else ""
        print(f"| workload | gnnforge acc | PyG acc |{dgl_column}\n| --- | --- | --- |"
              + (" --- |" if dgl_column else ""))
    else:
        print("| workload | gnnforge ms/epoch | PyG ms/epoch | DGL ms/epoch | vs PyG | vs fastest"
              " peer | gnnforge acc | PyG acc | DGL acc | note |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    rows: list = []
    chosen = args.rows.split(",")
    for name, function in (("gcn", gcn_rows), ("sage", sage_rows), ("gin", gin_rows)):
        if name in chosen:
            function(rows, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
