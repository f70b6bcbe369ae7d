"""Planning overhead (graph features + cost prediction, as `optimize` measures it) next to
one layer iteration, on the planner benchmark graphs.

    PYTHONPATH=. python benchmarks/planner_overhead.py
"""
import statistics, time, torch
from gnnforge.plan import optimize
from gnnforge.plan._suite import benchmark_graphs
from gnnforge.plan._profile import limit_threads
from gnnforge.nn import GCNConv, GATConv
limit_threads(1)
for name, _, g in benchmark_graphs():
    for layer in (GCNConv(256, 256), GATConv(256, 256)):
        optimize(layer, g)
        over = statistics.median(optimize(layer, g).overhead_s for _ in range(15))
        with torch.no_grad():
            layer(g, torch.randn(g.num_nodes, 256)); 
            it = statistics.median((lambda t: (layer(g, torch.randn(g.num_nodes,256)), time.perf_counter()-t)[1])(time.perf_counter()) for _ in range(3))
        print(f"{name:15s} {type(layer).__name__:8s} overhead {over*1e3:.2f} ms  layer iteration (256->256 infer) {it*1e3:.1f} ms")
