"""Two revisions of gnnforge timed in one run: layers and the default copy_u_sum path.

A refactor must keep values and speed. This script exports each revision's `gnnforge/`
(`git archive`) into a temporary folder, starts one worker process per revision with
that copy first on its path, and times the same cells in every worker in interleaved
rounds (each round visits the cells in a new order and the workers in a new order; each
timed call follows an untimed call of the same cell). A third worker runs the first
revision again: its ratio to the first is the noise of this run, so "within noise" is a
measured statement, not a guess; "after" is compared with the geometric mean of the two
"before" workers.

Cells (the inputs and models of benchmarks/layers.py and benchmarks/kernel_selection.py):
  layer      GCN / GAT / SAGE-mean, 2 layers, on PubMed and GitHub: one training step
             (forward, cross-entropy, backward, Adam) and one inference forward
  copy_u_sum the default (auto-selected) path on R-MAT 2^17/2^21 and PubMed at F = 16,
             64, 256, forward and forward + backward
  dispatch   the default path's per-call cost on a 16-node graph (what a selection layer
             adds to every call)

Workers run with OMP_WAIT_POLICY=PASSIVE (an idle worker's spinning OpenMP threads would
take the cores from the one being timed), and each cell is called until a planned
layer's plan race has locked in (--warmup-calls) before any timing. Every worker reads
and writes one tuning record (a fresh GNNFORGE_CACHE for the run,
calibrated by a process of the first revision that exits before the timed workers start,
so that they start alike), so all run the same kernels
when the revisions' native sources are equal; the script says whether they are. It also
compares each layer's inference output across workers (same seed, same weights).

    python benchmarks/before_after.py --before 0a9e661 --after cf57780
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = Path(__file__).resolve().parent
REPLY = "@@reply "


# ----------------------------------------------------------------------------- worker


def _layer_cells(datasets: list[str], kinds: list[str]) -> dict[str, object]:
    import torch
    from layers import Ours, _step, load

    cells = {}
    for dataset in datasets:
        graph, x, y = load(dataset)
        for kind in kinds:
            torch.manual_seed(0)
            model = Ours(kind, x.shape[1], int(y.max()) + 1)
            train, infer = _step(model, graph, x, y)
            cells[f"layer {dataset} {kind} infer"] = infer
            cells[f"layer {dataset} {kind} train"] = train
    return cells


def _spmm_cells(workloads: list[str], widths: list[int]) -> dict[str, object]:
    import torch
    from spmm import _load

    import gnnforge.ops as ops
    from gnnforge.data import shared_datasets_dir

    cells = {}
    for workload in workloads:
        graph = _load(workload, shared_datasets_dir())
        for width in widths:
            x = torch.randn(graph.num_nodes, width, generator=torch.Generator().manual_seed(0))
            x_grad = x.clone().requires_grad_()

            def forward(graph=graph, x=x):
                return ops.copy_u_sum(graph, x)

            def backward(graph=graph, x=x_grad):
                ops.copy_u_sum(graph, x).sum().backward()
                x.grad = None

            cells[f"copy_u_sum {workload} F={width} fwd"] = forward
            cells[f"copy_u_sum {workload} F={width} fwd+bwd"] = backward
    return cells


def _dispatch_cell() -> dict[str, object]:
    import torch

    import gnnforge.ops as ops
    from gnnforge.graph import Graph

    graph = Graph(torch.arange(16), (torch.arange(16) + 1) % 16, 16)
    x = torch.randn(16, 16)

    def hundred_calls():
        for _ in range(100):
            ops.copy_u_sum(graph, x)

    return {"dispatch 100 calls, 16 nodes": hundred_calls}


def _warm_up(call, calls: int, seconds: float) -> None:
    """Run `call` until a planned layer's race has locked in: `calls` calls, or fewer
    once they took `seconds`."""
    start = time.perf_counter()
    for _ in range(calls):
        call()
        if time.perf_counter() - start > seconds:
            return


def worker(config: dict) -> None:
    """Build every cell, save the layers' inference outputs, then time cells on request."""
    import torch

    sys.path.insert(0, str(BENCHMARKS))
    torch.set_num_threads(config["threads"])
    cells = {**_layer_cells(config["datasets"], config["layers"]),
             **_spmm_cells(config["workloads"], config["widths"]), **_dispatch_cell()}
    outputs = {}
    for name, call in cells.items():
        result = call()  # the first call calibrates, runs trials or starts a plan race
        if name.endswith(" infer"):
            outputs[name] = result
        _warm_up(call, config["warmup_calls"], config["warmup_seconds"])
    torch.save(outputs, config["outputs"])
    print(REPLY + json.dumps(sorted(cells)), flush=True)
    if config.get("warm_up_only"):
        return
    for line in sys.stdin:
        name = json.loads(line)
        call = cells[name]
        call()
        start = time.perf_counter()
        call()
        print(REPLY + json.dumps(time.perf_counter() - start), flush=True)


