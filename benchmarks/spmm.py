"""Aggregation kernels side by side: gnnforge.ops vs torch.sparse.mm (MKL), PyG, scipy, DGL.

Prints markdown tables (ms, speed-up over torch.sparse.mm, the issue's target with
PASS/MISS, effective GB/s and its fraction of this machine's measured copy bandwidth,
peak memory). Every time is the median of --repeats runs after one warm-up run.

    python benchmarks/spmm.py --quick          # R-MAT and Pubmed, F = 16/64/256
    python benchmarks/spmm.py                  # every workload

Peak memory: Linux's resident-set high-water mark (VmHWM) is reset through
/proc/self/clear_refs right before a call of a method, and the peak is VmHWM minus the
resident set just before the call, the smallest over PEAK_CALLS calls (PyG's fwd+bwd on
Pubmed F=256 read 128 MiB in some runs and 216 MiB in others, one more [E, F] array
alive, while it needs 128 MiB: the minimum is what a method needs, not what it
happened to hold): every byte the call touched, from any allocator
(torch, numpy, numba), output included. "n/a" where /proc or glibc is unavailable. For
that one call glibc is told (mallopt, after malloc_trim returns free heap pages) to map
every buffer of 64 KiB or more afresh, and gnnforge's pool of reused kernel outputs is
emptied (`gnnforge.ops.empty_cache()`); otherwise freed memory is reused without raising
the resident set and the peak reads as 0.

Timed runs use glibc's warmed-up thresholds instead (buffers below 32 MiB reused from
the heap), as a training loop sees them. With every buffer freshly mapped, each output
pays its page faults (about 1.2 us per 4 KiB page on this VM: Pubmed F=64 copy_u_sum
2.56 ms against 0.33 ms for its kernel), which then dominates the small graphs for every
method. gnnforge's native kernels take outputs of 1 MiB or more from their own pool of
reused buffers (gnnforge/ops/_buffers.py), so they pay those faults once, not per call;
the peers get what glibc gives them. `--fresh-pages` times the old way (the whole run under
MALLOC_MMAP_THRESHOLD_=65536), for comparison with the earlier tables.

Pubmed comes from `gnnforge.data.load_dataset('pubmed', symmetrize=True, dedup=True,
self_loops='remove')`: 19,717 nodes, 88,648 edges, the graph the issue's targets name.
"""

from __future__ import annotations

import argparse
import ctypes
import gzip
import io
import os
import sys
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse
import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bandwidth import (  # noqa: E402
    compulsory_bytes,
    copy_bandwidth_gbs,
    effective_gbs,
    median_ms,
)

import gnnforge.ops as ops  # noqa: E402
from gnnforge.data import grid_2d, load_dataset, shared_datasets_dir, uniform_random  # noqa: E402
from gnnforge.graph import Graph  # noqa: E402

# Speed-up over torch.sparse.mm that DGL 2.x reached on a machine like this (the issue).
TARGETS = {
    ("rmat", "fwd", 16): 1.90, ("rmat", "fwd", 64): 1.74, ("rmat", "fwd+bwd", 16): 18.2,
    ("pubmed", "fwd", 16): 1.64, ("pubmed", "fwd", 64): 1.31, ("pubmed", "fwd", 256): 1.81,
    ("pubmed", "fwd+bwd", 16): 6.8, ("pubmed", "fwd+bwd", 64): 4.65,
    ("pubmed", "fwd+bwd", 256): 2.74,
}
ALL_WORKLOADS = ("rmat", "pubmed", "grid_shuffled", "grid_rowmajor", "uniform", "github",
                 "slashdot", "luxembourg_osm")
QUICK_WORKLOADS = ("rmat", "pubmed")
PEAK_CALLS = 3  # peak memory: the smallest of this many calls (module docstring)


# ----------------------------------------------------------------------------- workloads


