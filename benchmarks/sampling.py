"""Sampling and cooperative minibatching benchmarks (tables for BENCHMARKS.md).

    python benchmarks/sampling.py throughput   # seeds/s, NS and LABOR-0 vs peers
    python benchmarks/sampling.py targets      # LABOR-0 vs NS vertex counts (the 20% target)
    python benchmarks/sampling.py saturation   # that saving vs batch size and graph size
    python benchmarks/sampling.py cache        # feature-cache miss rate vs kappa, accuracy
    python benchmarks/sampling.py cooperative  # P=2 cooperative vs independent

Run from the repository root with the checkout on PYTHONPATH. Timings are medians of
>= 5 repeats after a warm-up; every speed is also given as a ratio to a peer in the same run.
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
import torch.nn.functional as F
from tqdm import tqdm

from gnnforge.data import CleanOptions, clean_graph, rmat
from gnnforge.distributed import CooperativeSampler, partition_nodes, spawn
from gnnforge.sampling import (
    BlockSAGE,
    DependentKeys,
    FeatureStore,
    LaborSampler,
    NeighborSampler,
    NodeSeeds,
)
from gnnforge.sampling._datasets import REAL_GRAPHS, load
from gnnforge.sampling._expected import expected_layer_sizes
from gnnforge.sampling._measure import measure

# ----------------------------------------------------------------------------- peers


def torch_vectorised_ns(rowptr, col, seeds, fanouts, generator):
    """Peer: NS written with whole-tensor torch ops (random key per edge, sort, keep k).

    The approach of GPU samplers (and of a careful user without a compiled sampler); it
    stands in for DGL and PyG, whose sampling backends cannot be imported here.
    """
    frontier = seeds
    sizes = []
    for fanout in reversed(fanouts):
        start, degree = rowptr[frontier], rowptr[frontier + 1] - rowptr[frontier]
        owner = torch.repeat_interleave(torch.arange(frontier.numel()), degree)
        offset = torch.arange(owner.numel()) - torch.repeat_interleave(
            torch.cumsum(degree, 0) - degree, degree)
        keys = torch.rand(owner.numel(), generator=generator) + owner.double()
        order = torch.argsort(keys)  # per seed, a uniformly random permutation of its edges
        rank = torch.arange(owner.numel()) - torch.repeat_interleave(
            torch.cumsum(degree, 0) - degree, degree)
        picked = order[rank < fanout]
        src = col[start[owner[picked]] + offset[picked]]
        nodes, inverse = torch.unique(torch.cat([frontier, src]), return_inverse=True)
        # dst first, like our blocks: put the frontier ahead of the new sources
        is_new = torch.ones(nodes.numel(), dtype=torch.bool)
        is_new[inverse[: frontier.numel()]] = False
        frontier = torch.cat([frontier, nodes[is_new]])
        sizes.append(frontier.numel())
    return sizes[::-1]


def _pyg_skip_reason() -> str | None:
    try:
        import torch_geometric.typing as pyg_typing
    except ImportError as error:
        return f"torch_geometric not importable ({error})"
    if not (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE):
        why = []
        for package in ("pyg_lib", "torch_sparse"):
            try:
                __import__(package)
            except Exception as error:  # a source build can fail at import in several ways
                why.append(f"{package}: {type(error).__name__}: {error}")
        return ("PyG's NeighborLoader needs pyg-lib or torch-sparse, and neither imports "
                f"({'; '.join(why) or 'PyG did not detect them'})")
    return None


def _dgl_skip_reason() -> str | None:
    try:
        import dgl  # noqa: F401
    except Exception as error:  # DGL fails in several ways against torch 2.13
        return f"dgl not importable with torch {torch.__version__} ({type(error).__name__}: {error})"
    return None


def _torch_sparse_op():
    """torch.ops.torch_sparse.neighbor_sample (PyG's CPU sampling backend), or a reason.

    Loaded from the compiled library alone when the `torch_sparse` package itself does not
    import (it needs torch-scatter), so the backend can be timed without PyG's loader.
    """
    import importlib.util
    import os

    spec = importlib.util.find_spec("torch_sparse")
    if spec is None or spec.origin is None:
        return None, "torch-sparse is not installed"
    folder = os.path.dirname(spec.origin)
    try:
        for library in ("_version_cpu.so", "_neighbor_sample_cpu.so"):
            torch.ops.load_library(os.path.join(folder, library))
        return torch.ops.torch_sparse.neighbor_sample, None
    except (OSError, RuntimeError) as error:
        return None, f"torch-sparse's compiled sampler does not load ({error})"


def pyg_peers(graph, fanouts: list[int], batch: int) -> tuple[dict, list[str]]:
    """PyG's samplers on `graph` (in-edges, like ours): (name -> fn(seeds) -> #nodes, notes).

    NeighborLoader(...)(seeds) is one loader step (sampling, relabelling and building the
    `Data`; there are no features to slice). The raw op is the backend call alone. PyG's
    num_neighbors go from the seeds outwards, ours input layer first: reversed.
    """
    hops, peers, notes = fanouts[::-1], {}, []
    reason = _pyg_skip_reason()
    if reason is None:
        import torch_geometric.typing as pyg_typing
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader

        data = Data(edge_index=torch.stack([graph.src, graph.dst]), num_nodes=graph.num_nodes)
        with warnings.catch_warnings():  # "without pyg-lib is deprecated": noted below
            warnings.simplefilter("ignore", UserWarning)
            loader = NeighborLoader(data, num_neighbors=hops, batch_size=batch)
        if not pyg_typing.WITH_PYG_LIB:
            notes.append("PyG NeighborLoader runs on torch-sparse, PyG's older backend (PyG "
                         "warns it is deprecated); pyg-lib, the current one, has no build "
                         "here. PyG expands only the vertices new in each hop, so it samples "
                         "fewer vertices than layer-wise blocks (ours, DGL's)")
        backend = "pyg-lib" if pyg_typing.WITH_PYG_LIB else "torch-sparse"
        peers[f"PyG NeighborLoader ({backend})"] = lambda seeds: loader(seeds).num_nodes
    else:
        notes.append(f"PyG NeighborLoader: skipped: {reason}")
    op, op_reason = _torch_sparse_op()
    if op is None:
        notes.append(f"torch_sparse.neighbor_sample: skipped: {op_reason}")
    else:
        colptr, row, _ = graph.csr(torch.int64)  # CSR by destination = PyG's CSC

        def raw(seeds):
            return op(colptr, row, seeds, hops, False, True)[0].numel()
        peers["PyG backend: torch_sparse.neighbor_sample (raw op)"] = raw
    return peers, notes


def _round_robin(fns: dict, batches: list, per_timing: dict, repeats: int) -> dict:
    """Median seconds per batch of each fn, timed in turns (fn(seeds) -> sizes)."""
    sizes = {name: [] for name in fns}
    times = {name: [] for name in fns}
    cursor = {name: 0 for name in fns}
    for rep in range(repeats + 1):  # round 0 warms up
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(per_timing[name]):
                sizes[name].append(fn(batches[cursor[name] % len(batches)]))
                cursor[name] += 1
            if rep:
                times[name].append((time.perf_counter() - start) / per_timing[name])
    return {name: (statistics.median(times[name]), sizes[name]) for name in fns}


def throughput(args) -> None:
    data = load(args.graph)
    graph = data.graph
    rowptr, col, _ = graph.csr(torch.int64)
    fanouts, batch = [10, 10, 10], args.batch_size
    generator = torch.Generator().manual_seed(0)
    batches = [torch.randperm(graph.num_nodes, generator=generator)[:batch] for _ in range(64)]
    torch.set_num_threads(1)
    fns = {"torch-vectorised NS (peer)": lambda seeds: torch_vectorised_ns(
        rowptr, col, seeds, fanouts, generator)}
    per_timing = {"torch-vectorised NS (peer)": 1}
    peers, notes = pyg_peers(graph, fanouts, batch)
    for name, fn in peers.items():
        fns[name] = fn
        per_timing[name] = args.per_timing
    for name, sampler in (("gnnforge NS", NeighborSampler(fanouts)),
                          ("gnnforge LABOR-0", LaborSampler(fanouts))):
        fns[name] = lambda seeds, s=sampler: [b.num_src_nodes
                                              for b in s.sample(graph, seeds, generator)]
        per_timing[name] = args.per_timing
    print(f"graph {args.graph}: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges "
          f"(undirected); fanouts {fanouts}, batch {batch}, 1 thread; median of {args.repeats} "
          f"timings after a warm-up round, each over {args.per_timing} batches "
          "(1 for the slow torch-vectorised peer), samplers timed in turns")
    results = _round_robin(fns, batches, per_timing, args.repeats)
    pyg_name = next((n for n in fns if n.startswith("PyG")), None)
    pyg_label = pyg_name and ("PyG NeighborLoader" if "NeighborLoader" in pyg_name
                              else "torch_sparse op")
    ref_time = results["torch-vectorised NS (peer)"][0]
    print("\n| sampler | seeds/s | vs torch-vectorised | "
          + (f"vs {pyg_label} | " if pyg_name else "")
          + "sampled vertices per layer (input first) |")
    print("|---|---:|---:|" + ("---:|" if pyg_name else "") + "---|")
    for name, (seconds, sizes) in results.items():
        mean = np.mean(sizes, axis=0)
        layers = (" / ".join(f"{x:,.0f}" for x in mean) if np.ndim(mean)
                  else f"{float(mean):,.0f} (all hops together)")
        ratio_pyg = f" {results[pyg_name][0] / seconds:.2f}x |" if pyg_name else ""
        print(f"| {name} | {batch / seconds:,.0f} | {ref_time / seconds:.2f}x |{ratio_pyg} "
              f"{layers} |")
    for note in notes:
        print(f"\n{note}")
    reason = _dgl_skip_reason()
    print(f"\nDGL NeighborSampler: skipped: {reason}" if reason else
          "\nDGL NeighborSampler: importable, not measured by this script")


# ----------------------------------------------------------------------------- targets


def targets(args) -> None:
    print(f"fanouts [10, 10, 10], batch {args.batch_size}, mean of {args.batches} batches of "
          "uniformly drawn distinct seeds; vertices = sources of all 3 blocks (each block's "
          "sources include its destinations, for both samplers)\n")
    print("| graph | nodes | mean degree | edges into degree > 10 | NS vertices | LABOR-0 | "
          "LABOR-* | LABOR-0 vs NS | NS input layer / nodes | LABOR-0 input layer / nodes | "
          "target (>= 20% fewer) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for name in tqdm(args.graphs, desc="graphs", leave=False):
        graph = load(name).graph
        samplers = ("ns", "labor0") + (("labor*",) if not args.no_labor_star else ())
        points = {s: measure(graph, name, s, [10, 10, 10], args.batch_size, args.batches)
                  for s in samplers}
        ns, l0 = sum(points["ns"].vertices), sum(points["labor0"].vertices)
        ls = f"{sum(points['labor*'].vertices):,.0f}" if "labor*" in points else "-"
        drop = 1 - l0 / ns
        n = graph.num_nodes
        print(f"| {name} | {n:,} | {graph.num_edges / n:.1f} | {_sampled_edge_share(graph, 10):.0%} "
              f"| {ns:,.0f} | {l0:,.0f} | {ls} | "
              f"{-100 * drop:+.1f}% | {points['ns'].vertices[0] / n:.0%} | "
              f"{points['labor0'].vertices[0] / n:.0%} | {'met' if drop >= 0.2 else 'MISSED'} |")


def _sampled_edge_share(graph, fanout: int) -> float:
    """Share of edges whose destination has in-degree > fanout: the only edges where NS and
    LABOR-0 can differ (both keep every in-edge of a destination with d <= fanout)."""
    rowptr, _, _ = graph.csr(torch.int64)
    degree = (rowptr[1:] - rowptr[:-1]).double()
    return float(degree[degree > fanout].sum() / max(graph.num_edges, 1))


def _saturation_row(graph, name, batch, batches):
    ns = measure(graph, name, "ns", [10, 10, 10], batch, batches)
    l0 = measure(graph, name, "labor0", [10, 10, 10], batch, batches)
    seeds = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(0))[:batch]
    exact = expected_layer_sizes(graph, seeds.numpy(), 10)
    one_hop = 1 - exact["labor0"][0] / exact["ns"][0]
    n = graph.num_nodes
    return (f"| {name} | {n:,} | {batch} | {sum(ns.vertices):,.0f} | {sum(l0.vertices):,.0f} | "
            f"{-100 * (1 - sum(l0.vertices) / sum(ns.vertices)):+.1f}% | {-100 * one_hop:+.1f}% | "
            f"{ns.vertices[0] / n:.0%} |")


def saturation(args) -> None:
    """LABOR-0's saving vs batch size and vs graph size: it shrinks as NS covers the graph."""
    print(f"fanouts [10, 10, 10], mean of {args.batches} batches per row; 'seed layer, exact' "
          "is the closed-form expected saving of the last layer alone (the seeds' own "
          "in-neighbours), from `gnnforge.sampling._expected`\n")
    header = ("| graph | nodes | batch | NS vertices (3 layers) | LABOR-0 | LABOR-0 vs NS | "
              "seed layer, exact | NS input layer / nodes |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    print("Same graph, growing batch:\n\n" + header)
    for name in args.graphs:
        graph = load(name).graph
        for batch in args.batch_sizes:
            print(_saturation_row(graph, name, batch, args.batches))
    print("\nR-MAT (a=0.57, b=0.19, c=0.19; 16 directed edges per node before symmetrising, "
          "generator seed 0), batch 1024, growing graph:\n\n" + header)
    for scale in args.rmat_scales:
        graph, _ = clean_graph(rmat(scale, 16 * 2**scale, seed=0),
                               CleanOptions(symmetrize=True, dedup=True, self_loops="remove"))
        print(_saturation_row(graph, f"rmat-2^{scale}", 1024, args.batches))


# ----------------------------------------------------------------------------- cache


def _split(num_nodes: int, seed: int = 0):
    order = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(seed))
    a, b = int(0.6 * num_nodes), int(0.8 * num_nodes)
    return order[:a], order[a:b], order[b:]


def _evaluate(model, graph, features, labels, nodes, sampler):
    model.eval()
    correct = 0
    with torch.no_grad():
        for seeds in NodeSeeds(nodes, 2048, shuffle=False):
            blocks = sampler.sample(graph, seeds, torch.Generator().manual_seed(1))
            out = model(blocks, features[blocks[0].src_nodes])
            correct += int((out.argmax(1) == labels[seeds]).sum())
    model.train()
    return correct / nodes.numel()


def cache(args) -> None:
    torch.set_num_threads(2)
    data = load(args.graph)
    graph, features, labels = data.graph, data.features, data.labels
    measure_only = args.no_train or labels is None or features is None
    if features is None:
        features = torch.zeros(graph.num_nodes, 128)  # only the row count and size matter
    nodes, _, test = _split(graph.num_nodes)
    capacity = int(args.cache_fraction * graph.num_nodes)
    print(f"{args.graph}: {graph.num_nodes:,} nodes, features {tuple(features.shape)}, "
          f"{args.sampler} fanouts {args.fanouts}, batch {args.batch_size}, "
          f"{args.epochs} epochs over {nodes.numel():,} training seeds, LRU cache of "
          f"{capacity:,} rows ({args.cache_fraction:.0%})"
          + ("; sampling and fetching only (no training)" if measure_only else "") + "\n")
    print("| kappa | cache miss rate | bytes copied | test accuracy |")
    print("|---:|---:|---:|---:|")
    for kappa in args.kappas:
        sampler = (LaborSampler(args.fanouts) if args.sampler == "labor0"
                   else NeighborSampler(args.fanouts))
        torch.manual_seed(0)
        model = None if measure_only else BlockSAGE([features.shape[1], 64, int(labels.max()) + 1])
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01) if model else None
        store = FeatureStore(features, capacity)
        keys = DependentKeys(kappa, seed=7)
        seeds_iter = NodeSeeds(nodes, args.batch_size, seed=0)
        step = 0
        for epoch in tqdm(range(args.epochs), desc=f"kappa={kappa}", leave=False):
            seeds_iter.set_epoch(epoch)
            for seeds in seeds_iter:
                blocks = sampler.sample(graph, seeds, key=keys[step])
                step += 1
                x = store.fetch(blocks[0].src_nodes)
                if model is None:
                    continue
                loss = F.cross_entropy(model(blocks, x), labels[seeds])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        accuracy = ("n/a" if model is None else
                    f"{_evaluate(model, graph, features, labels, test, NeighborSampler(args.fanouts)):.3f}")
        print(f"| {kappa} | {store.miss_rate:.1%} | {store.bytes_copied / 2**20:,.0f} MiB | "
              f"{accuracy} |")