# ----------------------------------------------------------------------------- driver


class Worker:
    """One revision's worker process and its line protocol."""

    def __init__(self, label: str, source: Path, config: dict, env: dict[str, str]):
        self.label = label
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**env, "PYTHONPATH": str(source)})
        self.cells = self._reply()

    def _reply(self):
        for line in self.process.stdout:
            if line.startswith(REPLY):
                return json.loads(line[len(REPLY):])
        raise RuntimeError(f"worker {self.label} stopped (exit {self.process.wait()})")

    def time(self, cell: str) -> float:
        self.process.stdin.write(json.dumps(cell) + "\n")
        self.process.stdin.flush()
        return self._reply()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def export(revision: str, into: Path) -> Path:
    """`gnnforge/` of `revision` under `into/<revision>` (the folder to put on PYTHONPATH)."""
    target = into / revision
    target.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", revision, "gnnforge"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def native_sources_equal(before: str, after: str) -> bool:
    diff = subprocess.run(["git", "diff", "--quiet", before, after, "--",
                           "gnnforge/ops/_native_src"], cwd=ROOT)
    return diff.returncode == 0


def time_rounds(workers: list[Worker], cells: list[str], rounds: int) -> dict:
    """(worker label, cell) -> median seconds over `rounds` interleaved rounds."""
    times: dict[tuple[str, str], list[float]] = {}
    for round_index in range(rounds):
        order = random.Random(round_index).sample(cells, len(cells))
        for cell in order:
            for worker in random.Random(f"{round_index}{cell}").sample(workers, len(workers)):
                times.setdefault((worker.label, cell), []).append(worker.time(cell))
        print(f"round {round_index + 1}/{rounds}", file=sys.stderr, flush=True)
    return {key: statistics.median(values) for key, values in times.items()}


def max_output_difference(paths: dict[str, Path]) -> float:
    import torch

    loaded = {label: torch.load(path) for label, path in paths.items()}
    first = next(iter(loaded.values()))
    return max(float((other[name] - first[name]).abs().max())
               for other in loaded.values() for name in first)


def _ratios(median: dict, cell: str, labels: list[str]) -> tuple[float, float]:
    """(again / before, after / the geometric mean of the two before workers)."""
    before, again, after = (median[(label, cell)] for label in labels)
    return again / before, after / (before * again) ** 0.5


def print_table(median: dict, cells: list[str], labels: list[str]) -> None:
    before, again, after = labels
    print(f"| cell | {before} ms | {again} ms | {after} ms | noise: again / before |"
          f" after / both befores |")
    print("|---|---:|---:|---:|---:|---:|")
    for cell in cells:
        times = (median[(label, cell)] * 1e3 for label in labels)
        noise, change = _ratios(median, cell, labels)
        print(f"| {cell} | {' | '.join(f'{t:.3f}' for t in times)} | {noise:.3f} |"
              f" {change:.3f} |")


