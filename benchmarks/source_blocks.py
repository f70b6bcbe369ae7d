"""Source ranges for copy_u sum: one pass against the source-blocked forms (docs/kernels.md,
"Source ranges").

Two measurements on synthetic-products 2^k nodes, rows of --width float32:

  kernel  copy_u_sum alone on the graph's CSR, one thread: the widest native build in one
          pass and in ranges of each --ranges MiB (`_native.gspmm_source_blocked`), median
          of --repeats in interleaved rounds after a warm-up; every result is checked to
          have the one-pass bits.
  gcn     the full-graph GCN 2x--width training step and inference (end_to_end.py's
          products GCN side), one thread, in two child processes that differ in one
          thing: the forms removed from the trials' contenders, or kept. Each starts from
          an empty tuning record (its own GNNFORGE_CACHE, linking the user cache's data
          and native builds), so each calibrates and runs its trials afresh; the table
          names the candidate each class ended with.

    python benchmarks/source_blocks.py --sizes 18,19,20,21
    python benchmarks/source_blocks.py --sizes 11 --ranges 1 --repeats 1   # seconds
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

_RESULT = "SOURCE_BLOCKS_RESULT "


def kernel_rows(log2: int, width: int, ranges_mib: list[int], repeats: int) -> list[str]:
    """Table rows: copy_u_sum one pass vs each range size on 2^log2's CSR."""
    import numpy as np
    import torch

    from gnnforge.data import load_synthetic_products
    from gnnforge.ops import _native

    torch.set_num_threads(1)
    data = load_synthetic_products(2**log2, progress=False)
    rowptr = torch.from_numpy(np.asarray(data.rowptr))
    col = torch.from_numpy(np.asarray(data.col))
    x = torch.randn(rowptr.shape[0] - 1, width, generator=torch.Generator().manual_seed(0))
    runs = {"one pass": lambda: _native.gspmm_native(rowptr, col, col, x, None, "copy_lhs",
                                                     "sum", False)[0]}
    for mib in ranges_mib:
        runs[f"{mib} MiB"] = (lambda size: lambda: _native.gspmm_source_blocked(
            rowptr, col, x, "sum", size))(mib * 2**20)
    reference = runs["one pass"]().clone()
    for name, run in runs.items():                     # warm-up, and the bits checked
        if not torch.equal(run(), reference):
            raise AssertionError(f"{name}: not the one-pass result")
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - start)
    base = statistics.median(seconds["one pass"])
    rows = []
    for name, values in seconds.items():
        median = statistics.median(values)
        rows.append(f"| 2^{log2} | {name} | {median * 1e3:,.1f} | "
                    f"{median / col.shape[0] * 1e9:.1f} | {base / median:.2f}x |")
    return rows


def gcn_child(log2: int, width: int, repeats: int, forms: bool) -> dict[str, Any]:
    """The GCN step in this process (GNNFORGE_CACHE already set by the parent)."""
    import torch

    import end_to_end
    from _end_to_end_products_gcn import run_gcn_side
    from gnnforge.ops import _cpu_kernels, _trials

    torch.set_num_threads(1)
    if not forms:
        _cpu_kernels.source_block_forms = lambda name: []
    result = run_gcn_side("gnnforge", 2**log2, repeats, {"OurGCN": end_to_end.OurGCN},
                          hidden=width)
    chosen = sorted({f"{trial['class']}: {trial['choice']}"
                     for trial in _trials.trial_results()})
    return {"step_s": result["step_s"], "infer_s": result["infer_s"],
            "edges": result["edges"], "chosen": chosen}


def _fresh_cache(parent: Path) -> Path:
    """A cache folder linking every entry of the user cache but its tuning records."""
    from gnnforge.data._paths import cache_dir

    folder = Path(tempfile.mkdtemp(prefix="source-blocks-", dir=parent))
    for entry in cache_dir().iterdir():
        if entry.name != "tuning":
            (folder / entry.name).symlink_to(entry)
    return folder


def gcn_side(log2: int, args, forms: bool, parent: Path) -> dict[str, Any] | str:
    """One side's result from its child process, or why it failed."""
    from gnnforge.data import load_synthetic_products

    load_synthetic_products(2**log2, prefetch=False)   # generated once, before linking
    env = {**os.environ, "GNNFORGE_CACHE": str(_fresh_cache(parent))}
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(log2),
               "--width", str(args.width), "--repeats", str(args.repeats)]
    if forms:
        command.append("--forms")
    run = subprocess.run(command, capture_output=True, text=True, env=env)
    for line in run.stdout.splitlines():
        if line.startswith(_RESULT):
            return json.loads(line[len(_RESULT):])
    return f"failed (exit {run.returncode}): {run.stderr.strip().splitlines()[-1:]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="18,19,20,21", help="log2 of the node counts")
    parser.add_argument("--width", type=int, default=64, help="row width (GCN hidden)")
    parser.add_argument("--ranges", default="16,32,64,128", help="kernel: range sizes, MiB")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls (GCN: steps)")
    parser.add_argument("--skip-kernel", action="store_true")
    parser.add_argument("--skip-gcn", action="store_true")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--forms", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        result = gcn_child(args.child, args.width, args.repeats, args.forms)
        print(_RESULT + json.dumps(result), flush=True)
        return
    sizes = [int(size) for size in args.sizes.split(",")]
    if not args.skip_kernel:
        print(f"copy_u_sum alone, F={args.width}, one thread, median of {args.repeats}\n")
        print("| nodes | kernel | ms | ns / edge | vs one pass |\n| --- | --- | --- | --- | --- |")
        for log2 in sizes:
            for row in kernel_rows(log2, args.width, [int(v) for v in args.ranges.split(",")],
                                   args.repeats):
                print(row, flush=True)
        print()
    if args.skip_gcn:
        return
    print(f"full-graph GCN 2x{args.width} step, one thread, median of {args.repeats}\n")
    print("| nodes | one pass: step s | infer s | with the forms: step s | infer s | "
          "speed-up (step) | ns / edge | chosen with the forms |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as parent:
        for log2 in sizes:
            one, blocked = (gcn_side(log2, args, forms, Path(parent)) for forms in (False, True))
            if isinstance(one, str) or isinstance(blocked, str):
                print(f"| 2^{log2} | {one if isinstance(one, str) else 'ok'} | | "
                      f"{blocked if isinstance(blocked, str) else 'ok'} | | | | |")
                continue
            edges = one["edges"]
            print(f"| 2^{log2} | {one['step_s']:.3f} | {one['infer_s']:.3f} | "
                  f"{blocked['step_s']:.3f} | {blocked['infer_s']:.3f} | "
                  f"{one['step_s'] / blocked['step_s']:.2f}x | "
                  f"{one['step_s'] / edges * 1e9:.1f} -> {blocked['step_s'] / edges * 1e9:.1f} "
                  f"| {'; '.join(blocked['chosen'])} |", flush=True)


if __name__ == "__main__":
    main()
