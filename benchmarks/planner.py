"""Composition planner evaluation (SENSEi's Table 3 on this machine).

For every graph x (in, out) width pair x {inference, training} and each model (GCN, GAT),
time every candidate the planner costs and the alternative (their first runs, then
interleaved rounds: plan 1, plan 2, ..., plan 1, ...; at least SAMPLES rounds, more up
to MAX_SAMPLES until the rounds took MIN_SECONDS; t = the median), then account each
strategy's total for ITERS iterations (default 100) including its overheads:

    default      ITERS x t(PyG's plan)
    alternative  ITERS x t(the other association: (Â X) W for GCN, (alpha X) W for GAT)
    naive        the first run of every candidate (measured), then ITERS - #candidates
                 iterations of the one whose first run was fastest
    planner      gnnforge.plan.optimize (graph features + predictions; the median of 5
                 calls, measured) + ITERS x t(its choice)
    oracle       ITERS x the best measured t

Running ITERS real iterations of every candidate of every configuration would take hours
on this machine, so per-iteration times are medians of those runs and the totals are
accounted from them; the overheads (naive's trial runs, planning) are measured.

Every per-run time is kept in the rows (--rows-out), so the summary also measures the
timing noise: for each (configuration, candidate) the relative difference between the
medians of the odd and the even rounds; the noise threshold is its 90th percentile. The
planner's choice is "oracle-optimal" strictly when it is the measured best; "within
noise" when its median is within that threshold of the best's; "indistinguishable" when
a two-sided Mann-Whitney U test on the two plans' runs gives p >= 0.05.

    PYTHONPATH=. python benchmarks/planner.py [--samples 6] [--iters 100] [--threads 1]
        [--graphs NAME ...] [--models GCN GAT] [--rows-out rows.jsonl]
    PYTHONPATH=. python benchmarks/planner.py --summarize rows.jsonl ...
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

from gnnforge.data import rmat
from gnnforge.nn import GATConv, GCNConv
from gnnforge.plan import CostModel, candidates, default_composition, optimize
from gnnforge.plan._calibrate import layer_iteration, time_plans
from gnnforge.plan._optimize import layer_candidates
from gnnforge.plan._profile import limit_threads
from gnnforge.plan._suite import benchmark_graphs

WIDTHS = ((32, 256), (256, 32), (256, 256), (32, 2048), (2048, 32))
MODELS = {"GCN": lambda i, o: GCNConv(i, o), "GAT": lambda i, o: GATConv(i, o, heads=1)}
NOISE_QUANTILE = 0.9


def _alternative(layer):
    default = default_composition(layer.plan_expression())
    others = [c for c in candidates(layer.plan_expression())
              if c.tree != default.tree and c.norm == default.norm]
    return others[0]


def _warm_up(cost_model) -> None:
    """Run every candidate of both models, and the planner, once on a tiny graph: kernel
    compilation (or loading numba's cache) and the planner's first-call caches
    (enumeration, primitive lists) are per-process costs, not per-configuration ones."""
    graph = rmat(6, 300, seed=0)
    for make in MODELS.values():
        for training in (False, True):
            for widths in ((8, 16), (16, 8)):
                layer = make(*widths).train(training)
                x = torch.randn(graph.num_nodes, widths[0], requires_grad=training)
                time_plans(layer, graph, x, training, candidates(layer.plan_expression()), 1)
                optimize(layer, graph, training=training, cost_model=cost_model, apply=False)


def measure(model_name, graph, widths, training, iters, samples, seed, cost_model=None,
            min_seconds=0.0, max_samples=40):
    """Per-candidate run times and the planner's decision for one configuration."""
    torch.manual_seed(seed)
    layer = MODELS[model_name](*widths)
    layer.train(training)
    x = torch.randn(graph.num_nodes, widths[0], requires_grad=training)
    plans = layer_candidates(layer)  # the default first, as the planner sees them
    alternative = _alternative(layer)
    if alternative not in plans:
        plans.append(alternative)
    layer_iteration(layer, graph, x, training)()  # warm-up: loops, CSR, degrees per graph
    first, times = time_plans(layer, graph, x, training, plans, samples, min_seconds,
                              max_samples)
    decisions = [optimize(layer, graph, training=training, cost_model=cost_model)
                 for _ in range(5)]  # the same decision 5 times; overhead: the median
    decision = decisions[0]
    return dict(
        plans=[str(p) for p in plans], default=str(plans[0]), alternative=str(alternative),
        chosen=str(layer.plan), first={str(p): s for p, s in first.items()},
        times={str(p): t for p, t in times.items()},
        overhead=statistics.median(d.overhead_s for d in decisions),
        margin=decision.margin, caution=decision.caution,
        predicted={str(p): c for p, c in decision.decisions[0].costs},
        candidates=len(layer_candidates(layer)), iters=iters)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=100,
                        help="iterations each strategy's total is accounted for")
    parser.add_argument("--samples", type=int, default=6,
                        help="timed runs per candidate at least (interleaved rounds; median)")
    parser.add_argument("--min-seconds", type=float, default=1.0,
                        help="more rounds (up to --max-samples) until the rounds took this long")
    parser.add_argument("--max-samples", type=int, default=40)
    parser.add_argument("--widths", default=None,
                        help="comma-separated in:out pairs, e.g. 32:256,256:32")
    parser.add_argument("--graphs", nargs="+", default=None, help="subset of graph names")
    parser.add_argument("--modes", nargs="+", default=["infer", "train"],
                        choices=["infer", "train"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--cost-models", default=None,
                        help="cost-model folder (default: the models shipped with gnnforge)")
    parser.add_argument("--rows-out", default=None,
                        help="append each configuration's result to this JSON-lines file")
    parser.add_argument("--summarize", nargs="+", default=None, metavar="ROWS",
                        help="only print the tables of JSON-lines files from --rows-out")
    args = parser.parse_args(argv)
    if args.summarize:
        rows = [json.loads(line) for path in args.summarize for line in open(path)
                if line.strip()]
        print_tables(rows)
        return 0
    limit_threads(args.threads)
    cost_model = CostModel.load(args.cost_models)
    start = time.perf_counter()
    graphs = list(benchmark_graphs(names=args.graphs))
    widths = WIDTHS
    if args.widths:
        widths = tuple(tuple(int(v) for v in pair.split(":")) for pair in args.widths.split(","))
    _warm_up(cost_model)
    configs = [(m, g, w, t) for g in graphs for m in args.models for w in widths
               for t in (False, True) if ("train" if t else "infer") in args.modes]
    rows = []
    for model_name, (gname, family, graph), w, training in tqdm(configs, desc="planner"):
        r = measure(model_name, graph, w, training, args.iters, args.samples,
                    seed=len(rows), cost_model=cost_model, min_seconds=args.min_seconds,
                    max_samples=args.max_samples)
        row = dict(model=model_name, graph=gname, family=family, nodes=graph.num_nodes,
                   edges=graph.num_edges, widths=list(w), training=training,
                   samples=args.samples, min_seconds=args.min_seconds, threads=args.threads,
                   **r)
        rows.append(row)
        if args.rows_out:
            with open(args.rows_out, "a") as handle:
                handle.write(json.dumps(row) + "\n")
    print(f"{len(rows)} configurations in {time.perf_counter() - start:.0f} s")
    print_tables(rows)
    return 0


# ---- summary -------------------------------------------------------------------------

def _median(values):
    return statistics.median(values)


def noise_threshold(rows, quantile: float = NOISE_QUANTILE) -> float:
    """The `quantile` of |median(odd rounds) / median(even rounds) - 1| over every
    (configuration, candidate): how much two medians of the same plan differ here."""
    diffs = sorted(abs(_median(t[0::2]) / _median(t[1::2]) - 1)
                   for r in rows for t in r["times"].values() if len(t) >= 2)
    return diffs[min(len(diffs) - 1, int(quantile * len(diffs)))]


def _indistinguishable(a, b) -> bool:
    from scipy.stats import mannwhitneyu

    return a == b or mannwhitneyu(a, b, alternative="two-sided").pvalue >= 0.05


def evaluate_row(r, threshold: float) -> dict:
    """Strategy totals for `iters` iterations and the decision's quality for one row."""
    t = {p: _median(v) for p, v in r["times"].items()}
    iters, candidates_ = r["iters"], r["plans"]  # the alternative too, if pruning dropped it
    best = min(candidates_, key=t.__getitem__)
    naive_pick = min(candidates_, key=r["first"].__getitem__)
    totals = {
        "default": iters * t[r["default"]],
        "alternative": iters * t[r["alternative"]],
        "naive": sum(r["first"][p] for p in candidates_)
        + max(iters - len(candidates_), 0) * t[naive_pick],
        "planner": r["overhead"] + iters * t[r["chosen"]],
        "oracle": iters * t[best],
    }
    chosen = r["chosen"]
    return dict(
        totals=totals, best=best,
        speedup={k: totals["default"] / v for k, v in totals.items()},
        strict=chosen == best, within=t[chosen] <= (1 + threshold) * t[best],
        judged=chosen == best or _indistinguishable(r["times"][chosen], r["times"][best]),
        overhead_ratio=r["overhead"] / t[chosen])


def _geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _mode(r) -> str:
    return "train" if r["training"] else "infer"


_LEGEND = {
    "(Â @ (X @ W))  [Â precompute]": "Â(XW) pre",
    "(Â @ (X @ W))  [Â dynamic]": "Â(XW) dyn",
    "((Â @ X) @ W)  [Â precompute]": "(ÂX)W pre",
    "((Â @ X) @ W)  [Â dynamic]": "(ÂX)W dyn",
    "(attention(A, ((X @ W) @ a_src), (dst_rows((X @ W)) @ a_dst)) @ (X @ W))": "α(XW)",
    "((attention(A, (X @ (W @ a_src)), dst_rows((X @ (W @ a_dst)))) @ X) @ W)": "(αX)W",
}


def _short(plan: str) -> str:
    return _LEGEND.get(plan, plan).replace("|", "/")


def _print_legend(rows) -> None:
    used = {p for r in rows for p in r["times"]}
    print("\nplans: " + "; ".join(f"{short} = {plan}" for plan, short in _LEGEND.items()
                                  if plan in used))


def print_tables(rows) -> None:
    threshold = noise_threshold(rows)
    results = [(r, evaluate_row(r, threshold)) for r in rows]
    first = rows[0]
    runs = sorted(len(t) for r in rows for t in r["times"].values())
    print(f"\ntotals for {first['iters']} iterations; per-iteration time = median of "
          f">= {first['samples']} interleaved runs (more until the rounds took "
          f"{first.get('min_seconds', 0)} s: {runs[0]} to {runs[-1]} runs, median "
          f"{_median(runs)}); {first['threads']} thread(s); speedup = default total / "
          "strategy total (higher is better)\n")
    print("| model | graph | in->out | mode | alt | naive | planner | oracle | "
          "planner choice | measured best | overhead / layer iter |")
    print("|---|---|---|---|---:|---:|---:|---:|---|---|---:|")
    for r, e in results:
        sp = e["speedup"]
        mark = "" if e["strict"] else (" (tie)" if e["judged"] else " (miss)")
        print(f"| {r['model']} | {r['graph']} | {r['widths'][0]}->{r['widths'][1]} | "
              f"{_mode(r)} | {sp['alternative']:.2f} | {sp['naive']:.2f} | "
              f"{sp['planner']:.2f} | {sp['oracle']:.2f} | {_short(r['chosen'])}{mark} | "
              f"{_short(e['best'])} | {e['overhead_ratio']:.3f} |")
    print(f"\nnoise threshold: {threshold:.1%} ({NOISE_QUANTILE:.0%} quantile of |median of "
          f"odd rounds / median of even rounds - 1| over {sum(len(r['times']) for r in rows)}"
          " (configuration, candidate) pairs)\n")
    print("| model | mode | configs | alt geomean | naive geomean | planner geomean "
          "(min / max) | oracle geomean | planner >= naive | = best (strict) | within "
          "noise | strict or indistinguishable |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    groups = defaultdict(list)
    for r, e in results:
        groups[(r["model"], _mode(r))].append(e)
        groups[(r["model"], "all")].append(e)
    for (model_name, mode), group in sorted(groups.items()):
        sp = {k: [e["speedup"][k] for e in group]
              for k in ("alternative", "naive", "planner", "oracle")}
        share = lambda key: sum(e[key] for e in group) / len(group)  # noqa: E731
        beats = sum(p >= n for p, n in zip(sp["planner"], sp["naive"])) / len(group)
        print(f"| {model_name} | {mode} | {len(group)} | {_geomean(sp['alternative']):.2f} | "
              f"{_geomean(sp['naive']):.2f} | {_geomean(sp['planner']):.2f} "
              f"({min(sp['planner']):.2f} / {max(sp['planner']):.2f}) | "
              f"{_geomean(sp['oracle']):.2f} | {beats:.0%} | {share('strict'):.0%} | "
              f"{share('within'):.0%} | {share('judged'):.0%} |")
    _print_legend(rows)
    ratios = sorted(e["overhead_ratio"] for _, e in results)
    seconds = sorted(r["overhead"] for r in rows)
    print(f"\nplanning overhead / one iteration of the chosen plan: median "
          f"{_median(ratios):.3f}, max {ratios[-1]:.3f}; within one iteration in "
          f"{sum(v <= 1 for v in ratios)}/{len(ratios)} configurations; planning itself: "
          f"median {_median(seconds) * 1e3:.2f} ms, max {seconds[-1] * 1e3:.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
