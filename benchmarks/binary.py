"""The binary-reduce / SDDMM / edge-softmax grid: gnnforge's native kernels vs DGL 2.x.

Each op forward and forward+backward on Pubmed and on R-MAT 2^16 nodes / 2^20 edges, F=64
(H=4 heads of 16 for the per-head ops), against DGL in the same run (default settings and
with `dgl.use_libxsmm(False)`) and gnnforge's numba backend (what the native backend ran
for these ops before). Every time is the median of --repeats rounds after one warm-up round;
ratios are DGL's time over gnnforge's (above 1: gnnforge faster). The methods are timed in
interleaved rounds, each timed call right after an untimed call of the same method
(benchmarks/_interleaved.py).

    PYTHONPATH=$PWD /work/bench-venv/bin/python benchmarks/binary.py
    PYTHONPATH=$PWD /work/bench-venv/bin/python benchmarks/binary.py --variant sse2

`gnnforge` is the default path (backend `auto`: per kernel class the candidate measured
fastest here), `native` the native library's widest build, or with `--variant V` the
build `native:V` for every kernel.
DGL columns are skipped, with the reason printed, where DGL cannot be imported.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

import gnnforge.ops as ops
from gnnforge.data import load_dataset, rmat, shared_datasets_dir
from gnnforge.graph import Graph

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _interleaved import interleaved_median_ms  # noqa: E402

WIDTH, HEADS = 64, 4


def _graphs(names):
    for name in names:
        if name == "rmat16":
            yield "R-MAT 2^16/2^20", rmat(16, 2**20, seed=0)
        elif name == "pubmed":
            dataset = load_dataset("pubmed", shared_datasets_dir(), symmetrize=True,
                                   dedup=True, self_loops="remove")
            graph = dataset.graph
            yield "Pubmed", Graph(graph.src, graph.dst, graph.num_nodes)
        else:
            raise ValueError(f"unknown graph {name!r}")


def _inputs(graph: Graph) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    n, e, d = graph.num_nodes, graph.num_edges, WIDTH // HEADS

    def rand(*shape, positive=False):
        data = torch.randn(*shape, generator=generator)
        return data.abs() + 0.5 if positive else data

    return {"x": rand(n, WIDTH), "y": rand(n, WIDTH, positive=True), "e": rand(e, WIDTH),
            "w": rand(e, 1), "xh": rand(n, HEADS, d), "yh": rand(n, HEADS, d),
            "a": rand(e, HEADS, 1)}


# name -> (input names, gnnforge call, DGL call); each call takes (graph, *inputs)
OPS = {
    "u_mul_e_sum [E,F]": (("x", "e"), ops.u_mul_e_sum, "u_mul_e_sum"),
    "u_mul_e_sum [E,1]": (("x", "w"), ops.u_mul_e_sum, "u_mul_e_sum"),
    "u_mul_e_sum [E,H,1]": (("xh", "a"), ops.u_mul_e_sum, "u_mul_e_sum"),
    "u_add_e_max [E,F]": (("x", "e"), ops.u_add_e_max, "u_add_e_max"),
    "u_dot_v [N,H,D]": (("xh", "yh"), ops.u_dot_v, "u_dot_v"),
    "u_add_v [N,F]": (("x", "x"), ops.u_add_v, "u_add_v"),
    "edge_softmax [E,H,1]": (("a",), ops.edge_softmax, "edge_softmax"),
    "e_div_v [E,F]/[N,F]": (("e", "y"), ops.e_div_v, "e_div_v"),
}



def _runner(call, graph, tensors, backward: bool):
    leaves = [t.detach().clone().requires_grad_(backward) for t in tensors]
    upstream = {}

    def run():
        out = call(graph, *leaves)
        if backward:
            if "grad" not in upstream:
                upstream["grad"] = torch.randn_like(out)
            torch.autograd.grad(out, leaves, upstream["grad"])
    return run


def _dgl():
    try:
        import dgl
        import dgl.ops
        return dgl, None
    except Exception as error:  # noqa: BLE001 (any import failure is a reason to skip)
        return None, f"{type(error).__name__}: {error}"


def _dgl_call(dgl, name):
    if name == "edge_softmax":
        return lambda graph, logits: dgl.ops.edge_softmax(graph, logits)
    return getattr(dgl.ops, name)


def _dgl_graph(dgl, graph: Graph):
    src, dst = graph.coo()
    result = dgl.graph((src, dst), num_nodes=graph.num_nodes)
    result.create_formats_()  # CSR and CSC built once, as gnnforge caches them
    return result


def _methods(dgl, graph, dgl_graph, names, backend):
    """method name -> callable(call_gnnforge, dgl_name, tensors, backward); `backend` is
    the native backend name of the 'native' column."""
    def ours(backend_name):
        def make(call, _, tensors, backward):
            inner = _runner(call, graph, tensors, backward)

            def run():
                with ops.use_backend(backend_name):
                    inner()
            return run
        return make

    methods = {"gnnforge": ours("auto"), "native": ours(backend), "numba": ours("numba")}
    if dgl is not None:
        def theirs(libxsmm):
            def make(_, name, tensors, backward):
                inner = _runner(_dgl_call(dgl, name), dgl_graph, tensors, backward)

                def run():
                    dgl.use_libxsmm(libxsmm)
                    inner()
                return run
            return make
        methods["dgl"] = theirs(True)
        methods["dgl no-libxsmm"] = theirs(False)
    return {name: methods[name] for name in names if name in methods}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+", default=["pubmed", "rmat16"])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--min-seconds", type=float, default=1.0,
                        help="extend cheap cells' rounds until the timed calls of all "
                        "methods add up to this many seconds (odd count, at most 101 rounds)")
    parser.add_argument("--variant", default=None,
                        help="force one native build (sse2, avx2, avx512); default the widest")
    parser.add_argument("--ops", nargs="+", default=list(OPS), help="subset of the op names")
    args = parser.parse_args(argv)
    dgl, reason = _dgl()
    if dgl is None:
        print(f"DGL skipped: {reason}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"native variant {args.variant or 'default (widest)'}, median of >= "
          f"{args.repeats} rounds (cells under {args.min_seconds} s get more)")
    names = ["gnnforge", "native", "numba", "dgl", "dgl no-libxsmm"]
    for title, graph in _graphs(args.graphs):
        dgl_graph = _dgl_graph(dgl, graph) if dgl is not None else None
        tensors = _inputs(graph)
        native = f"native:{args.variant}" if args.variant else "native"
        methods = _methods(dgl, graph, dgl_graph, names, native)
        print(f"\n### {title}: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, "
              f"F={WIDTH}, H={HEADS}\n")
        header = list(methods)
        print("| op | pass | " + " | ".join(f"{m} ms" for m in header)
              + " | DGL / gnnforge | DGL no-libxsmm / gnnforge |")
        print("|---|---|" + "---|" * (len(header) + 2))
        for op_name in args.ops:
            inputs, call, dgl_name = OPS[op_name]
            operands = [tensors[name] for name in inputs]
            for backward in (False, True):
                times = interleaved_median_ms(
                    {m: make(call, dgl_name, operands, backward) for m, make in methods.items()},
                    args.repeats, args.min_seconds)
                ratios = [f"{times[m] / times['gnnforge']:.2f}x" if m in times else "n/a"
                          for m in ("dgl", "dgl no-libxsmm")]
                cells = " | ".join(f"{times[m]:.2f}" for m in header)
                print(f"| {op_name} | {'fwd+bwd' if backward else 'fwd'} | {cells} | "
                      f"{' | '.join(ratios)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
