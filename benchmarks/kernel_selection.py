"""Kernel selection on this machine: the default path vs every candidate and vs DGL.

For each cell of the spmm grid (copy_u_sum on R-MAT 2^17/2^21 and Pubmed, F = 16, 64,
256, forward and forward + backward) it times, in one process and run:

- `default`: gnnforge's default CPU path (`auto`: per kernel class, the candidate this
  machine measured fastest; the first call measures if no record exists, and where the
  class's candidates came out close, the first call on the graph times them on it),
- every candidate forced on its own (`native:sse2`, `native:avx2`, `native:avx512`,
  `numba`, `mkl`),
- DGL 2.1's `dgl.ops.copy_u_sum` with libxsmm on (its AVX-512 path, where the CPU has it)
  and off (the generic OpenMP loop every other CPU gets), and `torch.sparse.mm`,

and prints `default / best candidate` (selection target: <= 1.10), the same ratio again
from the default and that candidate re-timed alone side by side (`_CONFIRM_ROUNDS`
rounds), and `fastest DGL / default` (speed target: > 1). Every time is the median of
--repeats rounds (more for cheap cells: --min-seconds) after one warm-up round; a round
runs every method once (interleaved, so drift hits all alike).

Each row also says what bounds the default path's cell (benchmarks/_bandwidth.py, whose
docstring gives the rule; spmm.py reports GB/s the same way):

- `default GB/s`: the bytes a copy_u_sum must move (read x once, write the output once,
  read the int32 CSR; twice that for fwd+bwd) over the default path's time, and
  `of copy bw`: that over this machine's DRAM copy bandwidth (a 256 MiB tensor copy,
  as spmm.py), and `of its level's copy bw`: over the copy bandwidth of the level the
  call's compulsory bytes fit in, the last-level cache (a warm copy of LLC/4 bytes) or
  DRAM (both printed above the table).
- `fastest: graph / address-ordered`: the fastest candidate's time on the graph over
  its time on the graph rewired to the same in- and out-degrees with every gather in
  address order (`_bandwidth.address_ordered`: the same instructions and compulsory
  bytes, forward and backward, with the gathered rows streamed), the two timed in
  the same interleaved rounds.
- `bound` (`_bandwidth.bound`): `bandwidth` where the default path reaches 60% of its
  level's copy bandwidth or more; otherwise `gather latency` where the graph runs at least 1.5x
  slower than its address-ordered twin (a third or more of the time waits on gathered
  rows); otherwise `bandwidth` again where the twin reaches 60% (share x ratio), else
  `instructions` (slow even with streamed reads and far from the copy bandwidth:
  instruction throughput and per-call overheads bound it).

    python benchmarks/kernel_selection.py                      # this machine, all candidates
    python benchmarks/kernel_selection.py --restrictions       # also as if without AVX-512 / AVX2

`--restrictions` re-runs the grid in fresh processes with the candidates restricted to
AVX2 (GNNFORGE_ISA=avx2, NUMBA_CPU_NAME=haswell, MKL_ENABLE_INSTRUCTIONS=AVX2; DGL's
libxsmm likewise, LIBXSMM_TARGET=hsw) and to
SSE2 (GNNFORGE_ISA=sse2, NUMBA_CPU_NAME=x86-64, MKL_ENABLE_INSTRUCTIONS=SSE4_2), standing
in for machines without AVX-512 or with slow wide vectors; each restriction has its own
tuning record, so the default path measures again there. Run it in a venv that has DGL
and PyG (../shared/peers/install_peers.sh VENV) with gnnforge on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bandwidth import (  # noqa: E402
    address_ordered,
    bound,
    compulsory_bytes,
    copy_bandwidth_gbs,
    effective_gbs,
    level,
)
from _interleaved import interleaved_median_ms  # noqa: E402
from _restrictions import RESTRICTIONS  # noqa: E402
from spmm import _load  # noqa: E402  (the same workloads as spmm.py)

import gnnforge.ops as ops  # noqa: E402
from gnnforge.data import shared_datasets_dir  # noqa: E402
from gnnforge.ops import (  # noqa: E402
    _calibration,
    _cpu_kernels,
    _kernel_class,
    _trials,
    _tuning_record,
)
from gnnforge.ops._kernel_class import KernelClass  # noqa: E402

def _dgl():
    """The dgl module, or None with the reason printed (it is a peer, never a dependency)."""
    try:
        import dgl
        return dgl
    except Exception as error:  # noqa: BLE001  (any import failure: report and go on)
        print(f"DGL skipped: cannot import it ({type(error).__name__}: {error})")
        return None


def _inputs(num_nodes: int, width: int, backward: bool):
    """x [num_nodes, width] (a leaf needing its gradient for fwd+bwd) and the upstream
    gradient, seeded: every method of a cell gets the same values."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(num_nodes, width, generator=generator).requires_grad_(backward)
    grad = torch.randn(num_nodes, width, generator=generator)
    return x, grad


