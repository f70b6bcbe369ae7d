"""end_to_end.py --products: sampled GraphSAGE on synthetic-products, each side alone.

The workload: GraphSAGE-mean, 3 layers, hidden 256, fanouts [15, 10, 5], batch 1024,
dropout 0.5 after each hidden ReLU (DGL's and PyG's ogbn-products examples; each side
its library's dropout: gnnforge's `ops.dropout`, torch's for DGL and PyG, as their
examples call it; `--products-dropout` sets it, 0 for none), a
fixed number of optimiser steps (Adam, lr 0.003) on `gnnforge.data.load_synthetic_products`
(ogbn-products' shape: 100 features, 47 classes, its split proportions; see
gnnforge/data/_synthetic_products.py). Every side starts from the same weights (gnnforge's
`OurSAGE` at torch.manual_seed(0), copied), and each runs in its own child process, so
its peak RSS (the process's own high-water mark, `gnnforge.train._resources.peak_rss_mib`;
getrusage's ru_maxrss would start at the parent's RSS) is its own:

  gnnforge  the loader's CSR as `InEdges` (int32, read into memory in huge pages where
            it fits, docs/data.md; every side gets these arrays but GraphBolt, which
            reads the files the same way), `NeighborSampler`, `NodeSeeds`; layer 1 reads
            the [N, 100] feature table through `nn.IndexedRows` (aggregating straight
            from it, gathering only its destinations' rows; `gnnforge train` gathers
            every input row instead).
  DGL       examples/pytorch/graphsage/node_classification.py: a CSC-only int64 DGL graph
            built from the CSR (DGL needs it in memory), x and y as ndata,
            NeighborSampler(fanouts, prefetch_node_feats, prefetch_labels) +
            dgl.dataloading.DataLoader (shuffled, no workers), dgl.nn.SAGEConv('mean').
  PyG       NeighborLoader over Data(x, y, edge_index) (PyG needs the [2, E] int64 COO),
            PyG's SAGEConv; needs pyg-lib or torch-sparse, else its row says so.
  GraphBolt DGL's newer pipeline (examples/sampling/graphbolt/node_classification.py):
            fused_csc_sampling_graph over the CSR, ItemSampler + sample_neighbor +
            fetch_feature + gb.DataLoader, the DGL side's model. DGL 2.1's GraphBolt has
            libraries for torch <= 2.2.1 only, so it runs in its own venv
            (`--graphbolt-python`; benchmarks/_end_to_end_graphbolt.py), its row naming
            its torch; without one its row says why it was skipped.

Time per step: the mean over the timed steps after WARMUP_STEPS untimed ones, sampling,
feature gathering and the optimiser step included. Accuracy: after the fixed steps, on
the same seeded EVAL_NODES test nodes for every side, each sampling with its own sampler
(training fanouts).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from _torch_free import peak_rss_mib

FANOUTS = [15, 10, 5]
BATCH = 1024
HIDDEN = 256
WARMUP_STEPS = 3
EVAL_NODES = 4096
SIDES = ("gnnforge", "DGL", "PyG", "GraphBolt")  # GraphBolt: sampled SAGE only
_RESULT = "PRODUCTS_RESULT "


def eval_nodes(test: torch.Tensor) -> torch.Tensor:
    """At most EVAL_NODES test nodes, seeded, sorted: the same for every side."""
    if test.numel() <= EVAL_NODES:
        return test
    order = torch.randperm(test.numel(), generator=torch.Generator().manual_seed(0))
    return test[order[:EVAL_NODES]].sort().values


def timed_steps(batches: Iterator, step: Callable[[Any], None], steps: int) -> float:
    """Seconds per step over `steps` steps after WARMUP_STEPS untimed ones."""
    for _ in range(WARMUP_STEPS):
        step(next(batches))
    start = time.perf_counter()
    for _ in range(steps):
        step(next(batches))
    return (time.perf_counter() - start) / steps


def _forever(make_epoch: Callable[[int], Any]) -> Iterator:
    epoch = 0
    while True:
        yield from make_epoch(epoch)
        epoch += 1


def _train_step(model, optimizer, forward: Callable[[Any], tuple]) -> Callable[[Any], None]:
    def step(batch) -> None:
        model.train()
        logits, labels = forward(batch)
        optimizer.zero_grad()
        F.cross_entropy(logits, labels).backward()
        optimizer.step()
    return step


def _accuracy(model, batches, forward) -> tuple[int, int]:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for batch in batches:
            logits, labels = forward(batch)
            correct += int((logits.argmax(1) == labels).sum())
            total += labels.numel()
    return correct, total


def run_side(side: str, nodes: int, steps: int, models: dict[str, Any],
             dropout: float = 0.0) -> dict[str, Any]:
    """One side's measurements (in this process): models holds end_to_end's OurSAGE,
    PygSAGE and pyg_loader_forward, and for DGL the imported module as "dgl"; `dropout`
    after each hidden ReLU (each side its library's: gnnforge `ops.dropout`, torch's)."""
    from gnnforge.data import load_synthetic_products

    baseline = peak_rss_mib()  # torch, the peer and the script imported
    data = load_synthetic_products(nodes, progress=False)
    classes = int(data.meta["spec"]["num_classes"])
    torch.manual_seed(0)
    ours = models["OurSAGE"](data.x.shape[1], HIDDEN, classes, dropout)
    test = eval_nodes(data.test)
    work = None  # the sampled work per step, measured on our side (scaling.py)
    if side == "gnnforge":
        seconds, (correct, total), work = _ours(data, ours, steps, test)
    elif side == "DGL":
        from _end_to_end_dgl import DglSAGE

        seconds, (correct, total) = _dgl(models["dgl"], data, DglSAGE(ours), steps, test)
    elif side == "PyG":
        theirs = models["PygSAGE"](data.x.shape[1], HIDDEN, classes, dropout)
        theirs.load_state_dict(ours.state_dict())
        seconds, (correct, total) = _pyg(data, theirs, steps, test,
                                         models["pyg_loader_forward"])
    else:  # GraphBolt runs on another torch: benchmarks/_end_to_end_graphbolt.py
        raise ValueError(f"run_side runs gnnforge, DGL or PyG, not {side!r}")
    return {"side": side, "ms_per_step": seconds * 1e3, "seeds_per_s": BATCH / seconds,
            "work": work,
            "peak_rss_mib": peak_rss_mib(), "baseline_rss_mib": baseline,
            "accuracy": correct / max(total, 1), "eval_nodes": total,
            "nodes": data.num_nodes, "edges": data.num_edges}


def _ours(data, model, steps, test):
    from gnnforge.nn import IndexedRows
    from gnnforge.sampling import InEdges, NeighborSampler, NodeSeeds

    edges = InEdges(data.rowptr, data.col, data.col[:0], data.num_nodes)  # eids: CSR order
    sampler = NeighborSampler(FANOUTS)
    seeds = NodeSeeds(data.train, BATCH, seed=0)
    generator = torch.Generator().manual_seed(0)

    work = []  # per step: (input nodes, sampled edges), for scaling.py

    def epoch(number: int):
        seeds.set_epoch(number)
        for batch in seeds:
            blocks = sampler.sample(edges, batch, generator=generator)
            work.append((blocks[0].num_src_nodes, sum(block.num_edges for block in blocks)))
            yield blocks, batch

    def forward(item):
        blocks, batch = item
        # Layer 1 aggregates straight from the feature table: only its destinations' rows
        # are gathered (DGL's loader gathers every input row, `prefetch_node_feats`).
        return model(blocks, IndexedRows(data.x, blocks[0].src_nodes)), data.y[batch]

    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    seconds = timed_steps(_forever(epoch), _train_step(model, optimizer, forward), steps)
    evaluation = torch.Generator().manual_seed(1)
    batches = ((sampler.sample(edges, batch, generator=evaluation), batch)
               for batch in test.split(BATCH))
    return seconds, _accuracy(model, batches, forward), _mean_work(work[WARMUP_STEPS:])


def _mean_work(work: list[tuple[int, int]]) -> dict[str, float]:
    """Mean sampled work of the timed steps: unique input nodes (rows gathered) and
    sampled edges (all layers). The fanouts bound them, but below the bound they grow
    with the graph: fewer sampled neighbours coincide in a larger graph."""
    columns = list(zip(*work)) or [(0,), (0,)]
    names = ("input_nodes", "sampled_edges")
    return {name: sum(values) / len(values) for name, values in zip(names, columns)}


def _dgl(dgl, data, model, steps, test):
    indptr = torch.from_numpy(data.rowptr.astype(np.int64))
    indices = torch.from_numpy(data.col.astype(np.int64))
    # By destination, as the sampler reads it; CSC only: no COO or CSR copies.
    graph = dgl.graph(("csc", (indptr, indices, torch.empty(0, dtype=torch.int64))),
                      num_nodes=data.num_nodes).formats("csc")
    graph.ndata["feat"], graph.ndata["label"] = data.x, data.y
    sampler = dgl.dataloading.NeighborSampler(FANOUTS, prefetch_node_feats=["feat"],
                                              prefetch_labels=["label"])
    torch.manual_seed(0)  # the loader shuffles with torch's global generator
    loader = dgl.dataloading.DataLoader(graph, data.train, sampler, batch_size=BATCH,
                                        shuffle=True, drop_last=False, num_workers=0)

    def forward(item):
        _, _, blocks = item
        return model(blocks, blocks[0].srcdata["feat"]), blocks[-1].dstdata["label"]

    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    seconds = timed_steps(_forever(lambda _: iter(loader)), _train_step(model, optimizer,
                                                                        forward), steps)
    evaluation = dgl.dataloading.DataLoader(graph, test, sampler, batch_size=BATCH,
                                            shuffle=False, num_workers=0)
    return seconds, _accuracy(model, evaluation, forward)


def _pyg(data, model, steps, test, pyg_forward):
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader

    counts = np.diff(data.rowptr).astype(np.int64)
    dst = torch.from_numpy(np.repeat(np.arange(data.num_nodes, dtype=np.int64), counts))
    edge_index = torch.stack([torch.from_numpy(data.col.astype(np.int64)), dst])
    graph = Data(x=data.x, y=data.y, edge_index=edge_index, num_nodes=data.num_nodes)
    loader = NeighborLoader(graph, num_neighbors=FANOUTS, batch_size=BATCH,
                            input_nodes=data.train, shuffle=True,
                            generator=torch.Generator().manual_seed(0))

    def forward(batch):
        return pyg_forward(model, batch), batch.y[: batch.batch_size]

    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    seconds = timed_steps(_forever(lambda _: iter(loader)), _train_step(model, optimizer,
                                                                        forward), steps)
    evaluation = NeighborLoader(graph, num_neighbors=FANOUTS, batch_size=BATCH,
                                input_nodes=test, shuffle=False)
    return seconds, _accuracy(model, evaluation, forward)


# ----------------------------------------------------------------------------- the parent


def print_result(result: dict[str, Any]) -> None:
    """The child's last line: its result for the parent."""
    print(_RESULT + json.dumps(result), flush=True)


