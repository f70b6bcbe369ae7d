"""RGCN's orders on one typed graph: every candidate's time and what the planner picks.

For a full, a basis (B bases) and a block-diagonal RGCNConv at two width pairs, inference
and training, each candidate the planner costs is timed (median of --samples runs after
one warm-up, interleaved) next to the plan `optimize` predicts (shipped models) and the
plan an auto layer locks in (real iterations until it does).

    PYTHONPATH=. python benchmarks/planner_rgcn.py [--scale 12] [--relations 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from gnnforge.data import rmat
from gnnforge.graph import Graph
from gnnforge.nn import RGCNConv
from gnnforge.plan import auto_plans, layer_candidates, optimize
from gnnforge.plan._calibrate import layer_iteration
from gnnforge.plan._profile import limit_threads

WIDTHS = ((32, 256), (256, 32))
# real iterations at most until a layer locks in its plan (its races' calls, a fallback
# race's included; benchmarks/planner.py has the same bound)
_MAX_AUTO_CALLS = 1000


def _layers(widths: tuple[int, int], relations: int, bases: int) -> dict[str, RGCNConv]:
    return {"full": RGCNConv(*widths, relations),
            f"basis B={bases}": RGCNConv(*widths, relations, num_bases=bases),
            "block nb=4": RGCNConv(*widths, relations, num_blocks=4)}


def _time(layer, graph, x, training, plans, samples):
    run = layer_iteration(layer, graph, x, training)
    times = {plan: [] for plan in plans}
    for plan in plans:
        layer.plan = plan
        run()
    for round_ in range(samples):
        for plan in plans[round_ % len(plans):] + plans[:round_ % len(plans)]:
            layer.plan = plan
            start = time.perf_counter()
            run()
            times[plan].append(time.perf_counter() - start)
    return {plan: statistics.median(t) for plan, t in times.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=12)
    parser.add_argument("--edges", type=int, default=40_000)
    parser.add_argument("--relations", type=int, default=30)
    parser.add_argument("--bases", type=int, default=4)
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args(argv)
    limit_threads(1)
    generator = torch.Generator().manual_seed(0)
    base = rmat(args.scale, args.edges, seed=0)
    graph = Graph(base.src, base.dst, base.num_nodes,
                  edge_type=torch.randint(0, args.relations, (base.num_edges,),
                                          generator=generator))
    print(f"R-MAT scale {args.scale}: {graph.num_nodes} nodes, {graph.num_edges} edges, "
          f"{args.relations} relations; one thread; median of {args.samples} runs\n")
    print("| weights | in->out | mode | default (PyG) | best | predicted | planner | "
          "planner's plan / best |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for widths in WIDTHS:
        for name, layer in _layers(widths, args.relations, args.bases).items():
            for training in (False, True):
                layer.train(training)
                x = torch.randn(graph.num_nodes, widths[0], requires_grad=training)
                plans = layer_candidates(layer)
                times = _time(layer, graph, x, training, plans, args.samples)
                predicted = optimize(layer, graph, training=training).decisions[0].chosen
                layer.plan = "auto"
                run = layer_iteration(layer, graph, x, training)
                run()
                entry = next(e for key, e in auto_plans(layer).items() if key[6] == training)
                for _ in range(_MAX_AUTO_CALLS):
                    if entry.plan is not None:  # real iterations until it locks in
                        break
                    run()
                default, best = times[plans[0]], min(times.values())
                chosen = times.get(entry.plan, float("nan"))
                print(f"| {name} | {widths[0]}->{widths[1]} | "
                      f"{'train' if training else 'infer'} | {default * 1e3:.1f} ms | "
                      f"{default / best:.2f}x | {default / times[predicted]:.2f}x | "
                      f"{default / chosen:.2f}x | {best / chosen:.2f} |")
    print("\nspeedups over the default (PyG's order: aggregate per relation, compose W_r, "
          "R products); planner = the auto layer's locked-in plan")
    return 0


if __name__ == "__main__":
    sys.exit(main())