def _pass(function, x, grad, backward: bool):
    """Zero-argument callable: `function()` and, for fwd+bwd, x's gradient through it."""
    def call():
        out = function()
        if backward:
            torch.autograd.grad(out, x, grad)
    return call


def _forced(name: str, graph, x):
    """copy_u_sum on one candidate; its backward runs on the same candidate (the backend
    is fixed when the forward runs)."""
    def call():
        with ops.use_backend(name):
            return ops.copy_u_sum(graph, x)
    return call


def _methods(graph, width: int, backward: bool, dgl, index_dtype: torch.dtype):
    """name -> zero-argument callable computing copy_u_sum (and its x-gradient) once."""
    x, grad = _inputs(graph.num_nodes, width, backward)
    rowptr, col, _ = graph.csr()
    csr = torch.sparse_csr_tensor(rowptr, col, torch.ones(graph.num_edges), (graph.num_nodes,) * 2)

    def run(function):
        return _pass(function, x, grad, backward)

    methods = {"default": run(lambda: ops.copy_u_sum(graph, x))}
    for name in _cpu_kernels.candidates(KernelClass("copy_lhs", "sum", "float32", "int32", 0)):
        methods[name] = run(_forced(name, graph, x))
    methods["sparse.mm"] = run(lambda: torch.sparse.mm(csr, x))
    if dgl is not None:
        src, dst = graph.coo()
        dgl_graph = dgl.graph((src, dst), num_nodes=graph.num_nodes, idtype=index_dtype)
        dgl_graph.create_formats_()

        def with_libxsmm(enabled):
            def call():
                dgl.use_libxsmm(enabled)
                return dgl.ops.copy_u_sum(dgl_graph, x)
            return call

        methods["dgl"] = run(with_libxsmm(True))
        methods["dgl generic"] = run(with_libxsmm(False))
        dgl.use_libxsmm(True)
    return methods


def gather_ratio(graph, ordered, width: int, backward: bool, name: str, repeats: int,
                 min_seconds: float) -> float:
    """Candidate `name`'s time on `graph` over its time on `ordered`
    (`_bandwidth.address_ordered(graph)`: the same degrees, gathers in address order),
    the two timed in the same interleaved rounds."""
    x, grad = _inputs(graph.num_nodes, width, backward)
    ms = interleaved_median_ms({
        "graph": _pass(_forced(name, graph, x), x, grad, backward),
        "ordered": _pass(_forced(name, ordered, x), x, grad, backward),
    }, repeats, min_seconds)
    return ms["graph"] / ms["ordered"]


def _chosen(kernel_class: KernelClass, work: int, new_trials: list[dict]) -> str:
    """What the default path ran for `kernel_class` on a cell's first call of a graph: the
    winner of its trial on the real input (`_trials`), else the class's verdict for that
    size or its calibrated choice."""
    for trial in new_trials:
        if trial["class"] == kernel_class.key():
            return f"{trial['choice']} (trial)"
    return _class_choice(kernel_class, work)


def _class_choice(kernel_class: KernelClass, work: int) -> str:
    """What a call of `kernel_class` gathering `work` elements runs on a graph without its
    own trial: the trials' verdict for that size, else the calibrated choice."""
    calibrated = _calibration.choice(kernel_class, _cpu_kernels)
    return _trials.class_choice(kernel_class, calibrated, work)


