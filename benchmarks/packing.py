"""Tuple packing benchmarks: packing speed, and GIN training with three batching schemes.

    PYTHONPATH=. python benchmarks/packing.py speed
    PYTHONPATH=. python benchmarks/packing.py improve
    PYTHONPATH=. python benchmarks/packing.py train --steps 300
    PYTHONPATH=. python -m gnnforge pack --report

`speed` times the packing of 100,000 distinct random (nodes, edges) bins and of the 1.58M
MOSES molecules (histogram + pack), median of 5 after a warm-up, with the plain
one-graph-per-pack baseline measured in the same run as the peer.

`train` trains the same GIN graph-property model (OGB atom/bond encoders, sum readout,
masked multi-task BCE) on Tox21 for a fixed number of steps with
  (a) dynamic batching: 128 graphs per batch, shapes change every step (PyG style);
  (b) pad to maximum: 128 graphs per batch, every graph padded to the dataset maximum;
  (c) packed: PackedLoader, limits set so a pack holds 128 graphs on average;
and prints graphs/s, the padding fraction (padding nodes and edges over all rows) and the
validation loss curves side by side. All three see the same seed and learning rate.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings

import numpy as np
import torch

from gnnforge.data import ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS, load_molecules, molecule_sizes
from gnnforge.graph import Graph, GraphBatch
from gnnforge.nn import sum_pool
from gnnforge.packing import PackedLoader, pack, size_histogram

# ----------------------------------------------------------------------------- speed


def _timed(function, repeats: int = 5) -> tuple[float, object]:
    result = function()  # warm-up (numba compile, caches)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def speed(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(0)
    nodes = rng.integers(1, 400, 400_000)
    noise = rng.integers(0, 400, nodes.size)
    edges = np.minimum(rng.integers(0, 5, nodes.size) * nodes // 2 + noise, 2000)
    full = size_histogram(np.stack([nodes, edges], axis=1))
    histogram = dict(list(full.items())[:100_000])
    print("| input | bins | graphs | method | median time (s) | packs | gap (ceil) | "
          "proven bound | gap (proven) |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    cases = [("random", histogram, (400, 2000))]
    try:
        if args.random_only:
            raise FileNotFoundError("--random-only")
        sizes, _ = molecule_sizes("moses")
        largest = tuple(int(v) for v in sizes.max(axis=0))
        cases.append(("MOSES train", sizes, largest))
        cases.append(("MOSES train, 8x max limits", sizes, tuple(8 * v for v in largest)))
    except (ImportError, FileNotFoundError) as error:
        print(f"skipped MOSES: {error}")
    for name, data, limits in cases:
        rows = [("lpfhp", ""), ("spfhp", ""), ("none", "")]
        if name != "random":  # the improvement step re-packs up to 12 times; molecules only
            rows[2:2] = [("lpfhp", "improve"), ("lpfhp", "refine")]
        for method, step in rows:
            def run(data=data, limits=limits, method=method, step=step):
                # The molecule case includes building the histogram from 1.58M rows.
                histogram = data if isinstance(data, dict) else size_histogram(data)
                return pack(histogram, limits, "product", method, 256, improve=step != "",
                            refine=args.refine if step == "refine" else 0.0)

            seconds, plan = _timed(run, args.repeats)
            bins = len(data) if isinstance(data, dict) else len(size_histogram(data))
            label = f"{method}+{step}" if step else method
            print(f"| {name} {limits} | {bins:,} | {plan.num_graphs:,} | {label} | {seconds:.3f} | "
                  f"{plan.num_packs:,} | {100 * plan.gap:.2f}% | {plan.proven_bound:,} | "
                  f"{100 * plan.best_gap:.2f}% |")


def improve(args: argparse.Namespace) -> None:
    """The improvement step's cost on issue 16's histogram: plain, default budget, every
    attempt, in one run (same-run ratios; the machine may be shared)."""
    rng = np.random.default_rng(0)
    # 125,000 graphs, nodes in [1, 400), edges in [1, 1000): 107,304 distinct bins.
    sizes = np.stack([rng.integers(1, 400, 125_000), rng.integers(1, 1000, 125_000)], axis=1)
    histogram, limits = size_histogram(sizes), (2000, 5000)
    pack(histogram, limits, improve=False)  # warm-up (numba compile, caches)
    print(f"{len(histogram):,} bins, {len(sizes):,} graphs, limits {limits}")
    print("| improve | median time (s) | x plain | packs | gap (ceil) | efficiency (nodes, "
          "edges) | improved from |")
    print("|---|---:|---:|---:|---:|---|---:|")
    plain_seconds = None
    for label, value, repeats in (("False (plain)", False, args.repeats),
                                  ("True (default budget)", True, args.repeats),
                                  ("inf (every attempt)", float("inf"), 1)):
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            plan = pack(histogram, limits, improve=value)
            times.append(time.perf_counter() - start)
        seconds = statistics.median(times)
        plain_seconds = plain_seconds or seconds
        print(f"| {label} | {seconds:.1f} | {seconds / plain_seconds:.2f} | "
              f"{plan.num_packs:,} | {100 * plan.gap:.2f}% | "
              f"{plan.efficiency[0]:.2%}, {plan.efficiency[1]:.2%} | "
              f"{plan.improved_from or '-'} |")


# ----------------------------------------------------------------------------- model


class GIN(torch.nn.Module):
    """GIN-E style graph regressor/classifier with OGB atom and bond encoders."""

    def __init__(self, width: int, layers: int, tasks: int) -> None:
        super().__init__()
        self.atom = torch.nn.ModuleList(torch.nn.Embedding(d, width) for d in ATOM_FEATURE_DIMS)
        self.bond = torch.nn.ModuleList(
            torch.nn.ModuleList(torch.nn.Embedding(d, width) for d in BOND_FEATURE_DIMS)
            for _ in range(layers))
        self.mlps = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.ReLU(),
                                torch.nn.Linear(2 * width, width)) for _ in range(layers))
        self.head = torch.nn.Linear(width, tasks)

    def forward(self, x, edge_attr, src, dst, node_graph, node_mask, graph_mask, num_graphs: int):
        h = sum(embed(x[:, i]) for i, embed in enumerate(self.atom))  # [N, W]
        for bond, mlp in zip(self.bond, self.mlps):
            e = sum(embed(edge_attr[:, i]) for i, embed in enumerate(bond))  # [E, W]
            # TODO(ops): gnnforge.ops g-SpMM once the kernels branch is merged.
            message = torch.relu(h[src] + e)
            aggregated = torch.zeros_like(h).index_add_(0, dst, message)
            h = torch.relu(mlp(h + aggregated))
        return self.head(sum_pool(h, node_graph, num_graphs, node_mask, graph_mask))  # [B, T]


def _forward(model, batch: GraphBatch) -> torch.Tensor:
    return model(batch.node_data["x"], batch.edge_data["edge_attr"], batch.src, batch.dst,
                 batch.node_graph, batch.node_mask, batch.graph_mask, batch.num_graphs)


def _loss(logits: torch.Tensor, batch: GraphBatch) -> tuple[torch.Tensor, torch.Tensor]:
    mask = batch.graph_data["y_mask"] & batch.graph_mask[:, None]
    losses = torch.nn.functional.binary_cross_entropy_with_logits(
        logits, batch.graph_data["y"], reduction="none")
    return (losses * mask).sum(), mask.sum()


# ----------------------------------------------------------------------------- batchers


def dynamic_batches(graphs, batch_size, rng):
    while True:
        order = rng.permutation(len(graphs))
        for start in range(0, len(order) - batch_size + 1, batch_size):
            yield GraphBatch.from_graphs([graphs[i] for i in order[start:start + batch_size]])


def _padding_graph(template: Graph, nodes: int, edges: int) -> Graph:
    loops = torch.zeros(edges, dtype=torch.int64)
    def zeros(data, n):
        return {k: v.new_zeros((n, *v.shape[1:])) for k, v in data.items()}

    return Graph._trusted(loops, loops, nodes, None, zeros(template.node_data, nodes),
                          zeros(template.edge_data, edges),
                          {k: torch.zeros_like(v) for k, v in template.graph_data.items()})


def padded_batches(graphs, batch_size, rng, max_nodes, max_edges):
    """Every graph followed by a masked graph that pads it to (max_nodes, max_edges)."""
    while True:
        order = rng.permutation(len(graphs))
        for start in range(0, len(order) - batch_size + 1, batch_size):
            members = []
            for i in order[start:start + batch_size]:
                graph = graphs[i]
                members += [graph, _padding_graph(graph, max_nodes - graph.num_nodes + 1,
                                                  max_edges - graph.num_edges)]
            batch = GraphBatch.from_graphs(members)
            mask = torch.arange(2 * batch_size) % 2 == 0
            yield GraphBatch._make(batch, batch.graph_ptr, batch.edge_ptr, mask)


def packed_batches(loader):
    while True:
        yield from loader


# ----------------------------------------------------------------------------- training


def _evaluate(model, val_batches) -> float:
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in val_batches:
            loss, n = _loss(_forward(model, batch), batch)
            total, count = total + float(loss), count + int(n)
    return total / max(count, 1)


def _train(name, batches, args, val_batches):
    torch.manual_seed(args.seed)
    model = GIN(args.width, args.layers, args.tasks)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    curve, graphs_seen, elapsed = [], 0, 0.0
    rows = padding_rows = 0
    for step in range(args.steps + 1):
        if step % args.eval_every == 0:
            curve.append(_evaluate(model, val_batches))
        if step == args.steps:
            break
        start = time.perf_counter()
        batch = next(batches)
        loss, n = _loss(_forward(model, batch), batch)
        optimizer.zero_grad()
        (loss / n.clamp(min=1)).backward()
        optimizer.step()
        if step >= args.warmup:
            elapsed += time.perf_counter() - start
            graphs_seen += batch.num_real_graphs
            real = int(batch.node_mask.sum()) + int(batch.edge_mask.sum())
            rows += batch.num_nodes + batch.num_edges
            padding_rows += batch.num_nodes + batch.num_edges - real
    return {"name": name, "graphs_per_s": graphs_seen / elapsed, "curve": curve,
            "padding": padding_rows / rows, "seconds": elapsed}


def train(args: argparse.Namespace) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from gnnforge.data import molecule_files

        graphs, meta = load_molecules(molecule_files()[args.dataset], progress=False)
    print(f"{args.dataset}: {len(graphs)} molecules ({meta['num_invalid']} invalid SMILES "
          f"left out), {len(meta['label_names'])} tasks")
    args.tasks = len(meta["label_names"])
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(graphs))
    cut = len(graphs) // 10
    val = [graphs[i] for i in order[:cut]]
    train_graphs = [graphs[i] for i in order[cut:]]
    val_batches = [GraphBatch.from_graphs(val[i:i + 256]) for i in range(0, len(val), 256)]
    sizes = np.array([(g.num_nodes, g.num_edges) for g in train_graphs])
    max_nodes, max_edges = (int(v) for v in sizes.max(axis=0))
    mean = sizes.mean(axis=0)
    # Limits for packs of `batch_size` graphs on average (and at least the largest graph).
    limits = (max(max_nodes, math.ceil(args.batch_size * mean[0])),
              max(max_edges, math.ceil(args.batch_size * mean[1])))
    loader = PackedLoader(train_graphs, limits, max_graphs_per_pack=2 * args.batch_size,
                          seed=args.seed)
    print(f"packing: {loader.plan.summary()}")
    print(f"packed batch shape: {loader.num_nodes} nodes, {loader.num_edges} edges, "
          f"{loader.num_graphs} graph slots; {len(train_graphs) / len(loader):.1f} graphs per pack")
    schemes = [
        ("(a) dynamic, 128 graphs", dynamic_batches(train_graphs, args.batch_size,
                                                    np.random.default_rng(args.seed))),
        ("(b) pad to max, 128 graphs", padded_batches(train_graphs, args.batch_size,
                                                      np.random.default_rng(args.seed),
                                                      max_nodes, max_edges)),
        ("(c) packed", packed_batches(loader)),
    ]
    results = [_train(name, batches, args, val_batches) for name, batches in schemes]
    peer = results[1]["graphs_per_s"]
    print()
    print("| batching | graphs/s | vs pad-to-max | vs dynamic | padding (node+edge rows) | "
          "final val loss |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        rate = r["graphs_per_s"]
        print(f"| {r['name']} | {rate:.0f} | {rate / peer:.2f}x | "
              f"{rate / results[0]['graphs_per_s']:.2f}x | {100 * r['padding']:.1f}% | "
              f"{r['curve'][-1]:.4f} |")
    print()
    print("| step | " + " | ".join(r["name"] for r in results) + " |")
    print("|---:|" + "---:|" * len(results))
    for i in range(len(results[0]["curve"])):
        print(f"| {i * args.eval_every} | " + " | ".join(f"{r['curve'][i]:.4f}" for r in results)
              + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("speed")
    s.add_argument("--repeats", type=int, default=5)
    s.add_argument("--random-only", action="store_true",
                   help="time only the 100,000-bin random histogram")
    s.add_argument("--refine", type=float, default=10.0,
                   help="seconds of LP refinement for the +refine rows")
    i = sub.add_parser("improve", help="the improvement step on issue 16's 107,304 bins")
    i.add_argument("--repeats", type=int, default=3)
    t = sub.add_parser("train")
    t.add_argument("--dataset", default="tox21")
    t.add_argument("--steps", type=int, default=300)
    t.add_argument("--warmup", type=int, default=10)
    t.add_argument("--eval-every", type=int, default=50)
    t.add_argument("--batch-size", type=int, default=128)
    t.add_argument("--width", type=int, default=64)
    t.add_argument("--layers", type=int, default=3)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    if args.command == "speed":
        speed(args)
    elif args.command == "improve":
        improve(args)
    else:
        torch.set_num_threads(args.threads)
        train(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