# glibc's malloc maps every block of 32 MiB or more afresh and unmaps it on free, so a
# step that allocates large activations page-faults (and the kernel zeroes) them anew each
# time. With these tunables the blocks come from glibc's heap and freed ones are kept for
# reuse: what a user gets from a tuned allocator (jemalloc/tcmalloc, as CPU tuning guides
# advise). At one thread (2026-11-29, end_to_end.products) DGL's step fell 1.66x, ours 1.32x.
KEEP_FREED = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184"
KEEP_FREED_LABEL = "glibc keeps freed memory"


def allocator_settings(args) -> list[tuple[str, dict[str, str]]]:
    """(label suffix, environment additions) per allocator setting the rows run under."""
    settings = [("", {})]
    if args.keep_freed_memory:
        settings.append((f" ({KEEP_FREED_LABEL})", {"GLIBC_TUNABLES": KEEP_FREED}))
    return settings


def products_rows(script: str, args, skipped: dict[str, str],
                  models: dict[str, Any]) -> None:
    """One row per side (and allocator setting), each measured by
    `script --products-side SIDE` in a child (GraphBolt's: `_end_to_end_graphbolt.py` on
    `args.graphbolt`, its interpreter).

    skipped: side -> why it cannot run here (a cell instead of a child); models:
    end_to_end's, OurSAGE for the GraphBolt child's initial weights."""
    from gnnforge.data import load_synthetic_products

    data = load_synthetic_products(args.products_nodes, prefetch=False)  # generated once
    sides = [side for side in SIDES if side in args.products_sides
             and not (args.products_gcn and side == "GraphBolt")]
    if args.products_gcn:
        from _end_to_end_products_gcn import gcn_header, gcn_row

        header, row, cells = gcn_header(data, args), gcn_row, 7
    else:
        header, row, cells = _sage_header(data, args), _sage_row, 6
    with tempfile.TemporaryDirectory() as folder:
        if "GraphBolt" in sides and "GraphBolt" not in skipped:
            args.graphbolt_inputs = _graphbolt_inputs(data, models, Path(folder))
        del data
        print(header, flush=True)
        _print_rows(script, args, skipped, sides, row, cells)