def _symmetrised(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> Graph:
    src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    keep = src != dst
    keys = np.unique(src[keep].astype(np.int64) * num_nodes + dst[keep])
    return Graph(torch.from_numpy(keys % num_nodes), torch.from_numpy(keys // num_nodes),
                 num_nodes)


def _load(name: str, root: Path | None) -> Graph:
    if name == "grid_rowmajor":
        return grid_2d(1000, 1000)
    if name == "grid_shuffled":
        return grid_2d(1000, 1000, shuffle=True, seed=0)
    if name == "uniform":
        return uniform_random(100_000, 2_000_000, seed=0)
    if root is None:
        raise FileNotFoundError("shared datasets folder not found (set GNNFORGE_DATASETS)")
    if name == "rmat":
        data = np.load(root / "synthetic" / "rmat_s17_e21.npz")
        return Graph(torch.from_numpy(data["src"].astype(np.int64)),
                     torch.from_numpy(data["dst"].astype(np.int64)), int(data["num_nodes"]))
    if name == "pubmed":
        dataset = load_dataset("pubmed", root, symmetrize=True, dedup=True,
                               self_loops="remove")
        return Graph(dataset.graph.src, dataset.graph.dst, dataset.graph.num_nodes)
    if name == "github":
        edges = np.loadtxt(root / "musae_github" / "git_edges.csv.gz", delimiter=",",
                           skiprows=1, dtype=np.int64)
        return _symmetrised(edges[:, 0], edges[:, 1], int(edges.max()) + 1)
    if name == "slashdot":
        edges = np.loadtxt(root / "snap_soc_slashdot0902" / "soc-Slashdot0902.txt.gz",
                           comments="#", dtype=np.int64)
        return Graph(torch.from_numpy(edges[:, 0]), torch.from_numpy(edges[:, 1]),
                     int(edges.max()) + 1)
    if name == "luxembourg_osm":
        with gzip.open(root / "suitesparse_luxembourg_osm" / "luxembourg_osm.mtx.gz") as handle:
            matrix = scipy.io.mmread(io.BytesIO(handle.read())).tocoo()
        return _symmetrised(matrix.row.astype(np.int64), matrix.col.astype(np.int64),
                            matrix.shape[0])
    raise ValueError(f"unknown workload {name!r}; choose from {ALL_WORKLOADS}")


# ----------------------------------------------------------------------------- measuring


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field):
                return int(line.split()[1])
    raise KeyError(field)


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc mallopt parameters


def _glibc():
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def _thresholds(mmap_bytes: int, trim_bytes: int) -> bool:
    """Set glibc's mmap and trim thresholds; False where glibc is not the allocator."""
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(_M_MMAP_THRESHOLD, mmap_bytes)
                and libc.mallopt(_M_TRIM_THRESHOLD, trim_bytes))


def _timing_allocator() -> None:
    # glibc's dynamic thresholds once warmed up: mmap at 32 MiB, trim at twice that.
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        _thresholds(32 * 2**20, 64 * 2**20)


def _peak_mib(function) -> float | None:
    """Smallest resident-set high-water mark of PEAK_CALLS calls above the set before each."""
    fresh = "MALLOC_MMAP_THRESHOLD_" in os.environ or _thresholds(65536, 128 * 2**10)
    if not fresh:
        return None
    try:
        return min(_one_peak_mib(function) for _ in range(PEAK_CALLS))
    except OSError:
        return None
    finally:
        _timing_allocator()


def _one_peak_mib(function) -> float:
    ops.empty_cache()  # gnnforge's reused output buffers: the call allocates afresh
    if _glibc() is not None:
        _glibc().malloc_trim(0)  # free heap pages back to the OS: re-use is then counted
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")
    before = _status_kib("VmRSS:")
    function()
    return (_status_kib("VmHWM:") - before) / 1024


# ----------------------------------------------------------------------------- peers


def _peers(graph: Graph, width: int, backward: bool):
    """name -> zero-argument callable running copy_u_sum (and its x-gradient) once."""
    from torch_geometric.utils import scatter

    num_nodes = graph.num_nodes
    rowptr, col, _ = graph.csr()
    csr = torch.sparse_csr_tensor(rowptr, col, torch.ones(graph.num_edges), (num_nodes,) * 2)
    scipy_csr = scipy.sparse.csr_matrix(
        (np.ones(graph.num_edges, np.float32), col.numpy(), rowptr.numpy()), (num_nodes,) * 2)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(num_nodes, width, generator=generator).requires_grad_(backward)
    grad = torch.randn(num_nodes, width, generator=generator)
    x_numpy, grad_numpy = x.detach().numpy(), grad.numpy()
    src, dst = graph.coo()

    def torch_call(function):
        def run():
            out = function()
            if backward:
                torch.autograd.grad(out, x, grad)
        return run

    def scipy_run():
        scipy_csr @ x_numpy
        if backward:
            scipy_csr.T @ grad_numpy

    return {
        "gnnforge": torch_call(lambda: ops.copy_u_sum(graph, x)),
        "sparse.mm": torch_call(lambda: torch.sparse.mm(csr, x)),
        "pyg": torch_call(lambda: scatter(x[src], dst, dim=0, dim_size=num_nodes,
                                          reduce="sum")),
        "scipy": scipy_run,
    }


