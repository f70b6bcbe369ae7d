"""end_to_end.py --products-gcn: full-graph GCN on synthetic-products, each side alone.

The workload: end_to_end's GCN (2 layers, dropout 0.5, relu) with hidden 256 on
`gnnforge.data.load_synthetic_products` (ogbn-products' shape: 100 features, 47
classes), every side from the same weights (gnnforge's `OurGCN` at torch.manual_seed(0),
copied). Measured per side, in its own child process (so its peak RSS is its own):

  training step  forward over the whole graph, cross-entropy on the train nodes,
                 backward, Adam (lr 0.01, weight decay 5e-4): the median of `repeats`
                 steps after untimed ones: the first (which also prepares the graph:
                 loops, degrees) and one more, and for gnnforge more while its layers
                 race their plans (the note says how many).
  inference      eval mode, no_grad, the whole graph: median of `repeats` after the same.
  accuracy       test accuracy after the first step, before any timing (every side has
                 then taken the same step: a check that the sides compute alike, not a
                 trained number).

How each side holds the graph (the CSR by destination is read from the dataset's memory
maps, `prefetch=False`):

  gnnforge  `Graph` (int64 COO), `gnnforge.nn.GCNConv` (loops replaced by one per node,
            PyG's gcn_norm), the association per layer chosen before timing by
            `gnnforge.plan.optimize(..., caution=0)` (the cost models' prediction).
  DGL       examples/pytorch/gcn: `dgl.graph((src, dst))`, `dgl.remove_self_loop`,
            `dgl.add_self_loop`, every sparse format built before timing,
            `GraphConv(norm='both')` (it aggregates first when in < out, like gnnforge).
  PyG       its large-graph path (the ogbn-products GCN example's adj_t): a torch.sparse
            CSR adjacency (by destination) with gcn_norm applied once (GCNConv(cached=True,
            normalize=True)). With an edge_index, PyG would materialise [E', 256] messages
            (about 129 GB here), so that path is not timed.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from gnnforge.train._resources import peak_rss_mib

HIDDEN = 256
MAX_WARMUP = 8


def _median_seconds(call: Callable[[], None], repeats: int, model,
                    training: bool) -> tuple[float, int]:
    """(median seconds of `repeats` calls, untimed warm-up calls before them).

    Warm-up: one call (allocator pools), and more while a gnnforge layer still races its
    plans (at most MAX_WARMUP): the steady state is timed."""
    from gnnforge.plan import auto_plans

    def racing() -> bool:  # a layer's plan for this mode (key[6]: training) still racing
        return any(entry.plan is None and key[6] == training for module in model.modules()
                   for key, entry in auto_plans(module).items())

    warmup = 0
    while warmup == 0 or (racing() and warmup < MAX_WARMUP):
        call()
        warmup += 1
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), warmup


def _coo(data) -> tuple[torch.Tensor, torch.Tensor]:
    """(src, dst) int64 of the CSR by destination."""
    counts = np.diff(data.rowptr).astype(np.int64)
    dst = torch.from_numpy(np.repeat(np.arange(data.num_nodes, dtype=np.int64), counts))
    return torch.from_numpy(data.col.astype(np.int64)), dst


def _side_inputs(side: str, data, reference, models: dict[str, Any], hidden: int):
    """(model, graph-like argument, forward(model, graph, x)) for `side`."""
    src, dst = _coo(data)
    if side == "gnnforge":
        from gnnforge.graph import Graph

        from gnnforge.plan import optimize

        graph = Graph._trusted(src, dst, data.num_nodes)  # generated ids: in range
        # Plans chosen by the cost models' prediction before the first step, not raced (a
        # race here is several full-graph steps of the slower plans), the predicted
        # cheapest taken without a caution margin: at 2^16 nodes that is what the race
        # picks, (Â X) W for the 100 -> 256 layer and Â (X W) for 256 -> 47.
        optimize(reference, graph, training=True, caution=0.0)
        return reference, graph, lambda model, g, x: model(g, x)
    if side == "DGL":
        from _end_to_end_dgl import DglGCN, gcn_graph

        graph = gcn_graph(models["dgl"], src, dst, data.num_nodes)
        return DglGCN(reference), graph, lambda model, g, x: model(g, x)
    theirs = models["PygGCN"](data.x.shape[1], hidden, reference.conv2.lin.weight.shape[0])
    theirs.load_state_dict(reference.state_dict())
    del dst
    rowptr = torch.from_numpy(data.rowptr.astype(np.int64))
    adj_t = torch.sparse_csr_tensor(rowptr, src, torch.ones(src.numel()),
                                    (data.num_nodes, data.num_nodes))
    return theirs, adj_t, lambda model, g, x: model(g, x)


def run_gcn_side(side: str, nodes: int, repeats: int, models: dict[str, Any],
                 hidden: int = HIDDEN) -> dict[str, Any]:
    """One side's measurements (in this process); models: OurGCN, PygGCN, and "dgl"."""
    from gnnforge.data import load_synthetic_products

    baseline = peak_rss_mib()
    # Memory-mapped, not read into memory: every side builds its own copy of the structure,
    # and the whole-graph step peaks near this machine's memory, so the data's pages must
    # stay reclaimable. With the arrays in memory PyG's side was killed for memory
    # (2026-12-05 06:06, 24 GiB host); mapped it peaked at 23.2 GiB. The first, untimed
    # step and the structures' build read every page before any timing.
    data = load_synthetic_products(nodes, progress=False, prefetch=False)
    classes = int(data.meta["spec"]["num_classes"])
    torch.manual_seed(0)
    reference = models["OurGCN"](data.x.shape[1], hidden, classes)
    model, graph, forward = _side_inputs(side, data, reference, models, hidden)
    x, y = torch.as_tensor(data.x), torch.as_tensor(data.y)
    train, test = torch.as_tensor(data.train), torch.as_tensor(data.test)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

    def step() -> None:
        model.train()
        optimizer.zero_grad()
        F.cross_entropy(forward(model, graph, x)[train], y[train]).backward()
        optimizer.step()

    logits: list[torch.Tensor] = []

    def infer() -> None:
        model.eval()
        with torch.no_grad():
            logits[:] = [forward(model, graph, x)]

    torch.manual_seed(1)
    step()                           # the first step: prepares the graph (loops, degrees)
    infer()                          # the same model on every side: accuracy after one step
    accuracy = float((logits[0][test].argmax(1) == y[test]).float().mean())
    step_seconds, step_warmup = _median_seconds(step, repeats, model, True)
    infer_seconds, infer_warmup = _median_seconds(infer, repeats, model, False)
    data_bytes = data.rowptr.nbytes + data.col.nbytes + data.x.nbytes
    return {"side": side, "step_s": step_seconds, "infer_s": infer_seconds,
            "peak_rss_mib": peak_rss_mib(), "baseline_rss_mib": baseline,
            "data_mib": data_bytes / 2**20, "accuracy": accuracy,
            "warmup": (step_warmup, infer_warmup),
            "nodes": data.num_nodes, "edges": data.num_edges}


def gcn_header(data, args) -> str:
    return (f"synthetic-products: {data.num_nodes:,} nodes, {data.num_edges:,} directed "
            f"edges; full-graph GCN 2x{HIDDEN}, median of {args.products_steps} after one "
            "(a step: forward, backward, Adam), "
            "each side in its own process\n"
            "| side | training step (s) | inference (s) | peak RSS (MiB) | peak RSS / data "
            "| RSS after imports (MiB) | test acc after 1 step | note |\n"
            "| --- | --- | --- | --- | --- | --- | --- | --- |")


def gcn_row(result: dict[str, Any], note: str) -> str:
    return (f"| {result['side']} | {result['step_s']:.2f} | {result['infer_s']:.2f} | "
            f"{result['peak_rss_mib']:,.0f} | {result['peak_rss_mib'] / result['data_mib']:.1f}x"
            f" | {result['baseline_rss_mib']:,.0f} | {result['accuracy']:.3f} | "
            f"{'; '.join(filter(None, [note, _warmup_note(result['warmup'])]))} |")


def _warmup_note(warmup: list[int]) -> str:
    if list(warmup) == [1, 1]:
        return ""
    return (f"untimed calls while its plans raced: {warmup[0]} steps, {warmup[1]} "
            "inferences")
