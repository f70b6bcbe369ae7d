"""Larger than memory: sampled GraphSAGE on a synthetic-products graph whose files exceed
the memory limit it trains under (issue 32, item 5).

Each configuration is one `gnnforge train --task node --mode sampled --dataset
synthetic-products --synthetic-nodes 2**LOG2 --max-steps STEPS` (3x256, fanouts 15,10,5,
batch 1024, Adam; CSR and features memory-mapped) in a memory cgroup of its own capped
at --limit-gib: anonymous memory and page cache together, memory-mapped pages included
(benchmarks/_memory_limit.py). Before each run the dataset's files are evicted from the
page cache, so every configuration starts cold and its file pages are charged to its own
cgroup, and the runs do not warm it (`--warm-page-cache off`; its `auto` would not either,
the files being larger than the limit). The configurations change one thing at a time:

  no cache        independent minibatches (kappa 1), every input row read from the map
  cache           the feature cache (`--cache-size` rows, LRU) in front of the map
  cache, kappa K  the same with dependent minibatches (`--dependent K`: K consecutive
                  batches share their sampling variates, the cooperative-minibatching
                  paper's kappa), which makes consecutive batches' input rows overlap
  readahead       "cache" with the kernel's default readahead on the maps
                  (GNNFORGE_MMAP_ADVICE=normal) instead of gnnforge's MADV_RANDOM
  labor           "cache" and "cache, kappa K" sampling with LABOR-0 instead of NS: its
                  variates belong to the source nodes, shared by every destination, so
                  kappa keeps the same sources across consecutive batches (the paper's
                  setting); NS draws per edge, and kappa changes little there

Columns: seconds per step (training time / steps, the train CLI's own clock: sampling,
gathering, forward, backward, Adam), the feature cache's hit rate, the bytes the process
read from storage during training (/proc/self/io read_bytes; page-cache misses of the
mapped CSR and features, evaluation excluded) in all and per step, the process's peak RSS
(VmHWM), the cgroup's peak (anonymous + page cache) and how often it hit the limit
(the kernel reclaiming file pages: the limit was binding), and the test accuracy on
10,000 sampled test nodes. The dataset is generated (outside the limit) on first use:
about 6 minutes, 7.3 GiB of memory and 9.7 GiB of disk at 2**24 nodes. On a disk serving
about 60 MB/s of 4 KiB random reads a step reads 1-2 GiB and takes half a minute, so the
default run is short: 15 steps and 20 evaluation batches per configuration.

    python benchmarks/larger_than_memory.py          # 2**24 nodes, 8 GiB, cache vs kappa
    python benchmarks/larger_than_memory.py --configs none,cache,kappa,readahead --steps 60
    python benchmarks/larger_than_memory.py --log2 12 --steps 3 --limit-gib 1 --cache-rows 500
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _memory_limit import evict_from_page_cache, run_limited  # noqa: E402

_RESOURCES = re.compile(r"^steps/s=([\d.]+) peak_rss_mib=(\d+) data_mib=(\d+)$", re.M)


CONFIGS = ("none", "cache", "kappa", "readahead", "labor")


def configurations(args) -> list[tuple[str, list[str], dict[str, str]]]:
    """(label, extra train flags, extra environment) per row of --configs, one change at a
    time: none, cache, kappa (one row per --kappas value), readahead, labor (cache and
    kappa 1 then each --kappas value, sampling with LABOR-0 instead of NS)."""
    cache = ["--cache-size", str(args.cache_rows)]
    rows = {"none": [("no cache, kappa 1", [], {})],
            "cache": [(f"cache {args.cache_rows:,} rows, kappa 1", cache, {})],
            "kappa": [(f"cache {args.cache_rows:,} rows, kappa {kappa}",
                       cache + ["--dependent", str(kappa)], {}) for kappa in args.kappas],
            "readahead": [(f"cache {args.cache_rows:,} rows, kappa 1, kernel readahead",
                           cache, {"GNNFORGE_MMAP_ADVICE": "normal"})],
            "labor": [(f"LABOR-0, cache {args.cache_rows:,} rows, kappa {kappa}",
                       cache + ["--sampler", "labor", "--dependent", str(kappa)], {})
                      for kappa in [1, *args.kappas]]}
    return [row for name in args.configs for row in rows[name]]


def train_command(args, flags: list[str], out_dir: Path) -> list[str]:
    return [sys.executable, "-m", "gnnforge", "train", "--task", "node", "--mode", "sampled",
            "--dataset", "synthetic-products", "--synthetic-nodes", str(2**args.log2),
            "--max-steps", str(args.steps), "--threads", str(args.threads), "--no-progress",
            "--warm-page-cache", "off",  # every read is a step's: the table counts them
            "--out-dir", str(out_dir), *flags]


def measure(args, label: str, flags: list[str], env: dict[str, str],
            files: list[Path]) -> dict[str, Any]:
    """One configuration, cold, under the limit."""
    evict_from_page_cache(files)
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(tmp) / "run"
        run = run_limited(train_command(args, flags, out_dir), int(args.limit_gib * 2**30),
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})
        metrics = out_dir / "metrics.json"
        document = json.loads(metrics.read_text()) if metrics.exists() else {}
    found = _RESOURCES.search(run.stdout)
    result: dict[str, Any] = {"label": label, "returncode": run.returncode,
                              "limit_mib": run.limit_bytes / 2**20,
                              "cgroup_peak_mib": (run.peak_bytes or 0) / 2**20,
                              "limit_hits": run.limit_hits, "oom_kills": run.oom_kills}
    if run.returncode != 0 or found is None or not document:
        tail = (run.stderr.strip().splitlines() or ["no output"])[-1][:160]
        return {**result, "error": f"exit {run.returncode}: {tail}"}
    epochs, summary = document["epochs"], document["summary"]
    steps = args.steps
    seconds = sum(row["train_seconds"] for row in epochs)
    misses = [row["cache_miss_rate"] for row in epochs if "cache_miss_rate" in row]
    reads = sum(row.get("storage_read_mib", 0.0) for row in epochs)
    return {**result, "s_per_step": seconds / steps, "steps": steps,
            "hit_rate": 1 - sum(misses) / len(misses) if misses else None,
            "read_mib": reads, "read_mib_per_step": reads / steps,
            "epoch_reads": [round(row.get("storage_read_mib", 0.0)) for row in epochs],
            "peak_rss_mib": int(found.group(2)), "data_mib": int(found.group(3)),
            "test_accuracy": summary.get("final test_accuracy (best epoch)")}


def table(results: list[dict[str, Any]]) -> list[str]:
    lines = ["| configuration | s/step | cache hit rate | storage reads (MiB) | MiB/step "
             "| peak RSS (MiB) | cgroup peak (MiB) | limit (MiB) | limit hits | test acc |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['label']} | failed ({r['error']}; OOM kills {r['oom_kills']}) "
                         f"| | | | | {r['cgroup_peak_mib']:,.0f} | {r['limit_mib']:,.0f} "
                         f"| {r['limit_hits']:,} | |")
            continue
        hit = "n/a (no cache)" if r["hit_rate"] is None else f"{r['hit_rate']:.1%}"
        accuracy = r["test_accuracy"]
        lines.append(f"| {r['label']} | {r['s_per_step']:.2f} | {hit} | {r['read_mib']:,.0f} "
                     f"| {r['read_mib_per_step']:,.1f} | {r['peak_rss_mib']:,} "
                     f"| {r['cgroup_peak_mib']:,.0f} | {r['limit_mib']:,.0f} "
                     f"| {r['limit_hits']:,} "
                     f"| {'n/a' if accuracy is None else f'{accuracy:.3f}'} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2", type=int, default=24, help="log2 of the node count")
    parser.add_argument("--limit-gib", type=float, default=8.0, help="the cgroup's memory cap")
    parser.add_argument("--steps", type=int, default=15, help="optimiser steps per run")
    parser.add_argument("--cache-rows", type=int, default=1_000_000,
                        help="feature cache rows (--cache-size)")
    parser.add_argument("--kappas", default="256", help="dependent-minibatch kappas (> 1)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--configs", default="cache,kappa",
                        help=f"rows to run, of {', '.join(CONFIGS)}")
    args = parser.parse_args()
    args.kappas = [int(kappa) for kappa in args.kappas.split(",") if kappa]
    if any(kappa < 2 for kappa in args.kappas):
        parser.error(f"--kappas are dependent-minibatch group lengths > 1, got {args.kappas}")
    args.configs = [name for name in args.configs.split(",") if name]
    unknown = sorted(set(args.configs) - set(CONFIGS))
    if unknown:
        parser.error(f"unknown --configs {unknown}; choose from {', '.join(CONFIGS)}")
    from gnnforge.data import load_synthetic_products

    data = load_synthetic_products(2**args.log2, progress=True, prefetch=False)  # unlimited
    files = sorted(data.folder.glob("*.npy"))
    disk = sum(path.stat().st_size for path in files)
    print(f"synthetic-products 2^{args.log2}: {data.num_nodes:,} nodes, {data.num_edges:,} "
          f"directed edges, {data.x.shape[1]} features; files {disk / 2**20:,.0f} MiB "
          f"(structure {(data.rowptr.nbytes + data.col.nbytes) / 2**20:,.0f}, features "
          f"{data.x.numel() * 4 / 2**20:,.0f}); memory limit {args.limit_gib:g} GiB "
          f"(cgroup: anonymous + page cache); {args.steps} steps per run from a cold page "
          f"cache, {args.threads} thread(s); GraphSAGE-mean 3x256, fanouts 15,10,5, "
          f"batch 1024", flush=True)
    del data
    results = []
    for label, flags, env in configurations(args):
        results.append(measure(args, label, flags, env, files))
        print(f"  {label}: done", file=sys.stderr, flush=True)
    print("\n".join(table(results)))
    for r in results:
        if "epoch_reads" in r:
            print(f"{r['label']}: storage reads per epoch (MiB) {r['epoch_reads']}, "
                  f"data {r['data_mib']:,} MiB")
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
