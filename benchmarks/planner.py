"""Composition planner evaluation (SENSEi's Table 3 on this machine).

For every graph x (in, out) width pair x {inference, training} and each model (GCN, GAT),
time every candidate the planner costs and the alternative (their first runs, then
interleaved rounds: plan 1, plan 2, ..., plan 1, ...; at least SAMPLES rounds, more up
to MAX_SAMPLES until the rounds took MIN_SECONDS; t = the median), then account each
strategy's total for ITERS iterations (default 100) including its overheads. Each timed
run follows --settle (1) untimed runs of the same plan: ITERS iterations of a plan
always follow that plan, and a run's page faults depend on what the run before it freed
(Cora, GCN 32 -> 256 inference: one order 0.59 ms after itself, 1.76 ms after another;
`--settle 0` times the rotation's runs as they come, as before 2026-11-27 10:30 UTC):

    default      ITERS x t(PyG's plan)
    alternative  ITERS x t(the other association: (Â X) W for GCN, (alpha X) W for GAT)
    width rule   ITERS x t(project first when the output is narrower, else aggregate
                 first: DGL's order), with the default's normalisation
    naive        the first run of every candidate (measured), then ITERS - #candidates
                 iterations of the one whose first run was fastest
    predicted    gnnforge.plan.optimize (graph features + predictions; the median of 5
                 calls, measured) + ITERS x t(its choice)
    planner      the layer as shipped (plan="auto"): a fresh copy runs real iterations
                 until it locks in a plan; its planning time (measured) + each of those calls at
                 its plan's t + the remaining iterations at t(the plan it locked in). It
                 predicts, or measures the candidates in doubt (on a fingerprint
                 mismatch, e.g. under --backend numba with models fitted on native)
    oracle       ITERS x the best measured t
    oracle (cv)  the same, the best chosen on one half of the rounds and timed on the
                 other (both ways, averaged): picking the minimum of noisy medians and
                 timing it with the same runs overstates the best plan's speed (the
                 winner's curse: of several equally fast plans, the luckiest one wins);
                 every other strategy's plan is chosen without these runs

Running ITERS real iterations of every candidate of every configuration would take hours
on this machine, so per-iteration times are medians of those runs and the totals are
accounted from them; the overheads (naive's trial runs, planning) are measured.

Every per-run time is kept in the rows (--rows-out), so the summary also measures the
timing noise: for each (configuration, candidate) the relative difference between the
medians of the odd and the even rounds; the noise threshold is its 90th percentile. The
planner's choice is "oracle-optimal" strictly when it is the measured best; "within
noise" when its median is within that threshold of the best's; "indistinguishable" when
a two-sided Mann-Whitney U test on the two plans' runs gives p >= 0.05.

`--keep-freed-memory` sets glibc's malloc to keep freed memory (no trimming, no mmap
below 32 MiB) before anything is timed: by default it gives freed multi-megabyte tensors
back to the kernel, and which later call re-faults their pages (about 1 ms per 2708 x 256
float tensor here) depends on what ran before it, so the rounds' medians carry page
faults that follow the rotation, not the plan (docs/planner.md). The standard tables run
without it, as users do by default.

    PYTHONPATH=. python benchmarks/planner.py [--samples 6] [--iters 100] [--threads 1]
        [--graphs NAME ...] [--models GCN GAT SAGE] [--backend numba | --isa avx2]
        [--keep-freed-memory] [--recheck] [--rows-out rows.jsonl]
    PYTHONPATH=. python benchmarks/planner.py --summarize rows.jsonl ...

`--recheck` times the planner's plan against the default once more right after each
race (interleaved rounds, as above) and prints how many of the configurations the main
rounds call significantly slower than the default are so in those runs too: the race and
the main rounds run minutes apart in one process, whose page-fault state can change in
between (docs/planner.md).
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

from gnnforge import ops
from gnnforge.data import rmat
from gnnforge.nn import GATConv, GCNConv, SAGEConv
from gnnforge.plan import (CostModel, auto_plans, candidates, configure_auto,
                           default_composition, optimize, primitives)
from gnnforge.plan._calibrate import layer_iteration, time_plans
from gnnforge.plan._optimize import layer_candidates, layer_symbols
from gnnforge.plan._primitives import bind
from gnnforge.plan._profile import limit_threads
from gnnforge.plan._suite import benchmark_graphs

WIDTHS = ((32, 256), (256, 32), (256, 256), (32, 2048), (2048, 32))
MODELS = {"GCN": lambda i, o: GCNConv(i, o), "GAT": lambda i, o: GATConv(i, o, heads=1),
          "SAGE": lambda i, o: SAGEConv(i, o)}
NOISE_QUANTILE = 0.9
_MAX_AUTO_CALLS = 1000



def _alternative(layer):
    default = default_composition(layer.plan_expression())
    others = [c for c in candidates(layer.plan_expression())
              if c.tree != default.tree and c.norm == default.norm]
    return others[0]


def _sparse_width(plan, symbols) -> float:
    return sum(bind(dims, symbols) for prim in primitives(plan) if prim.name.startswith("spmm")
               for _, dims in prim.sizes)


def _width_rule(layer, graph):
    """DGL's order: project first when the output is narrower than the input, else
    aggregate first; i.e. the tree aggregating the narrower width, Â realised as the
    default does (the default on a tie)."""
    default = default_composition(layer.plan_expression())
    symbols = layer_symbols(layer, dict(num_dst_nodes=graph.num_nodes,
                                        num_src_nodes=graph.num_nodes,
                                        num_edges=graph.num_edges))
    same_norm = [c for c in candidates(layer.plan_expression()) if c.norm == default.norm]
    return min([default] + same_norm, key=lambda c: _sparse_width(c, symbols))


def _auto_run(layer, graph, x, training, cost_model):
    """A fresh auto layer (the given one's weights): real iterations until its plan is
    locked in (at most `_MAX_AUTO_CALLS`). Returns (plan of each call, locked plan,
    planning seconds, race overhead by the layer's own timings, reason)."""
    configure_auto(cost_model=cost_model)
    auto = type(layer).__new__(type(layer))
    auto.__dict__.update({k: v for k, v in layer.__dict__.items()
                          if k not in ("_auto_plans", "_prepared")})
    auto.plan = "auto"
    run = layer_iteration(auto, graph, x, training)
    run()
    (entry,) = auto_plans(auto).values()
    for _ in range(_MAX_AUTO_CALLS):  # its races' calls, the fallback's included
        if entry.plan is not None:
            break
        run()
    races = entry.earlier + [entry.race] if entry.race is not None else []
    calls = [race.plans[i] for race in races for i, _ in race.calls] or [entry.plan]
    return calls, entry.plan, entry.planning_s, entry.overhead_s - entry.planning_s, \
        entry.reason


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


def _recheck(layer, graph, x, training, default, locked, samples, min_seconds, max_samples,
             settle):
    """The planner's plan and the default timed again right after its race, interleaved:
    whether a plan the benchmark's earlier rounds find slower than the default is also
    slower in the process state the race decided in ({} when it is the default)."""
    if locked == default:
        return {}
    _, times = time_plans(layer, graph, x, training, [default, locked], samples,
                          min_seconds, max_samples, settle=settle)
    return {str(p): t for p, t in times.items()}


def measure(model_name, graph, widths, training, iters, samples, seed, cost_model=None,
            min_seconds=0.0, max_samples=40, settle=1, recheck=False):
    """Per-candidate run times and the planner's decision for one configuration."""
    torch.manual_seed(seed)
    layer = MODELS[model_name](*widths)
    layer.train(training)
    x = torch.randn(graph.num_nodes, widths[0], requires_grad=training)
    plans = layer_candidates(layer)  # the default first, as the planner sees them
    alternative = _alternative(layer)
    width_rule = _width_rule(layer, graph)
    for extra in (alternative, width_rule):
        if extra not in plans:
            plans.append(extra)
    layer.plan = "default"
    layer_iteration(layer, graph, x, training)()  # warm-up: loops, CSR, degrees per graph
    first, times = time_plans(layer, graph, x, training, plans, samples, min_seconds,
                              max_samples, settle=settle)
    decisions = [optimize(layer, graph, training=training, cost_model=cost_model)
                 for _ in range(5)]  # the same decision 5 times; overhead: the median
    decision = decisions[0]
    calls, locked, planning, race_overhead, reason = _auto_run(layer, graph, x, training,
                                                               cost_model)
    rechecked = _recheck(layer, graph, x, training, plans[0], locked, samples, min_seconds,
                         max_samples, settle) if recheck else None
    return dict(recheck=rechecked,
        plans=[str(p) for p in plans], default=str(plans[0]), alternative=str(alternative),
        width_rule=str(width_rule), auto_calls=[str(p) for p in calls],
        auto_plan=str(locked), auto_planning=planning, auto_race_overhead=race_overhead,
        auto_reason=reason,
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
    parser.add_argument("--settle", type=int, default=1,
                        help="untimed runs of a plan right before each of its timed runs "
                        "(0: the rotation's runs as they come)")
    parser.add_argument("--widths", default=None,
                        help="comma-separated in:out pairs, e.g. 32:256,256:32")
    parser.add_argument("--graphs", nargs="+", default=None, help="subset of graph names")
    parser.add_argument("--modes", nargs="+", default=["infer", "train"],
                        choices=["infer", "train"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--backend", default=None, choices=ops.BACKENDS,
                        help="force this aggregation backend (gnnforge.ops.use_backend)")
    parser.add_argument("--isa", default=None, choices=["sse2", "avx2"],
                        help="restrict the native kernels to this instruction set "
                        "(GNNFORGE_ISA) and tune the kernel choices for it first")
    parser.add_argument("--cost-models", default=None,
                        help="cost-model folder (default: the models shipped with gnnforge)")
    parser.add_argument("--keep-freed-memory", action="store_true",
                        help="glibc malloc keeps freed memory (no page faults from "
                        "re-allocating freed tensors in the timed runs)")
    parser.add_argument("--recheck", action="store_true",
                        help="after each race, time the planner's plan against the default "
                        "again (interleaved), and count where it is significantly slower")
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
    if args.keep_freed_memory:
        keep_freed_memory()
    if args.isa:  # read on every kernel choice; tuned up front, not in a timed call
        import os

        os.environ["GNNFORGE_ISA"] = args.isa
        ops.tune()
    if args.backend:
        with ops.use_backend(args.backend):
            return _run(args)
    return _run(args)


def _run(args) -> int:
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
                    max_samples=args.max_samples, settle=args.settle,
                    recheck=args.recheck)
        row = dict(model=model_name, graph=gname, family=family, nodes=graph.num_nodes,
                   edges=graph.num_edges, widths=list(w), training=training,
                   samples=args.samples, min_seconds=args.min_seconds, threads=args.threads,
                   backend=args.backend or "default", **r)
        rows.append(row)
        if args.rows_out:
            with open(args.rows_out, "a") as handle:
                handle.write(json.dumps(row) + "\n")
    print(f"{len(rows)} configurations in {time.perf_counter() - start:.0f} s")
    print_tables(rows)
    return 0


def keep_freed_memory() -> None:
    """glibc's malloc keeps what is freed: blocks up to 32 MiB come from the heap (no
    mmap), and the heap's top is never trimmed (mallopt M_MMAP_THRESHOLD, M_TRIM_THRESHOLD;
    the same as GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:
    glibc.malloc.trim_threshold=1073741824 at startup)."""
    from gnnforge.distributed._memory import _M_MMAP_THRESHOLD, _mallopt

    m_trim_threshold = -1  # glibc's mallopt parameter number (malloc.h)
    mallopt = _mallopt()  # the library's glibc binding (None elsewhere)
    if mallopt is None or not (mallopt(_M_MMAP_THRESHOLD, 32 << 20)
                               and mallopt(m_trim_threshold, 1 << 30)):
        raise RuntimeError("--keep-freed-memory: mallopt refused the settings (not glibc?)")


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


def _cross_validated_best(times: dict, plans: list) -> float:
    """Seconds of the best plan, chosen on the odd rounds and timed on the even ones,
    and the other way round (the mean of the two); the plain best with < 2 rounds."""
    if min(len(times[p]) for p in plans) < 2:
        return min(_median(times[p]) for p in plans)
    folds = []
    for pick, judge in ((0, 1), (1, 0)):
        best = min(plans, key=lambda p: _median(times[p][pick::2]))
        folds.append(_median(times[best][judge::2]))
    return statistics.fmean(folds)


def evaluate_row(r, threshold: float) -> dict:
    """Strategy totals for `iters` iterations and the decision's quality for one row."""
    t = {p: _median(v) for p, v in r["times"].items()}
    iters, candidates_ = r["iters"], r["plans"]  # the alternative too, if pruning dropped it
    best = min(candidates_, key=t.__getitem__)
    naive_pick = min(candidates_, key=r["first"].__getitem__)
    auto_calls = r["auto_calls"][:iters]
    totals = {
        "default": iters * t[r["default"]],
        "alternative": iters * t[r["alternative"]],
        "width": iters * t[r["width_rule"]],
        "naive": sum(r["first"][p] for p in candidates_)
        + max(iters - len(candidates_), 0) * t[naive_pick],
        "predicted": r["overhead"] + iters * t[r["chosen"]],
        "planner": r["auto_planning"] + sum(t[p] for p in auto_calls)
        + (iters - len(auto_calls)) * t[r["auto_plan"]],
        "oracle": iters * t[best],
        "oracle_cv": iters * _cross_validated_best(r["times"], candidates_),
    }
    chosen = r["auto_plan"]
    return dict(
        totals=totals, best=best,
        speedup={k: totals["default"] / v for k, v in totals.items()},
        strict=chosen == best, within=t[chosen] <= (1 + threshold) * t[best],
        judged=chosen == best or _indistinguishable(r["times"][chosen], r["times"][best]),
        slower=t[chosen] > t[r["default"]] and not _indistinguishable(
            r["times"][chosen], r["times"][r["default"]]),
        overhead_ratio=(totals["planner"] - iters * t[chosen]) / (iters * t[chosen]))


def _print_recheck(results) -> None:
    """With --recheck: of the configurations whose plan the benchmark's rounds find
    significantly slower than the default, those where the runs right after the race
    agree."""
    checked = [(r, e) for r, e in results if r.get("recheck")]
    if not checked:
        return
    again = []
    for r, e in checked:
        times = r["recheck"]
        mine, default = times[r["auto_plan"]], times[r["default"]]
        if _median(mine) > _median(default) and not _indistinguishable(mine, default):
            again.append(f"{r['model']} {r['graph']} {r['widths'][0]}->{r['widths'][1]} "
                         f"{_mode(r)} {_median(default) / _median(mine):.2f}")
    flagged = sum(e["slower"] for _, e in checked)
    print(f"\nre-checked after the race ({len(checked)} configurations whose plan is not "
          f"the default): significantly slower than the default in the benchmark's rounds "
          f"{flagged}, in the runs right after the race {len(again)}"
          + (f" ({'; '.join(again)}: default / plan)" if again else ""))


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
    "((((M @ X) @ Wl) + 1bl) + (dst_rows(X) @ Wr))": "(MX)Wl",
    "(((M @ (X @ Wl)) + 1bl) + (dst_rows(X) @ Wr))": "M(XWl)",
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
          f"{_median(runs)}); {first['threads']} thread(s); backend "
          f"{first.get('backend', 'default')}; speedup = default total / strategy total "
          "(higher is better)\n")
    print("| model | graph | in->out | mode | width rule | predicted | planner | oracle | "
          "planner's plan | how | measured best | planner overhead / 100 iters |")
    print("|---|---|---|---|---:|---:|---:|---:|---|---|---|---:|")
    for r, e in results:
        sp = e["speedup"]
        mark = "" if e["strict"] else (" (tie)" if e["judged"] else " (miss)")
        mark += " SLOWER" if e["slower"] else ""
        how = "measured" if r["auto_reason"] else "predicted"
        print(f"| {r['model']} | {r['graph']} | {r['widths'][0]}->{r['widths'][1]} | "
              f"{_mode(r)} | {sp['width']:.2f} | {sp['predicted']:.2f} | "
              f"{sp['planner']:.2f} | {sp['oracle']:.2f} | {_short(r['auto_plan'])}{mark} | "
              f"{how} | {_short(e['best'])} | {e['overhead_ratio']:.2%} |")
    print(f"\nnoise threshold: {threshold:.1%} ({NOISE_QUANTILE:.0%} quantile of |median of "
          f"odd rounds / median of even rounds - 1| over {sum(len(r['times']) for r in rows)}"
          " (configuration, candidate) pairs)\n")
    print("| model | mode | configs | width rule | predicted | planner (min / max) | oracle | "
          "planner / oracle | oracle (cv) | planner / oracle (cv) | planner >= width rule | "
          "measured | = best or indistinguishable | significantly slower than default |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    groups = defaultdict(list)
    for r, e in results:
        groups[(r["model"], _mode(r))].append((r, e))
        groups[(r["model"], "all")].append((r, e))
    for (model_name, mode), group in sorted(groups.items()):
        sp = {k: _geomean([e["speedup"][k] for _, e in group])
              for k in ("width", "predicted", "planner", "oracle", "oracle_cv")}
        low = min(e["speedup"]["planner"] for _, e in group)
        high = max(e["speedup"]["planner"] for _, e in group)
        measured = sum(bool(r["auto_reason"]) for r, _ in group)
        print(f"| {model_name} | {mode} | {len(group)} | {sp['width']:.3f} | "
              f"{sp['predicted']:.3f} | {sp['planner']:.3f} ({low:.2f} / {high:.2f}) | "
              f"{sp['oracle']:.3f} | {sp['planner'] / sp['oracle']:.3f} | "
              f"{sp['oracle_cv']:.3f} | {sp['planner'] / sp['oracle_cv']:.3f} | "
              f"{'yes' if sp['planner'] >= sp['width'] else 'no'} | {measured} | "
              f"{sum(e['judged'] for _, e in group)} | {sum(e['slower'] for _, e in group)} |")
    _print_legend(rows)
    ratios = sorted(e["overhead_ratio"] for _, e in results)
    seconds = sorted(r["auto_planning"] for r in rows)
    races = sorted(r["auto_race_overhead"] for r in rows)
    _print_recheck(results)
    print(f"\nplanner overhead (planning + measuring, by the benchmark's medians) / "
          f"{first['iters']} iterations of its plan: median {_median(ratios):.2%}, max "
          f"{ratios[-1]:.2%}; under 2% in {sum(v < 0.02 for v in ratios)}/{len(ratios)}; "
          f"planning itself: median {_median(seconds) * 1e3:.2f} ms, max "
          f"{seconds[-1] * 1e3:.2f} ms; measuring cost by the layer's own timings: median "
          f"{_median(races) * 1e3:.2f} ms, max {races[-1] * 1e3:.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