# ----------------------------------------------------------------------------- cooperative


def _coop_worker(rank, world, graph_name, sampler_name, global_batch, num_batches, width,
                 cache_fraction):
    torch.set_num_threads(1)
    graph = load(graph_name).graph
    owner = partition_nodes(graph, world, "random", seed=0)
    sampler = LaborSampler([10, 10, 10]) if sampler_name == "labor0" else NeighborSampler([10, 10, 10])
    features = torch.randn(graph.num_nodes, width, generator=torch.Generator().manual_seed(0))
    labels = torch.randint(0, 8, (graph.num_nodes,), generator=torch.Generator().manual_seed(1))
    owned = torch.nonzero(owner == rank).flatten()
    torch.manual_seed(0)
    model = BlockSAGE([width, width, width, 8])
    keys = DependentKeys(1, seed=3)
    coop = CooperativeSampler(sampler, owner)
    out = {"coop": [], "indep": []}
    capacity = int(cache_fraction * graph.num_nodes)  # per process
    stores = {mode: FeatureStore(features, capacity) for mode in out}
    generator = torch.Generator().manual_seed(100 + rank)
    for step in range(num_batches + 1):  # the first batch warms up
        seeds = owned[torch.randperm(owned.numel(), generator=generator)[:global_batch // world]]
        for mode in ("coop", "indep"):
            torch.distributed.barrier()
            start = time.perf_counter()
            if mode == "coop":
                batch = coop.sample(graph, seeds, keys[step])
                blocks, x = batch.blocks, stores[mode].fetch(batch.input_nodes)
                logits = model(blocks, x, exchange=batch.exchanges())
                sent, received = batch.remote_rows()
            else:
                blocks = sampler.sample(graph, seeds, key=keys[step])
                x = stores[mode].fetch(blocks[0].src_nodes)
                logits = model(blocks, x)
                sent = received = 0
            loss = F.cross_entropy(logits, labels[seeds])
            model.zero_grad()
            loss.backward()
            for p in model.parameters():
                torch.distributed.all_reduce(p.grad)
            elapsed = time.perf_counter() - start
            if step:
                out[mode].append(dict(
                    seconds=elapsed, input_rows=x.shape[0],
                    vertices=sum(b.num_dst_nodes for b in blocks) + x.shape[0],
                    edges=sum(b.num_edges for b in blocks),
                    bytes=(sent + received) * width * 4))
    for mode in out:
        out[mode][-1]["miss_rate"] = stores[mode].miss_rate
    return out


def cooperative(args) -> None:
    print(f"P=2 gloo processes on this machine (1 thread each), fanouts [10, 10, 10], global "
          f"batch {args.global_batch}, random 1D partition, {args.batches} batches after a "
          f"warm-up, independent keys (DependentKeys(1)), GraphSAGE widths {args.width}; "
          f"per-process means; each process has an LRU feature cache of "
          f"{args.cache_fraction:.0%} of the nodes\n")
    print("| graph | sampler | mode | vertices | edges | input rows fetched | "
          "bytes exchanged (fwd, per process) | cache miss rate | batch time (median) | "
          "epoch time (N / global batch x median) |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    predictions = []
    for graph_name in args.graphs:
        num_nodes = load(graph_name).graph.num_nodes
        for sampler_name in args.samplers:
            results = spawn(_coop_worker, 2, args=(graph_name, sampler_name, args.global_batch,
                                                   args.batches, args.width,
                                                   args.cache_fraction),
                            timeout_s=580, collective_timeout_s=120)
            for r in results:
                if r.error:
                    sys.exit(r.error)
            summary = {}
            for mode in ("indep", "coop"):
                records = [rec for r in results for rec in r.value[mode]]
                mean = {k: float(np.mean([rec[k] for rec in records]))
                        for k in ("vertices", "edges", "input_rows", "bytes")}
                mean["seconds"] = statistics.median(rec["seconds"] for rec in records)
                mean["miss_rate"] = float(np.mean([r.value[mode][-1]["miss_rate"]
                                                   for r in results]))
                summary[mode] = mean
                print(f"| {graph_name} | {sampler_name} | {mode} | {mean['vertices']:,.0f} | "
                      f"{mean['edges']:,.0f} | {mean['input_rows']:,.0f} | "
                      f"{mean['bytes'] / 2**20:,.2f} MiB | {mean['miss_rate']:.1%} | "
                      f"{1000 * mean['seconds']:.0f} ms | "
                      f"{math.ceil(num_nodes / args.global_batch) * mean['seconds']:.1f} s |")
            graph = load(graph_name).graph
            big = measure(graph, graph_name, sampler_name, [10, 10, 10], args.global_batch, 4)
            small = measure(graph, graph_name, sampler_name, [10, 10, 10],
                            args.global_batch // 2, 4)
            # vertices a process handles: destinations of every layer + the input rows
            per_proc = lambda p, b: sum(p.vertices) + b
            predicted = (per_proc(big, args.global_batch) / 2) / per_proc(small, args.global_batch // 2)
            measured = summary["coop"]["vertices"] / summary["indep"]["vertices"]
            predictions.append((graph_name, sampler_name, predicted, measured,
                                summary["coop"]["edges"] / summary["indep"]["edges"],
                                summary["indep"]["seconds"] / summary["coop"]["seconds"]))
    print("\n| graph | sampler | coop/indep vertices: predicted by the curve V(B)/(2 V(B/2)) | "
          "measured | coop/indep edges | time indep/coop |")
    print("|---|---|---:|---:|---:|---:|")
    for g, s, predicted, measured, edges, speed in predictions:
        print(f"| {g} | {s} | {predicted:.3f} | {measured:.3f} | {edges:.3f} | {speed:.2f}x |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("throughput")
    p.add_argument("--graph", default="rmat_s17_e21")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--per-timing", type=int, default=8, help="batches per timing")
    p = sub.add_parser("targets")
    p.add_argument("--graphs", nargs="+", default=[*REAL_GRAPHS, "rmat_s17_e21"])
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--batches", type=int, default=5)
    p.add_argument("--no-labor-star", action="store_true")
    p = sub.add_parser("saturation")
    p.add_argument("--graphs", nargs="+", default=["facebook", "github", "slashdot", "rmat_s17_e21"])
    p.add_argument("--batch-sizes", nargs="+", type=int, default=[64, 256, 1024, 4096])
    p.add_argument("--rmat-scales", nargs="+", type=int, default=[12, 13, 14, 15, 16, 17])
    p.add_argument("--batches", type=int, default=3)
    p = sub.add_parser("cache")
    p.add_argument("--graph", default="facebook")
    p.add_argument("--no-train", action="store_true", help="measure the cache only")
    p.add_argument("--kappas", nargs="+", type=float, default=[1, 16, 256, math.inf])
    p.add_argument("--sampler", choices=["labor0", "ns"], default="labor0")
    p.add_argument("--fanouts", nargs="+", type=int, default=[10, 10])
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--cache-fraction", type=float, default=0.2)
    p = sub.add_parser("cooperative")
    p.add_argument("--graphs", nargs="+", default=["github", "rmat_s17_e21"])
    p.add_argument("--samplers", nargs="+", default=["ns", "labor0"])
    p.add_argument("--global-batch", type=int, default=2048)
    p.add_argument("--batches", type=int, default=5)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--cache-fraction", type=float, default=0.1, help="per-process cache")
    args = parser.parse_args(argv)
    if getattr(args, "kappas", None):
        args.kappas = [int(k) if math.isfinite(k) else math.inf for k in args.kappas]
    {"throughput": throughput, "targets": targets, "saturation": saturation, "cache": cache,
     "cooperative": cooperative}[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
