"""Planning overhead (graph features + cost prediction, as `optimize` measures it) next to
one layer iteration, on the planner benchmark graphs.

    PYTHONPATH=. python benchmarks/planner_overhead.py
"""

import statistics
import time

import torch

from gnnforge.nn import GATConv, GCNConv
from gnnforge.plan import optimize
from gnnforge.plan._profile import limit_threads
from gnnforge.plan._suite import benchmark_graphs


def _iteration_seconds(layer, graph, x) -> float:
    with torch.no_grad():
        layer(graph, x)  # warm-up: loops, CSR, kernel compilation
        times = []
        for _ in range(3):
            start = time.perf_counter()
            layer(graph, x)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    limit_threads(1)
    for name, _, graph in benchmark_graphs():
        x = torch.randn(graph.num_nodes, 256)
        for layer in (GCNConv(256, 256), GATConv(256, 256)):
            optimize(layer, graph, apply=False)
            overhead = statistics.median(optimize(layer, graph, apply=False).overhead_s
                                         for _ in range(15))
            iteration = _iteration_seconds(layer, graph, x)
            print(f"{name:15s} {type(layer).__name__:8s} overhead {overhead * 1e3:.2f} ms  "
                  f"layer iteration (256->256 infer) {iteration * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
