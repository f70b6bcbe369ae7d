"""Scale-out measurements: sampling memory vs graph size, and 4 ranks on partitioned data.

    python benchmarks/scale_out.py memory     # sampling peak memory, 2^18 .. 2^22 nodes
    python benchmarks/scale_out.py ranks      # 4 torchrun ranks on R-MAT 2^17, F=128
    python benchmarks/scale_out.py overlap    # the same, cooperative: what overlap buys

`memory`: two graph families, 2^18 .. 2^22 nodes with 8 edges per node. "rmat": an R-MAT
of each size, seeds uniform over it (its sampled minibatches grow with the graph: on a
bigger R-MAT the 3-hop neighbourhoods of 1024 seeds overlap less). "fixed": the 2^18
R-MAT and its seeds relabelled at random into each size's ids, beside uniform random
edges among the other vertices, so the minibatches stay the same while ids, rows and
edges grow 16x: what grows there is what sampling allocates in proportion to the graph.
One process builds and saves each CSR; a fresh process per sampler (NS, LABOR-0; batch
1024, fanouts [10, 10, 10]) loads it, samples one small warm-up batch, then 10 batches,
each after resetting the peak RSS (/proc/self/clear_refs). Per batch: the peak RSS
above the level before it (glibc told to mmap every array over 64 KiB, so freed memory
leaves RSS and the peak is what sampling held at once), the bytes of the blocks it
returns, their difference (the scratch), and tracemalloc's peak (numpy's allocations
only; numba's are not traced). The table gives medians over the 10 batches.

`ranks`: partitions shared/datasets' R-MAT 2^17 / 2^21 (undirected) with 128-wide random
features into 4 parts (METIS) and 1 part, and runs `gnnforge train --partitioned` with
torchrun: 1 rank on the 1-part dataset (the single-process reference), 4 ranks
cooperative and independent, each with prefetching on and off, and once with the opt-in
fixed mmap threshold (GNNFORGE_MMAP_THRESHOLD, gnnforge/distributed/_memory.py). The
same launches on a 2^10-node R-MAT measure the constant of the memory target. Per-run
details go to stderr; stdout has the table and the target checks. Memory and counts are
reliable on a shared machine; epoch times are not (other jobs share the cores): compare
same-run ratios.

`overlap`: the 4 cooperative ranks of `ranks` with prefetching off, and on with the input
feature rows' all_to_all blocking (`--no-async-exchange`) or issued with async_op=True
(the default), in rounds that rotate the launch order; it reports each launch's median
epoch time and its ratio to the blocking exchange in the same round.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RANK_LINE = re.compile(r"rank (\d+): feature_rows=(\d+) of (\d+), peak_rss_mib=(\d+), "
                       r"exchanged_mib=([\d.]+)")


# -- memory ---------------------------------------------------------------------------
def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def _save_csr(directory: str, rowptr, col, eids, seeds) -> None:
    import numpy as np

    for name, array in zip(("rowptr", "col", "eids", "seeds"), (rowptr, col, eids, seeds)):
        np.save(Path(directory) / f"{name}.npy", array)


def _memory_build(family: str, scale: int, directory: str) -> None:
    """Save the CSR by destination of one graph, and 10 batches of 1024 seeds.

    "rmat": R-MAT of 2^scale nodes and 8 x 2^scale edges, seeds uniform over its nodes.
    "fixed": the 2^18 R-MAT and its seeds, relabelled by a random permutation into 2^scale
    ids, beside (8 x 2^scale - 8 x 2^18) uniform random edges among the other vertices:
    the minibatches never leave the 2^18 core, so they stay the same size while the graph
    (ids, rows, edges) grows 16x.
    """
    import numpy as np

    from gnnforge.data import rmat
    from gnnforge.sampling._common import csr_arrays

    core_scale = scale if family == "rmat" else 18
    graph = rmat(core_scale, 8 << core_scale, seed=0)
    rng = np.random.default_rng(0)
    seeds = np.stack([rng.choice(graph.num_nodes, 1024, replace=False) for _ in range(10)])
    if family == "rmat" or scale == core_scale:
        _save_csr(directory, *csr_arrays(graph), seeds)
        return
    num_nodes, core = 1 << scale, graph.num_nodes
    perm = rng.permutation(num_nodes)
    filler = (8 << scale) - graph.num_edges
    others = perm[core:]
    src = np.concatenate([perm[graph.src.numpy()], others[rng.integers(0, others.size, filler)]])
    dst = np.concatenate([perm[graph.dst.numpy()], others[rng.integers(0, others.size, filler)]])
    del graph
    order = np.lexsort((src, dst))  # by destination, then source (as Graph.csr)
    rowptr = np.zeros(num_nodes + 1, dtype=np.int32)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=rowptr[1:])
    _save_csr(directory, rowptr, src[order].astype(np.int32), order.astype(np.int32),
              perm[seeds])


def _memory_child(sampler_name: str, directory: str) -> dict:
    """Per batch: sampling's peak RSS above the level before it, and the blocks' bytes."""
    import tracemalloc

    import numpy as np
    import torch

    from gnnforge.sampling import LaborSampler, NeighborSampler, draw_key
    from gnnforge.sampling._common import InEdges, sample_layer

    arrays = [np.load(Path(directory) / f"{name}.npy") for name in ("rowptr", "col", "eids")]
    batches = np.load(Path(directory) / "seeds.npy")
    edges = InEdges(*arrays, arrays[0].size - 1)
    sampler = (NeighborSampler if sampler_name == "ns" else LaborSampler)([10, 10, 10])
    layer_fn = sampler.layer_fn(None)
    generator = torch.Generator().manual_seed(0)

    def sample(seeds: np.ndarray) -> list:  # LayerwiseSampler.sample's loop, on InEdges
        key, frontier, blocks = draw_key(generator), seeds, []
        for layer in reversed(range(sampler.num_layers)):
            blocks.append(sample_layer(edges, frontier, layer, key, layer_fn))
            frontier = blocks[-1].src_nodes.numpy()
        return blocks

    sample(batches[0][:16])  # numba loaded, nothing large
    rows = []
    tracemalloc.start()
    for seeds in batches:
        tracemalloc.reset_peak()
        Path("/proc/self/clear_refs").write_text("5")  # peak RSS := current RSS
        before = _status("VmRSS")
        blocks = sample(seeds)
        peak = _status("VmHWM") - before
        output = sum(t.nbytes for b in blocks for t in (b.src_nodes, b.rowptr, b.col,
                                                         b.edge_ids, b.edge_weight)
                     if t is not None)
        rows.append((sum(b.num_src_nodes for b in blocks), sum(b.num_edges for b in blocks),
                     peak, output, tracemalloc.get_traced_memory()[1]))
        del blocks
    tracemalloc.stop()
    vertices, sampled, peak, output, traced = (np.median(column) for column in zip(*rows))
    scratch = [row[2] - row[3] for row in rows]
    return {"sampler": sampler_name, "nodes": edges.num_nodes, "edges": int(arrays[1].size),
            "graph_mib": sum(a.nbytes for a in arrays) / 2**20, "vertices": vertices,
            "sampled_edges": sampled, "peak_mib": peak / 2**20,
            "peak_max_mib": max(row[2] for row in rows) / 2**20, "output_mib": output / 2**20,
            "scratch_mib": float(np.median(scratch)) / 2**20, "traced_mib": traced / 2**20,
            "scratch_per_edge": float(np.median([s / row[1] for s, row in zip(scratch, rows)])),
            # The compaction map and the picks are sized by vertices plus edges.
            "scratch_per_item": float(np.median([s / (row[0] + row[1])
                                                 for s, row in zip(scratch, rows)]))}


def memory(args) -> None:
    rows = []
    # Large arrays from mmap, returned to the system on free: RSS then follows live memory.
    env = dict(os.environ, PYTHONPATH=str(ROOT), MALLOC_MMAP_THRESHOLD_="65536")
    with tempfile.TemporaryDirectory(prefix="gnnforge-mem-") as work:
        for family in args.families:
            for scale in args.scales:
                folder = Path(work) / f"{family}-{scale}"
                folder.mkdir()
                subprocess.run([sys.executable, __file__, "memory-build", family, str(scale),
                                str(folder)], check=True, env=env)
                for sampler_name in args.samplers:
                    command = [sys.executable, __file__, "memory-child", sampler_name,
                               str(folder)]
                    out = subprocess.run(command, capture_output=True, text=True, check=True,
                                         env=env)
                    row = json.loads(out.stdout.strip().splitlines()[-1])
                    rows.append(dict(row, family=family, scale=scale))
                    print(rows[-1], file=sys.stderr, flush=True)
                shutil.rmtree(folder)
    print("Batch 1024, fanouts [10, 10, 10], 8 edges per node; medians over 10 minibatches "
          "(each in a fresh peak-RSS window). rmat: an R-MAT of each size (its minibatches "
          "grow with the graph). fixed: the 2^18 R-MAT's minibatches inside graphs of each "
          "size (same minibatches, 16x the ids, rows and edges).")
    _memory_table(rows, args)


def _memory_table(rows: list[dict], args) -> None:
    print("\n| graph | sampler | nodes | edges | CSR (MiB) | sampled vertices / batch | sampled "
          "edges / batch | peak RSS above pre-sampling (MiB; median, max of 10) | blocks "
          "returned (MiB) | scratch = peak - blocks (MiB) | scratch bytes / sampled edge | "
          "scratch bytes / (sampled vertex + edge) | tracemalloc peak (MiB) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['family']} | {row['sampler']} | 2^{row['scale']} | {row['edges']:,} | "
              f"{row['graph_mib']:.0f} | {row['vertices']:,.0f} | {row['sampled_edges']:,.0f} | "
              f"{row['peak_mib']:.1f}, {row['peak_max_mib']:.1f} | {row['output_mib']:.1f} | "
              f"{row['scratch_mib']:.1f} | {row['scratch_per_edge']:.0f} | "
              f"{row['scratch_per_item']:.1f} | {row['traced_mib']:.1f} |")
    print()
    for family in args.families:
        for sampler_name in args.samplers:
            mine = [r for r in rows if r["family"] == family and r["sampler"] == sampler_name]
            if not mine:
                continue
            ratio = lambda key: max(r[key] for r in mine) / min(r[key] for r in mine)  # noqa
            flat = "yes" if ratio("peak_mib") <= 1.10 else "no"
            print(f"{family} {sampler_name}: max / min over the sizes: peak {ratio('peak_mib'):.3f}"
                  f" (flat within 10%: {flat}), scratch {ratio('scratch_mib'):.3f}, scratch per "
                  f"sampled edge {ratio('scratch_per_edge'):.3f}, per sampled vertex + edge "
                  f"{ratio('scratch_per_item'):.3f}; the minibatch itself: sampled edges "
                  f"{ratio('sampled_edges'):.3f}, vertices {ratio('vertices'):.3f}.")


# -- ranks ----------------------------------------------------------------------------
def _run(command: list[str], timeout: int, extra_env: dict | None = None
         ) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", **(extra_env or {}))
    start = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    result.seconds = time.perf_counter() - start
    return result


def _partition(out: Path, parts: int) -> None:
    if (out / "manifest.json").exists():
        return
    _run([sys.executable, "-m", "gnnforge", "partition", "--dataset", "rmat_s17_e21",
          "--parts", str(parts), "--method", "metis" if parts > 1 else "random",
          "--feature-dim", "128", "--out", str(out)], timeout=1800)


def _partition_tiny(out: Path, parts: int) -> None:
    """A 2^10-node R-MAT with the benchmark's feature width, classes and splits: the runs
    on it measure what a rank costs whatever its data (runtime, kernels, buffers)."""
    if (out / "manifest.json").exists():
        return
    code = ("import sys, torch\n"
            "from gnnforge.data import rmat\n"
            "from gnnforge.distributed import partition_nodes, write_partitions\n"
            "graph = rmat(10, 16 << 10, seed=0).to_undirected()\n"
            "gen = torch.Generator().manual_seed(0)\n"
            "x = torch.randn(graph.num_nodes, 128, generator=gen)\n"
            "y = torch.randint(0, 16, (graph.num_nodes,), generator=gen)\n"
            "d = torch.rand(graph.num_nodes, generator=gen)\n"
            "masks = {'train': d < 0.1, 'val': (d >= 0.1) & (d < 0.2),\n"
            "         'test': (d >= 0.2) & (d < 0.3)}\n"
            "owner = partition_nodes(graph, int(sys.argv[1]), 'random', seed=0)\n"
            "write_partitions(sys.argv[2], graph, owner, x, y, masks, method='random',\n"
            "                 seed=0, balance={}, edge_cut=0)\n")
    _run([sys.executable, "-c", code, str(parts), str(out)], timeout=600)


def _train(data: Path, ranks: int, mode: str, prefetch: int, out: Path, args,
           batch_size: int, fixed_threshold: bool = False, async_exchange: bool = True) -> dict:
    torchrun = Path(sys.executable).with_name("torchrun")
    command = [str(torchrun), "--standalone", "--nproc-per-node", str(ranks), "-m", "gnnforge",
               "train", "--task", "node", "--mode", "sampled", "--partitioned", str(data),
               "--distributed", mode, "--prefetch", str(prefetch), "--epochs", str(args.epochs),
               "--fanouts", "10,10,10", "--layers", "3", "--batch-size", str(batch_size),
               "--hidden", "64", "--no-progress", "--out-dir", str(out)]
    if not async_exchange:
        command.append("--no-async-exchange")
    shutil.rmtree(out, ignore_errors=True)
    # The opt-in fixed mmap threshold (gnnforge/distributed/_memory.py) for one row.
    extra = {"GNNFORGE_MMAP_THRESHOLD": "131072"} if fixed_threshold else {}
    result = _run(command, timeout=args.timeout, extra_env=extra)
    metrics = json.loads((out / "metrics.json").read_text())
    lines = sorted((int(m[1]), int(m[2]), int(m[3]), int(m[4]), float(m[5]))
                   for m in RANK_LINE.finditer(result.stdout))
    epochs = metrics["epochs"]
    seconds = [row["train_seconds"] for row in epochs]
    return {"ranks": ranks, "mode": mode, "prefetch": prefetch, "lines": lines,
            "batch_size": batch_size, "fixed_threshold": fixed_threshold,
            "async_exchange": async_exchange,
            "epoch_seconds": seconds,
            # The first epoch also loads numba's cached kernels and fills the page cache.
            "median_seconds": statistics.median(seconds[1:] or seconds),
            "vertices": epochs[-1]["vertices_per_rank_batch"],
            "feature_mib": epochs[-1]["feature_mib_per_rank_batch"],
            "edges": epochs[-1]["sampled_edges_per_batch"],
            "wall_seconds": result.seconds}


def _label(run: dict) -> str:
    if run["ranks"] == 1:
        return f"1 rank (whole graph), prefetch {run['prefetch']}"
    name = f"4 ranks {run['mode']}, prefetch {run['prefetch']}"
    return name + (", GNNFORGE_MMAP_THRESHOLD=131072" if run["fixed_threshold"] else "")


def _print_run(run: dict) -> None:
    print(f"{_label(run)}: batch {run['batch_size']}, epoch seconds "
          f"{[round(x, 2) for x in run['epoch_seconds']]}, wall {run['wall_seconds']:.0f} s",
          file=sys.stderr, flush=True)
    for line in run["lines"]:
        print(f"  rank {line[0]}: feature_rows={line[1]} of {line[2]}, "
              f"peak_rss_mib={line[3]}, exchanged_mib={line[4]}", file=sys.stderr, flush=True)


def _imports_rss_mib() -> float:
    """Peak RSS of an interpreter that imported what a training rank imports, no data."""
    code = ("import gnnforge.train._partitioned, gnnforge.nn, gnnforge.distributed, "
            "gnnforge.sampling, gnnforge.cli, torch.distributed, resource; "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
    out = _run([sys.executable, "-c", code], timeout=600)
    return float(out.stdout.strip().splitlines()[-1])


def ranks(args) -> None:
    work = Path(args.dir or tempfile.mkdtemp(prefix="gnnforge-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    four, one = work / "rmat-4", work / "rmat-1"
    _partition(four, 4)
    _partition(one, 1)
    _partition_tiny(work / "tiny-4", 4)
    _partition_tiny(work / "tiny-1", 1)
    manifest = json.loads((four / "manifest.json").read_text())
    balance = ", ".join(f"{k} {v:.3f}" for k, v in manifest["balance"].items())
    print(f"R-MAT 2^17 in 4 METIS parts: balance (largest / mean) {balance}; edge cut "
          f"{manifest['edge_cut_fraction']:.1%}. NS fanouts [10, 10, 10], 3 SAGE layers of "
          f"width 64, {args.epochs} epochs per run (times: median of the epochs after the "
          f"first), every step trains {4 * args.batch_size} seeds (1 rank and cooperative: "
          f"one global batch; independent: {args.batch_size} per rank).\n")
    # The constant: the same launches on the tiny graph (data and minibatches negligible).
    tiny = [_train(work / "tiny-1", 1, "cooperative", 0, work / "out-tiny-1", args,
                   4 * args.batch_size),
            _train(work / "tiny-4", 4, "cooperative", 1, work / "out-tiny-4", args,
                   4 * args.batch_size)]
    for run in tiny:
        _print_run(run)
    constant = max(line[3] for run in tiny for line in run["lines"])
    plan = [(one, 1, "cooperative", 0, False), (one, 1, "cooperative", 1, False)]
    plan += [(four, 4, mode, prefetch, False) for mode in ("cooperative", "independent")
             for prefetch in (0, 1)]
    plan += [(four, 4, "cooperative", 1, True)]
    runs = []
    for data, count, mode, prefetch, fixed_threshold in plan:
        batch = args.batch_size * (1 if mode == "independent" else 4)
        name = f"out-{count}-{mode}-{prefetch}-{int(fixed_threshold)}"
        runs.append(_train(data, count, mode, prefetch, work / name, args, batch,
                           fixed_threshold))
        _print_run(runs[-1])
    single = min(line[3] for run in runs[:2] for line in run["lines"])  # the stricter one
    imports = _imports_rss_mib()
    print(f"The constant C: the largest peak RSS of a rank of the same launches (1 rank, and "
          f"4 cooperative ranks with prefetching) on a 2^10-node R-MAT with the same feature "
          f"width: {constant} MiB (interpreter, torch, numba's kernels, gloo, the model). "
          f"Single-process reference: the smaller 1-rank peak, {single} MiB.\n")
    print("| run | feature rows / rank (max share) | peak RSS / rank (MiB, max) | <= 0.4 x "
          "single + C | (peak - C) / (single - C) | exchanged MiB / rank | sampled vertices "
          "/ rank / step | feature MiB read / rank / step | epoch (s, median) |")
    print("|---|---:|---:|:---:|---:|---:|---:|---:|---:|")
    for run in runs:
        share = max(line[1] / line[2] for line in run["lines"])
        peak = max(line[3] for line in run["lines"])
        exchanged = [line[4] for line in run["lines"]]
        met = "yes" if peak <= 0.4 * single + constant else "**no**"
        ratio = f"{(peak - constant) / (single - constant):.2f}"
        if run["ranks"] == 1:  # the reference itself
            met, ratio = "-", "-"
        print(f"| {_label(run)} | {share:.3f} | {peak} | {met} | {ratio} | "
              f"{min(exchanged):.0f}-{max(exchanged):.0f} | {run['vertices']:,.0f} | "
              f"{run['feature_mib']:.2f} | {run['median_seconds']:.2f} |")
    worst = max(line[3] for run in runs[2:] for line in run["lines"])
    print(f"\nWith the smaller constant of an interpreter that has only imported what a rank "
          f"imports ({imports:.0f} MiB): the largest 4-rank peak, {worst} MiB, against 0.4 x "
          f"{single} + {imports:.0f} = {0.4 * single + imports:.0f} MiB: "
          f"{'met' if worst <= 0.4 * single + imports else 'not met'}.")
    by = {(r["mode"], r["prefetch"]): r for r in runs if r["ranks"] == 4
          and not r["fixed_threshold"]}
    coop, indep = by[("cooperative", 1)], by[("independent", 1)]
    print(f"\nCooperative / independent per rank and step: sampled vertices "
          f"{coop['vertices'] / indep['vertices']:.2f}x, feature bytes read "
          f"{coop['feature_mib'] / indep['feature_mib']:.2f}x.")
    for mode in ("cooperative", "independent"):
        off, on = by[(mode, 0)], by[(mode, 1)]
        ratio = on["median_seconds"] / off["median_seconds"]
        print(f"Overlap ({mode}): epoch {off['median_seconds']:.2f} s without prefetching, "
              f"{on['median_seconds']:.2f} s with ({ratio:.2f}x).")
    fixed = runs[-1]
    print(f"Opt-in fixed mmap threshold (cooperative, prefetch 1): peak "
          f"{max(line[3] for line in fixed['lines'])} MiB and epoch "
          f"{fixed['median_seconds']:.2f} s, against "
          f"{max(line[3] for line in coop['lines'])} MiB and "
          f"{coop['median_seconds']:.2f} s with glibc's dynamic threshold (the default).")
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)


def overlap(args) -> None:
    """4 cooperative ranks on the 4-part R-MAT 2^17: prefetching off, and on with the input
    rows' all_to_all blocking or asynchronous; `--repeats` rounds, the order rotated."""
    work = Path(args.dir or tempfile.mkdtemp(prefix="gnnforge-overlap-"))
    work.mkdir(parents=True, exist_ok=True)
    four = work / "rmat-4"
    _partition(four, 4)
    configs = [("prefetch 0", 0, True), ("prefetch 1, blocking row exchange", 1, False),
               ("prefetch 1, async row exchange", 1, True)]
    print(f"4 cooperative ranks on R-MAT 2^17 (4 METIS parts, F=128), NS [10, 10, 10], 3 SAGE "
          f"layers of width 64, global batch {4 * args.batch_size}, {args.epochs} epochs per "
          f"launch; epoch time: median of the epochs after the first; {args.repeats} rounds, "
          "each running the three launches in a rotated order.\n")
    seconds: dict[str, list[float]] = {name: [] for name, _, _ in configs}
    for round_ in range(args.repeats):
        shift = round_ % len(configs)
        for name, prefetch, async_exchange in configs[shift:] + configs[:shift]:
            run = _train(four, 4, "cooperative", prefetch, work / "out-overlap", args,
                         4 * args.batch_size, async_exchange=async_exchange)
            seconds[name].append(run["median_seconds"])
            print(f"round {round_ + 1}, {name}: epoch seconds "
                  f"{[round(x, 2) for x in run['epoch_seconds']]}", file=sys.stderr, flush=True)
    base = seconds[configs[1][0]]
    print("| launch | epoch (s), per round | median | vs blocking row exchange (same round, "
          "median) |")
    print("|---|---|---:|---:|")
    for name, _, _ in configs:
        ratios = [a / b for a, b in zip(seconds[name], base)]
        print(f"| {name} | {', '.join(f'{x:.2f}' for x in seconds[name])} | "
              f"{statistics.median(seconds[name]):.2f} | {statistics.median(ratios):.2f}x |")
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "memory-build":
        _memory_build(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    if len(sys.argv) == 4 and sys.argv[1] == "memory-child":
        print(json.dumps(_memory_child(sys.argv[2], sys.argv[3])))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    mem = sub.add_parser("memory", help="sampling peak memory vs graph size")
    mem.add_argument("--scales", type=lambda t: [int(x) for x in t.split(",")],
                     default=[18, 19, 20, 21, 22])
    mem.add_argument("--samplers", type=lambda t: t.split(","), default=["ns", "labor0"])
    mem.add_argument("--families", type=lambda t: t.split(","), default=["rmat", "fixed"],
                     help="rmat: R-MAT of each size; fixed: the 2^18 R-MAT's minibatches "
                          "inside graphs of each size")
    rk = sub.add_parser("ranks", help="4 torchrun ranks on partitioned R-MAT 2^17")
    rk.add_argument("--dir", help="keep the partitions and runs here (default: a temp dir)")
    rk.add_argument("--epochs", type=int, default=4)
    rk.add_argument("--batch-size", type=int, default=1024)
    rk.add_argument("--timeout", type=int, default=3600, help="seconds per torchrun run")
    ov = sub.add_parser("overlap", help="4 cooperative ranks: prefetching off, on with a "
                        "blocking or an asynchronous feature-row exchange")
    ov.add_argument("--dir", help="keep the partitions here (default: a temp dir)")
    ov.add_argument("--epochs", type=int, default=4)
    ov.add_argument("--batch-size", type=int, default=1024)
    ov.add_argument("--repeats", type=int, default=2, help="rounds of the three launches")
    ov.add_argument("--timeout", type=int, default=3600, help="seconds per torchrun run")
    args = parser.parse_args()
    {"memory": memory, "ranks": ranks, "overlap": overlap}[args.what](args)


if __name__ == "__main__":
    main()