def summary(median: dict, cells: list[str], labels: list[str]) -> str:
    ratios = [_ratios(median, cell, labels) for cell in cells]
    noise = [abs(again - 1) for again, _ in ratios]
    change = [after for _, after in ratios]
    return (f"after / both befores: geometric mean {statistics.geometric_mean(change):.3f}, "
            f"range {min(change):.3f}-{max(change):.3f} over {len(cells)} cells; noise "
            f"(|again / before - 1|): median {statistics.median(noise):.3f}, max "
            f"{max(noise):.3f}; cells where |after / both befores - 1| exceeds the largest "
            f"noise: {sum(abs(r - 1) > max(noise) for r in change)}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="git revision (e.g. a commit); required")
    parser.add_argument("--after", default="HEAD", help="git revision (default HEAD)")
    parser.add_argument("--datasets", default="pubmed,github")
    parser.add_argument("--layers", default="gcn,gat,sage")
    parser.add_argument("--workloads", default="rmat,pubmed")
    parser.add_argument("--widths", default="16,64,256")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup-calls", type=int, default=40,
                        help="untimed calls per cell before timing (a plan race takes up to ~20)")
    parser.add_argument("--warmup-seconds", type=float, default=8.0)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker))
        return 0
    if args.before is None:
        parser.error("--before REVISION is required")
    from gnnforge.data import shared_datasets_dir

    datasets = shared_datasets_dir()
    if datasets is None:
        print("before_after: the shared datasets folder is absent; set GNNFORGE_DATASETS")
        return 0
    with tempfile.TemporaryDirectory(prefix="gnnforge-ab-") as scratch:
        scratch = Path(scratch)
        # the exported copies are not beside ../shared: name the datasets folder
        # Idle workers must not spin: OpenMP threads that wait actively after a call would
        # take the cores from the worker being timed (3 workers, 2 threads each).
        env = {**os.environ, "GNNFORGE_CACHE": str(scratch / "cache"),
               "GNNFORGE_DATASETS": str(datasets), "OMP_WAIT_POLICY": "PASSIVE"}
        sources = {"before": export(args.before, scratch), "after": export(args.after, scratch)}
        labels = [f"before ({args.before})", f"before again ({args.before})",
                  f"after ({args.after})"]
        config = {"threads": args.threads, "datasets": args.datasets.split(","),
                  "layers": args.layers.split(","), "workloads": args.workloads.split(","),
                  "widths": [int(w) for w in args.widths.split(",")],
                  "warmup_calls": args.warmup_calls, "warmup_seconds": args.warmup_seconds}
        # A first process calibrates the shared record and exits, so that the three timed
        # workers start alike (the calibrating process's allocator has grown its
        # thresholds on the calibration's buffers and timed up to 1.3x faster).
        print("calibrating", file=sys.stderr, flush=True)
        Worker("calibration", sources["before"], {**config, "warm_up_only": True,
                                                  "outputs": str(scratch / "calibration.pt")},
               env).close()
        workers, outputs = [], {}
        for label, source in zip(labels, (sources["before"], sources["before"],
                                          sources["after"])):
            outputs[label] = scratch / f"outputs-{len(workers)}.pt"
            print(f"starting {label}", file=sys.stderr, flush=True)
            workers.append(Worker(label, source, {**config, "outputs": str(outputs[label])},
                                  env))
        cells = workers[0].cells
        start = time.perf_counter()
        median = time_rounds(workers, cells, args.rounds)
        for one in workers:
            one.close()
        print(f"threads: {args.threads}; {args.rounds} interleaved rounds in "
              f"{time.perf_counter() - start:.0f} s; native sources "
              f"{'equal' if native_sources_equal(args.before, args.after) else 'DIFFER'} "
              f"between the revisions; largest |difference| of the layers' inference "
              f"outputs across the workers: {max_output_difference(outputs):.1e}\n")
        print_table(median, cells, labels)
        print()
        print(summary(median, [c for c in cells if c.startswith("layer")], labels)
              .replace("after", "layers: after", 1))
        print(summary(median, [c for c in cells if not c.startswith("layer")], labels)
              .replace("after", "kernels and dispatch: after", 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
