"""Scale-out measurements: sampling memory vs graph size, and 4 ranks on partitioned data.

    python benchmarks/scale_out.py memory     # sampling peak memory, 2^18 .. 2^22 nodes
    python benchmarks/scale_out.py ranks      # 4 torchrun ranks on R-MAT 2^17, F=128

`memory`: per graph size, an R-MAT of 2^s nodes and 8 * 2^s directed edges is built and
its CSR saved by one process; a fresh process per sampler (NS, LABOR-0; batch 1024,
fanouts [10, 10, 10]) loads the CSR, samples one small warm-up batch, resets its peak
RSS (/proc/self/clear_refs) and samples 10 batches. The table gives the peak RSS above
the level before sampling (glibc told to mmap every array over 64 KiB, so freed memory
leaves RSS and the peak is what sampling held at once) and tracemalloc's peak (numpy's
allocations only; numba's are not traced).

`ranks`: partitions shared/datasets' R-MAT 2^17 / 2^21 (undirected) with 128-wide random
features into 4 parts (METIS) and 1 part, and runs one epoch of `gnnforge train
--partitioned` with torchrun: 4 ranks cooperative and independent, each with prefetching
on and off, and 1 rank on the 1-part dataset (the single-process reference). It prints
each run's per-rank lines and a summary. Memory and counts are reliable on a shared
machine; epoch times are not (other jobs share the cores): compare same-run ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
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


def _memory_build(scale: int, directory: str) -> None:
    """Generate the R-MAT graph of 2^scale nodes and save its CSR by destination."""
    import numpy as np

    from gnnforge.data import rmat
    from gnnforge.sampling._common import csr_arrays

    graph = rmat(scale, 8 << scale, seed=0)
    for name, array in zip(("rowptr", "col", "eids"), csr_arrays(graph)):
        np.save(Path(directory) / f"{name}.npy", array)


def _memory_child(scale: int, sampler_name: str, directory: str) -> dict:
    """Sampling's peak memory on a loaded CSR (no graph construction in this process)."""
    import tracemalloc

    import numpy as np
    import torch

    from gnnforge.sampling import LaborSampler, NeighborSampler, draw_key
    from gnnforge.sampling._common import InEdges, sample_layer

    arrays = [np.load(Path(directory) / f"{name}.npy") for name in ("rowptr", "col", "eids")]
    edges = InEdges(*arrays, arrays[0].size - 1)
    sampler = (NeighborSampler if sampler_name == "ns" else LaborSampler)([10, 10, 10])
    layer_fn = sampler.layer_fn(None)
    generator = torch.Generator().manual_seed(0)

    def sample(seeds: np.ndarray) -> np.ndarray:  # LayerwiseSampler.sample's loop, on InEdges
        key, frontier, sizes = draw_key(generator), seeds, np.zeros(2)
        for layer in reversed(range(sampler.num_layers)):
            block = sample_layer(edges, frontier, layer, key, layer_fn)
            frontier = block.src_nodes.numpy()
            sizes += (block.num_src_nodes, block.num_edges)
        return sizes

    rng = np.random.default_rng(0)
    sample(rng.choice(edges.num_nodes, 16, replace=False))  # numba loaded, nothing large
    batches = [rng.choice(edges.num_nodes, 1024, replace=False) for _ in range(10)]
    Path("/proc/self/clear_refs").write_text("5")  # peak RSS := current RSS
    before = _status("VmRSS")
    tracemalloc.start()
    vertices, sampled_edges = sum(sample(seeds) for seeds in batches)
    _, numpy_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"scale": scale, "sampler": sampler_name, "nodes": edges.num_nodes,
            "edges": int(arrays[1].size), "peak_mib": (_status("VmHWM") - before) / 2**20,
            "traced_mib": numpy_peak / 2**20, "vertices_per_batch": vertices / 10,
            "edges_per_batch": sampled_edges / 10,
            "graph_mib": sum(a.nbytes for a in arrays) / 2**20}