def _graphbolt_inputs(data, models: dict[str, Any], folder: Path) -> tuple[Path, Path]:
    """(the dataset's folder, the initial weights' file) for the GraphBolt child."""
    from _end_to_end_graphbolt import write_weights

    torch.manual_seed(0)  # every side's start: gnnforge's OurSAGE at seed 0
    model = models["OurSAGE"](data.x.shape[1], HIDDEN, int(data.meta["spec"]["num_classes"]))
    write_weights(folder / "weights.npz", model)
    return data.folder, folder / "weights.npz"


def _print_rows(script: str, args, skipped: dict[str, str], sides: list[str], row,
                cells: int) -> None:
    dropouts = [0.0] if args.products_gcn else args.products_dropout
    for dropout, (suffix, environment) in itertools.product(dropouts, allocator_settings(args)):
        for side in sides:
            label = side + (" (no dropout)" if dropout == 0.0 and not args.products_gcn
                            else "") + suffix
            if side in skipped:
                print(f"| {label} | {skipped[side]} |" + " n/a |" * (cells - 2) + " |",
                      flush=True)
                continue
            result = _child_result(script, args, side, environment, dropout)
            if isinstance(result, str):
                print(f"| {label} | failed ({result}) |" + " n/a |" * (cells - 2) + " |",
                      flush=True)
                continue
            result["side"] = label
            note = skipped.get("note " + side, "")
            if "torch" in result:  # GraphBolt's child: not the other sides' torch
                note = f"torch {result['torch']} (the other sides {torch.__version__})"
            print(row(result, note), flush=True)