# Rounds of the re-timing of the default path against the cell's fastest candidate alone:
# with eight methods in a round, a cell whose default runs the fastest candidate's own
# kernel still reads up to 1.3x apart (drift between their slots); two methods timed
# side by side again tell a selection miss from that noise.
_CONFIRM_ROUNDS = 15


def grid(workloads, widths, repeats, dgl, min_seconds=0.0, bandwidth=None):
    """The table: one row per (workload, F, pass). `bandwidth`: level ('DRAM', 'LLC') ->
    measured copy bandwidth in GB/s (`copy_bandwidths`), for the default path's shares."""
    bandwidth = bandwidth or {"DRAM": float("nan"), "LLC": float("nan")}
    graphs = {name: _load(name, shared_datasets_dir()) for name in workloads}
    ordered = {name: address_ordered(graph) for name, graph in graphs.items()}
    cells = [(name, width, mode) for name in workloads for width in widths
             for mode in ("fwd", "fwd+bwd")]
    rows, names, decided = [], None, {}
    for name, width, mode in tqdm(cells, desc="copy_u_sum cells", file=sys.stderr):
        methods = _methods(graphs[name], width, mode == "fwd+bwd", dgl, torch.int32)
        trials_before = len(_trials.trial_results())
        ms = interleaved_median_ms(methods, repeats, min_seconds)
        candidates = [m for m in ms if m not in ("default", "sparse.mm", "dgl", "dgl generic")]
        best = min(candidates, key=ms.get)
        dgl_best = min((ms[m] for m in ("dgl", "dgl generic") if m in ms), default=float("nan"))
        kernel_class = KernelClass(
            "copy_lhs", "sum", "float32", "int32", _kernel_class.width_class(width, torch.float32),
            _kernel_class.size_class(graphs[name].num_nodes * width * 4))
        # The forward is decided in the cell's "fwd" row; a "fwd+bwd" row's new trial (if
        # any) is the backward's, on the transposed graph.
        work = graphs[name].num_edges * width
        chosen = _chosen(kernel_class, work, _trials.trial_results()[trials_before:])
        if mode == "fwd":
            decided[(name, width)] = chosen
        else:
            chosen = f"{decided.get((name, width), '?')}; bwd {chosen}"
        again = interleaved_median_ms({"default": methods["default"], best: methods[best]},
                                      _CONFIRM_ROUNDS, min_seconds)
        num_bytes = compulsory_bytes(graphs[name], width, mode == "fwd+bwd")
        gbs = effective_gbs(num_bytes, ms["default"])
        where = level(num_bytes, _kernel_class.last_level_cache_bytes())
        share = gbs / bandwidth[where]
        # The probe runs after `chosen` is read; forced candidates hold no trials anyway.
        ratio = gather_ratio(graphs[name], ordered[name], width, mode == "fwd+bwd", best,
                             repeats, min_seconds)
        names = list(ms)
        rows.append([name, width, mode, *(f"{ms[m]:.2f}" for m in names), chosen, best,
                     f"{ms['default'] / ms[best]:.2f}",
                     f"{again['default'] / again[best]:.2f}", f"{dgl_best / ms['default']:.2f}x",
                     f"{gbs:.1f}", f"{gbs / bandwidth['DRAM']:.0%}", f"{where} {share:.0%}",
                     f"{ratio:.2f}", bound(share, ratio)])
    header = ["workload", "F", "pass", *(f"{m} ms" for m in names), "chosen (fwd; bwd)",
              "fastest candidate", "default / fastest", "default / fastest, again",
              "fastest DGL / default", "default GB/s", "of copy bw", "of its level's copy bw",
              "fastest: graph / address-ordered", "bound"]
    return header, rows


def copy_bandwidths(repeats: int) -> dict[str, float]:
    """Copy bandwidth in GB/s at each memory level a cell's bytes can live in: DRAM (as
    spmm.py measures it) and the last-level cache (source and target a quarter of it
    each; 20x the rounds, as such a copy takes well under a millisecond)."""
    cache_copy_bytes = _kernel_class.last_level_cache_bytes() // 4
    return {"DRAM": copy_bandwidth_gbs(repeats),
            "LLC": copy_bandwidth_gbs(20 * repeats + 1, cache_copy_bytes)}