# ----------------------------------------------------------------------------- tables


def _verdict(ratio: float, target: float) -> str:
    return "PASS" if ratio > target else "MISS"


def sum_table(graphs, widths, repeats, bandwidth):
    rows = []
    cells = [(name, width, mode) for name in graphs for width in widths
             for mode in ("fwd", "fwd+bwd")]
    for name, width, mode in tqdm(cells, desc="copy_u_sum", file=sys.stderr):
        graph = graphs[name]
        peers = _peers(graph, width, mode == "fwd+bwd")
        ms = {peer: median_ms(run, repeats) for peer, run in peers.items()}
        peak = {peer: _peak_mib(peers[peer]) for peer in ("gnnforge", "pyg")}
        ratio = ms["sparse.mm"] / ms["gnnforge"]
        target = TARGETS.get((name, mode, width), 1.0)
        gbs = effective_gbs(compulsory_bytes(graph, width, mode == "fwd+bwd"), ms["gnnforge"])
        pyg_speed = ms["pyg"] / ms["gnnforge"]
        pyg_memory = (peak["pyg"] / peak["gnnforge"]
                      if peak["pyg"] and peak["gnnforge"] else float("nan"))
        pyg_verdict = ("" if width != 256 else
                       _verdict(pyg_speed, 10.0 - 1e-9) + "/" + _verdict(pyg_memory, 5.0 - 1e-9))
        rows.append([name, width, mode, f"{ms['gnnforge']:.2f}", f"{ms['sparse.mm']:.2f}",
                     f"{ms['pyg']:.2f}", f"{ms['scipy']:.2f}", f"{ratio:.2f}x",
                     f"{target:.2f}x", _verdict(ratio, target), f"{gbs:.1f}",
                     f"{gbs / bandwidth:.0%}", _mib(peak["gnnforge"]), _mib(peak["pyg"]),
                     f"{pyg_speed:.1f}x / {pyg_memory:.1f}x", pyg_verdict])
    return ["workload", "F", "pass", "gnnforge ms", "sparse.mm ms", "PyG ms", "scipy ms",
            "vs sparse.mm", "target", "", "GB/s", "of copy bw", "peak MiB", "PyG peak MiB",
            "vs PyG time / mem", "PyG targets (F=256)"], rows


def _mib(value):
    return "n/a" if value is None else f"{value:.1f}"


def reduce_table(graphs, widths, repeats):
    rows = []
    cells = [(name, width, reduce) for name in graphs for width in widths
             for reduce in ("mean", "max")]
    for name, width, reduce in tqdm(cells, desc="mean/max", file=sys.stderr):
        graph = graphs[name]
        rowptr, col, _ = graph.csr()
        csr = torch.sparse_csr_tensor(rowptr, col, torch.ones(graph.num_edges),
                                      (graph.num_nodes,) * 2)
        x = torch.randn(graph.num_nodes, width, generator=torch.Generator().manual_seed(1))
        grad = torch.randn_like(x)
        ours = ops.copy_u_mean if reduce == "mean" else ops.copy_u_max
        theirs = "mean" if reduce == "mean" else "amax"
        for mode in ("fwd", "fwd+bwd"):
            leaf = x.clone().requires_grad_(mode == "fwd+bwd")

            def run(function):
                def call():
                    out = function()
                    if mode == "fwd+bwd":
                        torch.autograd.grad(out, leaf, grad)
                return call

            mine = median_ms(run(lambda: ours(graph, leaf)), repeats)
            peer = median_ms(run(lambda: torch.sparse.mm(csr, leaf, theirs)), repeats)
            target = 1.0 if mode == "fwd" else 2.0
            rows.append([name, width, reduce, mode, f"{mine:.2f}", f"{peer:.2f}",
                         f"{peer / mine:.2f}x", f"{target:.1f}x",
                         "PASS" if peer / mine >= target else "MISS"])
    return ["workload", "F", "reduce", "pass", "gnnforge ms", "sparse.mm(reduce) ms",
            "speed-up", "target", ""], rows


