"""Planning overhead (graph features + cost prediction + decision, as `optimize` measures
it) next to one iteration of the plan it chose, on the planner benchmark graphs.

Narrow layers are the hard case for the "overhead at most one layer iteration" target:
planning costs the same at any width, while a 32 -> 256 inference layer on the best
plan aggregates only 32 features per edge. Every `optimize` call recomputes the graph
features (nothing is cached between calls), so each measured call is what planning a
new graph costs.

    PYTHONPATH=. python benchmarks/planner_overhead.py [--graphs NAME ...]
"""

import argparse
import statistics
import time

import torch

from gnnforge.nn import GATConv, GCNConv
from gnnforge.plan import optimize
from gnnforge.plan._profile import limit_threads
from gnnforge.plan._suite import benchmark_graphs

WIDTHS = ((32, 256), (256, 32), (256, 256))


def _iteration_seconds(layer, graph, x, runs: int = 7) -> float:
    with torch.no_grad():
        layer(graph, x)  # warm-up: loops, CSR, kernel compilation
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            layer(graph, x)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+", default=None)
    parser.add_argument("--calls", type=int, default=15, help="optimize calls (median)")
    args = parser.parse_args(argv)
    limit_threads(1)
    print("| graph | layer | in->out | planning (median of "
          f"{args.calls}) | one iteration of the chosen plan (inference) | ratio |")
    print("|---|---|---|---:|---:|---:|")
    worst = 0.0
    for name, _, graph in benchmark_graphs(names=args.graphs):
        for make in (GCNConv, GATConv):
            for widths in WIDTHS:
                layer = make(*widths).eval()
                x = torch.randn(graph.num_nodes, widths[0])
                optimize(layer, graph)  # first call: loads the models, compiles the walk
                overhead = statistics.median(optimize(layer, graph).overhead_s
                                             for _ in range(args.calls))
                iteration = _iteration_seconds(layer, graph, x)
                worst = max(worst, overhead / iteration)
                print(f"| {name} | {make.__name__} | {widths[0]}->{widths[1]} | "
                      f"{overhead * 1e3:.3f} ms | {iteration * 1e3:.3f} ms | "
                      f"{overhead / iteration:.3f} |")
    print(f"\nlargest planning / iteration ratio: {worst:.3f}")


if __name__ == "__main__":
    main()