def selection_overhead(repeats: int = 3000) -> str:
    """Per-call cost of choosing (classify + one dict lookup) on a tiny graph, where the
    kernel itself is a few microseconds: default path vs its own choice forced."""
    from gnnforge.graph import Graph

    generator = torch.Generator().manual_seed(0)
    graph = Graph(torch.randint(0, 100, (300,), generator=generator),
                  torch.randint(0, 100, (300,), generator=generator), 100)
    x = torch.randn(100, 16, generator=generator)
    ops.copy_u_sum(graph, x)
    chosen = _class_choice(KernelClass("copy_lhs", "sum", "float32", "int32", 1),
                           graph.num_edges * 16)

    def per_call_us(function):
        function()
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(repeats):
                function()
            samples.append((time.perf_counter() - start) / repeats * 1e6)
        return min(samples)

    def forced():
        with ops.use_backend(chosen):
            return per_call_us(lambda: ops.copy_u_sum(graph, x))

    defaults, directs = [], []
    for _ in range(3):     # alternated, the best of each
        defaults.append(per_call_us(lambda: ops.copy_u_sum(graph, x)))
        directs.append(forced())
    default, direct = min(defaults), min(directs)
    return (f"selection overhead (100 nodes, 300 edges, F=16 forward, best of 5 x {repeats} "
            f"calls): default {default:.1f} us/call, its choice {chosen} forced "
            f"{direct:.1f} us/call")


def print_table(header, rows) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")


def machine_line(restriction: str) -> str:
    fingerprint = _tuning_record.machine_fingerprint()
    return (f"machine: {fingerprint['cpu_model']} ({platform.machine()}), "
            f"{fingerprint['cores']} cores, {torch.get_num_threads()} threads, "
            f"restriction {restriction}, torch {torch.__version__}, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="rmat,pubmed")
    parser.add_argument("--widths", default="16,64,256")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per cell (>= 5)")
    parser.add_argument("--min-seconds", type=float, default=1.0,
                        help="extend cheap cells' rounds until the timed calls of all "
                        "methods add up to this many seconds (odd count, at most 101 rounds)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--restriction", choices=tuple(RESTRICTIONS), default="all",
                        help="(set by --restrictions for its child runs)")
    parser.add_argument("--restrictions", action="store_true",
                        help="also run the grid restricted to AVX2 and to SSE2")
    args = parser.parse_args(argv)
    if args.restrictions:
        for restriction, env in RESTRICTIONS.items():
            command = [sys.executable, __file__, "--workloads", args.workloads, "--widths",
                       args.widths, "--repeats", str(args.repeats), "--min-seconds",
                       str(args.min_seconds), "--threads",
                       str(args.threads), "--restriction", restriction]
            subprocess.run(command, env={**os.environ, **env}, check=True)
        return 0
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message="Sparse")  # torch's beta notice for CSR tensors
    if shared_datasets_dir() is None:
        print("kernel_selection: the shared datasets folder is absent (R-MAT and Pubmed live "
              "there); set GNNFORGE_DATASETS")
        return 0
    dgl = _dgl()
    bandwidth = copy_bandwidths(args.repeats)
    print(f"\n### copy_u_sum, restriction: {args.restriction}\n")
    print(machine_line(args.restriction))
    print(f"copy bandwidth (read + write): DRAM {bandwidth['DRAM']:.1f} GB/s (a 256 MiB "
          f"tensor copy), LLC {bandwidth['LLC']:.1f} GB/s (a warm copy of LLC/4 bytes, "
          f"LLC {_kernel_class.last_level_cache_bytes() / 2**20:.0f} MiB)")
    print(f"command: python benchmarks/kernel_selection.py --restriction {args.restriction} "
          f"--workloads {args.workloads} --widths {args.widths} --repeats {args.repeats} "
          f"--min-seconds {args.min_seconds}\n")
    header, rows = grid(args.workloads.split(","), [int(w) for w in args.widths.split(",")],
                        args.repeats, dgl, args.min_seconds, bandwidth)
    print_table(header, rows)
    print("\n" + selection_overhead())
    return 0


if __name__ == "__main__":
    sys.exit(main())