def dot_table(graphs, widths, repeats):
    rows = []
    cells = [(name, width) for name in graphs for width in widths]
    for name, width in tqdm(cells, desc="u_dot_v", file=sys.stderr):
        graph = graphs[name]
        src, dst = graph.coo()
        x = torch.randn(graph.num_nodes, width, generator=torch.Generator().manual_seed(2))
        y = torch.randn_like(x)
        mine = median_ms(lambda: ops.u_dot_v(graph, x, y), repeats)
        peer = median_ms(lambda: (x[src] * y[dst]).sum(-1, keepdim=True), repeats)
        rows.append([name, width, f"{mine:.2f}", f"{peer:.2f}", f"{peer / mine:.2f}x", "2.0x",
                     "PASS" if peer / mine >= 2 else "MISS"])
    return ["workload", "F", "gnnforge ms", "gather+mul+sum ms", "speed-up", "target", ""], rows


def floor_table(graphs, repeats, bandwidth):
    if "grid_rowmajor" not in graphs:
        return None
    graph = graphs["grid_rowmajor"]
    x = torch.randn(graph.num_nodes, 256)
    mine = median_ms(lambda: ops.copy_u_sum(graph, x), repeats)
    floor = compulsory_bytes(graph, 256, False) / bandwidth / 1e6
    return ["workload", "F", "gnnforge ms", "bandwidth floor ms", "ratio", "target", ""], [[
        "grid_rowmajor", 256, f"{mine:.2f}", f"{floor:.2f}", f"{mine / floor:.2f}x", "<= 2x",
        "PASS" if mine <= 2 * floor else "MISS"]]


def print_table(title, table):
    if table is None:
        return
    header, rows = table
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")
    sys.stdout.flush()


# ----------------------------------------------------------------------------- main


def main(argv=None) -> int:
    if "--fresh-pages" in sys.argv and "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        os.environ["MALLOC_MMAP_THRESHOLD_"] = "65536"  # see the module docstring
        os.execv(sys.executable, [sys.executable, *sys.argv])
    _timing_allocator()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"only {', '.join(QUICK_WORKLOADS)}")
    parser.add_argument("--workloads", default=None,
                        help=f"comma-separated subset of {','.join(ALL_WORKLOADS)}")
    parser.add_argument("--widths", default="16,64,256", help="comma-separated feature widths")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per cell (>= 5)")
    parser.add_argument("--threads", type=int, default=2, help="torch and numba threads")
    parser.add_argument("--fresh-pages", action="store_true",
                        help="time with MALLOC_MMAP_THRESHOLD_=65536 (every buffer freshly "
                        "mapped), as the tables before 2026-11-21 08:30 UTC were")
    parser.add_argument("--skip", default="", help="comma-separated tables to skip: "
                        "sum,reduce,dot,floor")
    args = parser.parse_args(argv)
    if args.repeats < 5:
        parser.error("--repeats must be at least 5")
    torch.set_num_threads(args.threads)
    import numba
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    names = (args.workloads.split(",") if args.workloads else
             QUICK_WORKLOADS if args.quick else ALL_WORKLOADS)
    widths = [int(w) for w in args.widths.split(",")]
    skip = set(filter(None, args.skip.split(",")))
    try:
        import dgl  # noqa: F401
        print("DGL imported, but this script has no DGL column yet")
    except Exception as error:  # noqa: BLE001 (any import failure means: skip DGL)
        print(f"DGL skipped: {type(error).__name__}: {error}")
    root = shared_datasets_dir()
    graphs = {}
    for name in names:
        try:
            graphs[name] = _load(name, root)
        except FileNotFoundError as error:
            print(f"workload {name} skipped: {error}")
    bandwidth = copy_bandwidth_gbs(args.repeats)
    print(f"threads: {args.threads}; copy bandwidth: {bandwidth:.1f} GB/s (read + write)")
    for name, graph in graphs.items():
        print(f"{name}: {graph.num_nodes} nodes, {graph.num_edges} edges")
    if "sum" not in skip:
        print_table("copy_u_sum (x [N, F] float32), forward and forward + backward",
                    sum_table(graphs, widths, args.repeats, bandwidth))
    if "reduce" not in skip:
        print_table("mean / max vs torch.sparse.mm(reduce=...)",
                    reduce_table(graphs, widths, args.repeats))
    if "dot" not in skip:
        print_table("u_dot_v (g-SDDMM) vs gather + multiply + sum",
                    dot_table(graphs, widths, args.repeats))
    if "floor" not in skip:
        print_table("row-major grid at F=256 vs the memory-bandwidth floor",
                    floor_table(graphs, args.repeats, bandwidth))
    return 0


if __name__ == "__main__":
    sys.exit(main())
