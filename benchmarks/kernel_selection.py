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
from _interleaved import interleaved_median_ms  # noqa: E402
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

RESTRICTIONS = {
    "all": {},
    # LIBXSMM_TARGET=hsw: DGL's libxsmm JIT emits AVX2 code too (like with like).
    "avx2": {"GNNFORGE_ISA": "avx2", "NUMBA_CPU_NAME": "haswell",
             "MKL_ENABLE_INSTRUCTIONS": "AVX2", "LIBXSMM_TARGET": "hsw"},
    "sse2": {"GNNFORGE_ISA": "sse2", "NUMBA_CPU_NAME": "x86-64",
             "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
}


def _dgl():
    """The dgl module, or None with the reason printed (it is a peer, never a dependency)."""
    try:
        import dgl
        return dgl
    except Exception as error:  # noqa: BLE001  (any import failure: report and go on)
        print(f"DGL skipped: cannot import it ({type(error).__name__}: {error})")
        return None


def _methods(graph, width: int, backward: bool, dgl, index_dtype: torch.dtype):
    """name -> zero-argument callable computing copy_u_sum (and its x-gradient) once."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(graph.num_nodes, width, generator=generator).requires_grad_(backward)
    grad = torch.randn(graph.num_nodes, width, generator=generator)
    rowptr, col, _ = graph.csr()
    csr = torch.sparse_csr_tensor(rowptr, col, torch.ones(graph.num_edges), (graph.num_nodes,) * 2)

    def run(function):
        def call():
            out = function()
            if backward:
                torch.autograd.grad(out, x, grad)
        return call

    def forced(name):
        def call():
            with ops.use_backend(name):
                return ops.copy_u_sum(graph, x)
        return call

    methods = {"default": run(lambda: ops.copy_u_sum(graph, x))}
    for name in _cpu_kernels.candidates(KernelClass("copy_lhs", "sum", "float32", "int32", 0)):
        methods[name] = run(forced(name))
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


def grid(workloads, widths, repeats, dgl, min_seconds=0.0):
    graphs = {name: _load(name, shared_datasets_dir()) for name in workloads}
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
        names = list(ms)
        rows.append([name, width, mode, *(f"{ms[m]:.2f}" for m in names), chosen, best,
                     f"{ms['default'] / ms[best]:.2f}",
                     f"{again['default'] / again[best]:.2f}", f"{dgl_best / ms['default']:.2f}x"])
    header = ["workload", "F", "pass", *(f"{m} ms" for m in names), "chosen (fwd; bwd)",
              "fastest candidate", "default / fastest", "default / fastest, again",
              "fastest DGL / default"]
    return header, rows


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
    print(f"\n### copy_u_sum, restriction: {args.restriction}\n")
    print(machine_line(args.restriction))
    print(f"command: python benchmarks/kernel_selection.py --restriction {args.restriction} "
          f"--workloads {args.workloads} --widths {args.widths} --repeats {args.repeats} "
          f"--min-seconds {args.min_seconds}\n")
    header, rows = grid(args.workloads.split(","), [int(w) for w in args.widths.split(",")],
                        args.repeats, dgl, args.min_seconds)
    print_table(header, rows)
    print("\n" + selection_overhead())
    return 0


if __name__ == "__main__":
    sys.exit(main())