def _child_result(script: str, args, side: str, environment: dict[str, str],
                  dropout: float) -> dict[str, Any] | str:
    """The side's result from its own child process, or why it failed."""
    if side == "GraphBolt":
        from _end_to_end_graphbolt import graphbolt_command

        command = graphbolt_command(args.graphbolt, *args.graphbolt_inputs,
                                    args.products_steps, args.threads, dropout)
    else:
        command = [sys.executable, script, "--products-side", side, "--products-nodes",
                   str(args.products_nodes), "--products-steps", str(args.products_steps),
                   "--threads", str(args.threads), "--products-dropout", str(dropout)]
        command += ["--products-gcn"] if args.products_gcn else []
    child = subprocess.run(command, capture_output=True, text=True,
                           env={**os.environ, **environment})
    lines = [line for line in child.stdout.splitlines() if line.startswith(_RESULT)]
    if child.returncode != 0 or not lines:
        tail = (child.stderr.strip().splitlines() or ["no output"])[-1][:150]
        return f"exit {child.returncode}: {tail}"
    return json.loads(lines[-1].removeprefix(_RESULT))


def _sage_header(data, args) -> str:
    return (f"synthetic-products: {data.num_nodes:,} nodes, {data.num_edges:,} directed edges; "
            f"GraphSAGE-mean 3x{HIDDEN}, fanouts {FANOUTS}, batch {BATCH}, "
            f"{_dropout_words(args.products_dropout)}, "
            f"{args.products_steps} timed steps after {WARMUP_STEPS}, each side in its own "
            "process\n"
            "| side | ms/step | seeds/s | peak RSS (MiB) | RSS after imports (MiB) | test acc "
            "| note |\n"
            "| --- | --- | --- | --- | --- | --- | --- |")


def _dropout_words(dropouts: list[float]) -> str:
    """The header's dropout clause: the rates run, and whose dropout each side uses."""
    rates = " and ".join("none" if p == 0.0 else str(p) for p in dropouts)
    return (f"dropout after each hidden ReLU: {rates} (DGL's and PyG's examples: 0.5; "
            "gnnforge ops.relu_dropout, DGL and PyG torch's)")


def _sage_row(result: dict[str, Any], note: str) -> str:
    return (f"| {result['side']} | {result['ms_per_step']:.1f} | {result['seeds_per_s']:,.0f} | "
            f"{result['peak_rss_mib']:,.0f} | {result['baseline_rss_mib']:,.0f} | "
            f"{result['accuracy']:.3f} | {result['eval_nodes']} test nodes"
            + (f"; {note}" if note else "") + " |")