def memory(args) -> None:
    rows = []
    # Large arrays from mmap, returned to the system on free: RSS then follows live memory.
    env = dict(os.environ, PYTHONPATH=str(ROOT), MALLOC_MMAP_THRESHOLD_="65536")
    with tempfile.TemporaryDirectory(prefix="gnnforge-mem-") as work:
        for scale in args.scales:
            folder = Path(work) / str(scale)
            folder.mkdir()
            subprocess.run([sys.executable, __file__, "memory-build", str(scale), str(folder)],
                           check=True, env=env)
            for sampler_name in args.samplers:
                command = [sys.executable, __file__, "memory-child", str(scale), sampler_name,
                           str(folder)]
                out = subprocess.run(command, capture_output=True, text=True, check=True,
                                     env=env)
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(rows[-1], flush=True)
            shutil.rmtree(folder)
    print("\n| sampler | nodes | edges | CSR (MiB) | sampled vertices / batch | sampled edges "
          "/ batch | peak RSS above pre-sampling (MiB) | bytes per sampled edge | tracemalloc "
          "peak (MiB) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in sorted(rows, key=lambda r: (r["sampler"], r["scale"])):
        print(f"| {row['sampler']} | 2^{row['scale']} | {row['edges']:,} | "
              f"{row['graph_mib']:.0f} | {row['vertices_per_batch']:,.0f} | "
              f"{row['edges_per_batch']:,.0f} | {row['peak_mib']:.1f} | "
              f"{row['peak_mib'] * 2**20 / row['edges_per_batch']:.0f} | "
              f"{row['traced_mib']:.1f} |")
    for sampler_name in args.samplers:
        peaks = [r["peak_mib"] for r in rows if r["sampler"] == sampler_name]
        per_edge = [r["peak_mib"] / r["edges_per_batch"] for r in rows
                    if r["sampler"] == sampler_name]
        print(f"{sampler_name}: peak max/min over sizes = {max(peaks) / min(peaks):.3f}, "
              f"per sampled edge {max(per_edge) / min(per_edge):.3f}")


# -- ranks ----------------------------------------------------------------------------
def _run(command: list[str], timeout: int) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
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


def _train(data: Path, ranks: int, mode: str, prefetch: int, out: Path, args,
           batch_size: int) -> dict:
    torchrun = Path(sys.executable).with_name("torchrun")
    command = [str(torchrun), "--standalone", "--nproc-per-node", str(ranks), "-m", "gnnforge",
               "train", "--task", "node", "--mode", "sampled", "--partitioned", str(data),
               "--distributed", mode, "--prefetch", str(prefetch), "--epochs", str(args.epochs),
               "--fanouts", "10,10,10", "--layers", "3", "--batch-size", str(batch_size),
               "--hidden", "64", "--no-progress", "--out-dir", str(out)]
    result = _run(command, timeout=args.timeout)
    metrics = json.loads((out / "metrics.json").read_text())
    lines = sorted((int(m[1]), int(m[2]), int(m[3]), int(m[4]), float(m[5]))
                   for m in RANK_LINE.finditer(result.stdout))
    epochs = metrics["epochs"]
    return {"ranks": ranks, "mode": mode, "prefetch": prefetch, "lines": lines,
            "batch_size": batch_size, "steps": round(epochs[-1]["nodes_per_s"]
                                                     * epochs[-1]["train_seconds"] / batch_size
                                                     / (ranks if mode == "independent" else 1)),
            "epoch_seconds": [row["train_seconds"] for row in epochs],
            "vertices": epochs[-1]["vertices_per_rank_batch"],
            "feature_mib": epochs[-1]["feature_mib_per_rank_batch"],
            "edges": epochs[-1]["sampled_edges_per_batch"],
            "wall_seconds": result.seconds, "stdout": result.stdout}


def _baseline_rss_mib() -> float:
    """RSS of a process that imported what a training rank imports, before any data."""
    code = ("import gnnforge.train._partitioned, gnnforge.nn, gnnforge.distributed, "
            "gnnforge.sampling, torch.distributed, resource; "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
    out = _run([sys.executable, "-c", code], timeout=600)
    return float(out.stdout.strip().splitlines()[-1])


def ranks(args) -> None:
    work = Path(args.dir or tempfile.mkdtemp(prefix="gnnforge-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    four, one = work / "rmat-4", work / "rmat-1"
    start = time.perf_counter()
    _partition(four, 4)
    _partition(one, 1)
    manifest = json.loads((four / "manifest.json").read_text())
    print(f"partitioned in {time.perf_counter() - start:.0f} s; balance {manifest['balance']}, "
          f"edge cut {manifest['edge_cut_fraction']:.1%}, parts {manifest['parts']}",
          flush=True)
    plan = [(one, 1, "cooperative", 0)] + [(four, 4, mode, prefetch)
                                           for mode in ("cooperative", "independent")
                                           for prefetch in (0, 1)]
    runs = []
    # Every run trains on 4 x --batch-size seeds per step: the single process and the
    # cooperating ranks on one global batch of that size, each independent rank on its own
    # --batch-size seeds (the paper's setting: the same per-rank share).
    for data, count, mode, prefetch in plan:
        batch = args.batch_size * (4 if mode == "cooperative" else 1)
        run = _train(data, count, mode, prefetch, work / f"out-{count}-{mode}-{prefetch}", args,
                     batch)
        runs.append(run)
        print(f"\n{run['ranks']} rank(s), {run['mode']}, prefetch {run['prefetch']}, batch "
              f"{run['batch_size']}, about {run['steps']} steps: "
              f"epoch seconds {run['epoch_seconds']}, wall {run['wall_seconds']:.0f} s, "
              f"vertices/rank/step {run['vertices']:,.0f}, feature MiB/rank/step "
              f"{run['feature_mib']:.2f}, edges/minibatch {run['edges']:,.0f}", flush=True)
        for line in run["lines"]:
            print(f"  rank {line[0]}: feature_rows={line[1]} of {line[2]}, "
                  f"peak_rss_mib={line[3]}, exchanged_mib={line[4]}", flush=True)
    baseline = _baseline_rss_mib()
    single_peak = runs[0]["lines"][0][3]
    print(f"\nimports-only RSS (the constant): {baseline:.0f} MiB; single-process peak "
          f"{single_peak} MiB")
    print("\n| run | feature rows / rank (max share) | peak RSS / rank (MiB, max) | "
          "peak / single-process peak | exchanged MiB / rank | sampled vertices / rank / "
          "step | feature MiB read / rank / step | fastest epoch (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for run in runs:
        share = max(line[1] / line[2] for line in run["lines"])
        peak = max(line[3] for line in run["lines"])
        exchanged = sum(line[4] for line in run["lines"]) / len(run["lines"])
        seconds = min(run["epoch_seconds"])  # the least disturbed epoch
        print(f"| {run['ranks']} rank(s) {run['mode']}, prefetch {run['prefetch']} | "
              f"{share:.3f} | {peak} | {peak / single_peak:.2f} | {exchanged:.1f} | "
              f"{run['vertices']:,.0f} | {run['feature_mib']:.2f} | {seconds:.1f} |")
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "memory-build":
        _memory_build(int(sys.argv[2]), sys.argv[3])
        return
    if len(sys.argv) == 5 and sys.argv[1] == "memory-child":
        print(json.dumps(_memory_child(int(sys.argv[2]), sys.argv[3], sys.argv[4])))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    mem = sub.add_parser("memory", help="sampling peak memory vs graph size")
    mem.add_argument("--scales", type=lambda t: [int(x) for x in t.split(",")],
                     default=[18, 19, 20, 21, 22])
    mem.add_argument("--samplers", type=lambda t: t.split(","), default=["ns", "labor0"])
    rk = sub.add_parser("ranks", help="4 torchrun ranks on partitioned R-MAT 2^17")
    rk.add_argument("--dir", help="keep the partitions and runs here (default: a temp dir)")
    rk.add_argument("--epochs", type=int, default=2)
    rk.add_argument("--batch-size", type=int, default=1024)
    rk.add_argument("--timeout", type=int, default=3600, help="seconds per torchrun run")
    args = parser.parse_args()
    memory(args) if args.what == "memory" else ranks(args)


if __name__ == "__main__":
    main()
