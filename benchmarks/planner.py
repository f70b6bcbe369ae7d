"""Composition planner evaluation (SENSEi's Table 3 on this machine).

For every graph x (in, out) width pair x {inference, training} and each model (GCN, GAT),
time every kept composition (t = median seconds of SAMPLES timed iterations after a
warm-up), then account each strategy's total for ITERS iterations (default 100) including
its overheads:

    default      ITERS x t(PyG's plan)
    alternative  ITERS x t(the other association: (Â X) W for GCN, (alpha X) W for GAT)
    naive        one timed run of every candidate (measured), then ITERS - #candidates
                 iterations of the one whose run was fastest
    planner      gnnforge.plan.optimize (graph features + predictions, measured) + ITERS x
                 t(its choice)
    oracle       ITERS x the best measured t

Running 100 iterations of every candidate of every configuration would take hours on 2
shared cores, so per-iteration times are medians of SAMPLES runs and the 100-iteration
totals are accounted from them; the overheads (naive's trial runs, planning) are measured.

and print speedups over the default (geomean, min, max) per model and mode, and how
often the planner's choice was the measured best (strictly, and within 5%).

    PYTHONPATH=. python benchmarks/planner.py [--samples 3] [--iters 100] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections import defaultdict

import torch
from tqdm import tqdm

from gnnforge.nn import GATConv, GCNConv
from gnnforge.plan import CostModel, candidates, default_composition, optimize
from gnnforge.plan._profile import limit_threads
from gnnforge.plan._suite import benchmark_graphs

WIDTHS = ((32, 256), (256, 32), (32, 1024), (1024, 32), (256, 256))
QUICK_WIDTHS = ((32, 256), (256, 32))
MODELS = {"GCN": lambda i, o: GCNConv(i, o), "GAT": lambda i, o: GATConv(i, o, heads=1)}


def _alternative(layer):
    default = default_composition(layer.plan_expression())
    others = [c for c in candidates(layer.plan_expression())
              if c.tree != default.tree and c.norm == default.norm]
    return others[0]


def _iteration(layer, graph, x, training):
    if not training:
        with torch.no_grad():
            layer(graph, x)
        return
    out = layer(graph, x)
    out.square().mean().backward()
    layer.zero_grad(set_to_none=True)


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(model_name, graph, widths, training, iters, samples, seed, cost_model=None):
    """Per-candidate times and every strategy's total seconds for `iters` iterations."""
    torch.manual_seed(seed)
    layer = MODELS[model_name](*widths)
    layer.train(training)
    x = torch.randn(graph.num_nodes, widths[0], requires_grad=training)
    plans = candidates(layer.plan_expression())
    default = default_composition(layer.plan_expression())
    if default not in plans:
        plans = [default, *plans]
    run = lambda: _iteration(layer, graph, x, training)  # noqa: E731
    layer.plan = default
    run()  # warm-up: self-loops, CSR, kernel compilation are per-graph, not per-plan
    first, per_iteration = {}, {}
    for plan in plans:
        layer.plan = plan
        first[plan] = _timed(run)  # what a naive tuner sees from its single trial
        per_iteration[plan] = statistics.median(_timed(run) for _ in range(samples))
    layer.plan = None
    decision = optimize(layer, graph, training=training, cost_model=cost_model)
    overhead = decision.overhead_s
    chosen = layer.plan
    best = min(plans, key=per_iteration.__getitem__)
    naive_pick = min(plans, key=first.__getitem__)
    totals = {
        "default": iters * per_iteration[default],
        "alternative": iters * per_iteration[_alternative(layer)],
        "naive": sum(first.values()) + max(iters - len(plans), 0) * per_iteration[naive_pick],
        "planner": overhead + iters * per_iteration[chosen],
        "oracle": iters * per_iteration[best],
    }
    return dict(totals=totals, chosen=chosen, best=best, overhead=overhead,
                within=per_iteration[chosen] <= 1.05 * per_iteration[best],
                layer_iteration=per_iteration[default], planner_iteration=per_iteration[chosen])


