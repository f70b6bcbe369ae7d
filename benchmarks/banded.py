"""Training throughput of a GGNN on program graphs: sparse vs banded propagation.

For each block size S, VarMisuse examples (program graphs of the standard library with
hole and candidate nodes, P = 16 edge types) are RCM-reordered and packed into
supergraphs of N = K*S node slots (N fixed, so every S sees the same batches' sizes).
One training step (GGNN with T steps, linear candidate readout, softmax loss, backward,
Adam) is timed with sparse propagation over all edges and with banded propagation over
the kept edges, on the same batches, interleaved; we report the median of the repeats
after a warm-up, as graphs per second, and their ratio. Block tensors are built before
timing (compilation is a one-time preprocessing step, as in the paper). Also printed: the
edge fraction kept at each S and the paper's cost model per propagation step (dense N^2
vs banded 3NS multiply-adds per feature and type; sparse E).

GPU rows (fp32/TF32 and bf16) run only when CUDA is available; otherwise the script says
that they were skipped and why.

    PYTHONPATH=. python benchmarks/banded.py --max-files 30 --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from gnnforge.banded import compile_blocks, compile_dataset, supergraph_batch
from gnnforge.data import program_graphs
from gnnforge.graph import GraphBatch
from gnnforge.train import VarMisuseModel, varmisuse_examples
from gnnforge.train._varmisuse import candidate_loss
from gnnforge.train._varmisuse_data import VARMISUSE_EDGE_TYPES


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-files", type=int, default=30, help="standard-library files")
    parser.add_argument("--sizes", default="64,128,256,512", help="block sizes S")
    parser.add_argument("--num-slots", type=int, default=1024, help="N = K*S slots per batch")
    parser.add_argument("--hidden", type=int, default=128, help="H")
    parser.add_argument("--steps", type=int, default=8, help="T propagation steps")
    parser.add_argument("--batches", type=int, default=3, help="distinct batches cycled")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats (median)")
    # One thread by default: on a shared, oversubscribed 2-core machine two OpenMP threads
    # spin and get descheduled, making every step ~10x slower than one thread.
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def train_step(model, optimizer, batch, structure, autocast_dtype=None) -> None:
    device_type = batch.device.type
    with torch.autocast(device_type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
        loss, _, _ = candidate_loss(model(batch, structure).float(), batch)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def time_steps(model, optimizer, work, repeats, device, autocast_dtype=None) -> float:
    """Median seconds of one pass over `work` (a list of (batch, structure)), every step
    under autocast to `autocast_dtype` when given (the bf16 rows)."""
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()
    for batch, structure in work:  # warm-up
        train_step(model, optimizer, batch, structure, autocast_dtype)
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        for batch, structure in work:
            train_step(model, optimizer, batch, structure, autocast_dtype)
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def to_device(batch: GraphBatch, device: torch.device) -> GraphBatch:
    if device.type == "cpu":
        return batch
    return GraphBatch._make(batch.to(device), batch.graph_ptr.to(device),
                            batch.edge_ptr.to(device), batch.graph_mask.to(device))


def measure(examples, size, args, device, autocast_dtype=None):
    compiled = compile_dataset(examples.graphs, size, args.num_slots // size,
                               num_edge_types=len(VARMISUSE_EDGE_TYPES), progress=False)
    groups = list(range(min(args.batches, len(compiled.supergraphs))))
    batches = [to_device(supergraph_batch([compiled.graphs[i] for i in compiled.supergraphs[g]],
                                          compiled.num_slots), device) for g in groups]
    blocks = [compile_blocks(b, size, compiled.num_edge_types, compiled.num_blocks)
              for b in batches]
    graphs = sum(b.num_real_graphs for b in batches)
    edges = statistics.mean(b.num_edges for b in batches)
    result = dict(S=size, K=compiled.num_blocks, kept=compiled.kept_fraction(),
                  skipped=len(compiled.skipped), edges=edges)
    for backend, structures in (("sparse", batches), ("banded", blocks)):
        torch.manual_seed(args.seed)
        model = VarMisuseModel(examples.num_labels, args.hidden, args.steps).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        seconds = time_steps(model, optimizer, [(b, s) for b, s in zip(batches, structures)],
                             args.repeats, device, autocast_dtype)
        result[backend] = graphs / seconds
    return result


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    sizes = [int(s) for s in args.sizes.split(",")]
    corpus = program_graphs(max_files=args.max_files, progress=False)
    examples = varmisuse_examples(corpus, args.steps, seed=args.seed, progress=False)
    print(corpus.report())
    print(examples.report())
    print(f"H={args.hidden} T={args.steps} P={len(VARMISUSE_EDGE_TYPES)} N={args.num_slots} "
          f"slots per batch, {args.batches} batches, median of {args.repeats} after warm-up, "
          f"{args.threads} CPU threads")
    devices = [(torch.device("cpu"), "fp32", None)]
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = True
        devices += [(torch.device("cuda"), "fp32/TF32", None),
                    (torch.device("cuda"), "bf16", torch.bfloat16)]
    else:
        print("GPU rows skipped: torch.cuda.is_available() is False (no CUDA device here)")
    print("\n| device | precision | S | K | edges kept | sparse graphs/s | banded graphs/s "
          "| banded / sparse |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for device, precision, dtype in devices:
        for size in sizes:
            r = measure(examples, size, args, device, dtype)
            rows.append(r)
            print(f"| {device.type} | {precision} | {size} | {r['K']} | {r['kept']:.4%} | "
                  f"{r['sparse']:.1f} | {r['banded']:.1f} | {r['banded'] / r['sparse']:.2f}x |",
                  flush=True)
    print("\nCost model per propagation step and feature/type (multiply-adds):")
    print("| S | N | dense N^2 | banded 3NS | sparse E | dense / banded = N/(3S) |")
    print("|---|---|---|---|---|---|")
    for r in rows[: len(sizes)]:
        n = args.num_slots
        print(f"| {r['S']} | {n} | {n * n:,} | {3 * n * r['S']:,} | {r['edges']:,.0f} | "
              f"{n / (3 * r['S']):.2f} |")


if __name__ == "__main__":
    main()