def _geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=100,
                        help="iterations each strategy's total is accounted for")
    parser.add_argument("--samples", type=int, default=3,
                        help="timed iterations per candidate (median)")
    parser.add_argument("--widths", default=None,
                        help="comma-separated in:out pairs, e.g. 32:256,256:32")
    parser.add_argument("--graphs", nargs="+", default=None, help="subset of graph names")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="two width pairs")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--cost-models", default=None,
                        help="cost-model folder (default: the models shipped with gnnforge)")
    parser.add_argument("--rows-out", default=None,
                        help="append each configuration's result to this JSON-lines file")
    parser.add_argument("--summarize", nargs="+", default=None, metavar="ROWS",
                        help="only print the tables of JSON-lines files from --rows-out")
    args = parser.parse_args(argv)
    if args.summarize:
        rows = [json.loads(line) for path in args.summarize for line in open(path) if line.strip()]
        _print_tables(rows)
        return 0
    limit_threads(args.threads)
    cost_model = CostModel.load(args.cost_models)
    graphs = [g for g in benchmark_graphs() if args.graphs is None or g[0] in args.graphs]
    widths = QUICK_WIDTHS if args.quick else WIDTHS
    if args.widths:
        widths = tuple(tuple(int(v) for v in pair.split(":")) for pair in args.widths.split(","))
    configs = [(m, g, w, t) for m in args.models for g in graphs for w in widths
               for t in (False, True)]
    rows = []
    for model_name, (gname, _, graph), w, training in tqdm(configs, desc="planner"):
        r = measure(model_name, graph, w, training, args.iters, args.samples,
                    seed=len(rows), cost_model=cost_model)
        row = dict(model=model_name, graph=gname, widths=list(w), training=training,
                   totals=r["totals"], chosen=str(r["chosen"]), best=str(r["best"]),
                   within=bool(r["within"]), overhead=r["overhead"],
                   planner_iteration=r["planner_iteration"], iters=args.iters,
                   samples=args.samples, threads=args.threads)
        rows.append(row)
        if args.rows_out:
            with open(args.rows_out, "a") as handle:
                handle.write(json.dumps(row) + "\n")
    _print_tables(rows)
    return 0


def _print_tables(rows) -> None:
    first = rows[0]
    print(f"\ntotals for {first['iters']} iterations; per-iteration time = median of "
          f"{first['samples']} timed runs; {first['threads']} thread(s); speedup = default "
          "total / strategy total (higher is better)\n")
    print("| model | graph | in->out | mode | alt | naive | planner | oracle | "
          "planner choice | measured best | overhead / layer iter |")
    print("|---|---|---|---|---:|---:|---:|---:|---|---|---:|")
    for r in rows:
        t = r["totals"]
        sp = {k: t["default"] / t[k] for k in t}
        print(f"| {r['model']} | {r['graph']} | {r['widths'][0]}->{r['widths'][1]} | "
              f"{'train' if r['training'] else 'infer'} | {sp['alternative']:.2f} | "
              f"{sp['naive']:.2f} | {sp['planner']:.2f} | {sp['oracle']:.2f} | "
              f"{_short(r['chosen'])} | {_short(r['best'])} | "
              f"{r['overhead'] / r['planner_iteration']:.3f} |")
    print("\n| model | mode | configs | alt geomean | naive geomean | planner geomean "
          "(min / max) | oracle geomean | planner >= naive | planner = best | within 5% "
          "of best |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    groups = defaultdict(list)
    for r in rows:
        groups[(r["model"], "train" if r["training"] else "infer")].append(r)
        groups[(r["model"], "all")].append(r)
    for (model_name, mode), results in sorted(groups.items()):
        sp = {k: [r["totals"]["default"] / r["totals"][k] for r in results]
              for k in ("alternative", "naive", "planner", "oracle")}
        exact = sum(r["chosen"] == r["best"] for r in results) / len(results)
        close = sum(r["within"] for r in results) / len(results)
        beats = sum(p >= n for p, n in zip(sp["planner"], sp["naive"])) / len(results)
        print(f"| {model_name} | {mode} | {len(results)} | {_geomean(sp['alternative']):.2f} | "
              f"{_geomean(sp['naive']):.2f} | {_geomean(sp['planner']):.2f} "
              f"({min(sp['planner']):.2f} / {max(sp['planner']):.2f}) | "
              f"{_geomean(sp['oracle']):.2f} | {beats:.0%} | {exact:.0%} | {close:.0%} |")


def _short(plan) -> str:
    return str(plan).replace("|", "/")


if __name__ == "__main__":
    sys.exit(main())
