"""`gnnforge plan`: explain the enumerated compositions, or profile this machine."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

DESCRIPTION = "composition planner: explain layer plans (--explain) or profile cost models"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--explain", action="store_true",
                        help="print every enumerated tree, its primitives and pruning verdict")
    parser.add_argument("--layer", action="append",
                        help="layer(s) to explain, e.g. gcn, gat (default: all)")
    parser.add_argument("--kept-only", action="store_true", help="hide dropped trees")
    sub = parser.add_subparsers(dest="plan_command", metavar="SUBCOMMAND")
    profile = sub.add_parser("profile", help="time primitives here and fit cost models",
                             description="Time every primitive on the profile graphs x widths, "
                             "report held-out-graph prediction error, write the models.")
    profile.add_argument("--out", type=Path, default=None,
                         help="models folder (default: the package's gnnforge/plan/models)")
    profile.add_argument("--records", type=Path, default=None,
                         help="also write the raw timings (JSON) here")
    profile.add_argument("--from-records", type=Path, nargs="+", default=None,
                         help="skip timing: fit from JSON files written by --records "
                         "(several: chunks of one profile)")
    profile.add_argument("--graphs", nargs="+", default=None,
                         help="time only these profile graphs (split a profile into chunks)")
    profile.add_argument("--no-fit", action="store_true",
                         help="only time and write --records (a chunk of a profile)")
    profile.add_argument("--calibration-samples", type=int, default=5,
                         help="timed runs per plan when calibrating the decision rule "
                         "(0: skip it: margin 0, caution 0)")
    profile.add_argument("--widths", type=int, nargs="+", default=None)
    profile.add_argument("--repeats", type=int, default=3)
    profile.add_argument("--threads", type=int, default=1,
                         help="torch/numba threads while timing (the models are valid for it)")
    profile.add_argument("--quick", action="store_true",
                         help="a refit in under 2 minutes: 6 small profile graphs (2 held "
                         "out), widths 16/64/256, 2 repeats, a short calibration")


def _explain(args: argparse.Namespace) -> int:
    from gnnforge.plan._explain import LAYER_EXPRESSIONS, explain

    unknown = sorted(set(args.layer or ()) - set(LAYER_EXPRESSIONS))
    if unknown:
        print(f"gnnforge plan: error: unknown --layer {unknown[0]!r}; choose from "
              f"{', '.join(sorted(LAYER_EXPRESSIONS))}", file=sys.stderr)
        return 2
    for name in args.layer or sorted(LAYER_EXPRESSIONS):
        print(f"==== {name}")
        print(explain(LAYER_EXPRESSIONS[name](), show_dropped=not args.kept_only))
        print()
    return 0


_HELD_OUT = ("rmat-s13", "grid-60", "sbm-8x1000", "mycielski-9", "github-sub")
# --quick: a refit in under 2 minutes on one core (the full profile takes ~5 minutes on a
# quiet 2-core machine, ~25 under load). Six small graphs, one or two per family (the
# largest has 71,000 edges), two of them held out to report the models' errors; widths
# 16/64/256 (the GEMMs at those output widths too); 2 repeats; a calibration of 3 width
# pairs x 2 samples on the held-out graphs.
QUICK_GRAPHS = ("rmat-s11", "grid-60", "sbm-4x500", "mycielski-8", "mycielski-9", "github-sub")
QUICK_HELD_OUT = ("mycielski-9", "github-sub")
QUICK_WIDTHS = (16, 64, 256)
QUICK_CALIBRATION_WIDTHS = ((32, 256), (256, 32), (256, 256))


def _held_out(args: argparse.Namespace, records: list[dict]) -> tuple[str, ...]:
    """The held-out graphs of this profile that were timed (quick: its own two)."""
    timed = {r["graph"] for r in records}
    return tuple(g for g in (QUICK_HELD_OUT if args.quick else _HELD_OUT) if g in timed)


def _records(args: argparse.Namespace) -> list[dict]:
    from gnnforge.plan._profile import ProfileConfig, collect
    from gnnforge.plan._suite import profile_graph_names, profile_graphs

    if args.from_records is not None:
        return [r for path in args.from_records for r in json.loads(path.read_text())]
    widths = tuple(args.widths) if args.widths else QUICK_WIDTHS if args.quick else None
    config = ProfileConfig(repeats=min(args.repeats, 2) if args.quick else args.repeats,
                           **({"widths": widths} if widths else {}))
    unknown = sorted(set(args.graphs or ()) - set(profile_graph_names()))
    if unknown:
        print(f"gnnforge plan profile: unknown --graphs {unknown}; profile graphs are "
              f"{profile_graph_names()}", file=sys.stderr)
        raise SystemExit(2)
    names = args.graphs
    if args.quick:  # build only the quick graphs (reading the large real ones takes seconds)
        names = [g for g in QUICK_GRAPHS if args.graphs is None or g in args.graphs]
    graphs = list(profile_graphs(names=names))
    records = collect(graphs, config)
    if args.records is not None:
        args.records.write_text(json.dumps(records))
    return records


def _calibrate(held_out_model, held_out: tuple[str, ...], samples: int, overheads: dict,
               errors: dict, quick: bool = False) -> tuple[dict, list[dict]]:
    """The decision rule, from the models trained without the `held_out` graphs (whose
    held-out errors are `errors`), timed on those graphs."""
    from gnnforge._plan_calibration import decision_errors
    from gnnforge.plan._calibrate import decision_rule
    from gnnforge.plan._suite import profile_graphs

    if samples == 0 or not held_out:
        return {"decision_margin": 0.0, "decision_caution": 0.0}, []
    held_out_model.info = {"layer_overhead_s": overheads, "held_out_errors": errors}
    graphs = [(name, graph) for name, _, graph in profile_graphs(names=held_out)]
    if quick:
        calibration = decision_errors(held_out_model, graphs, QUICK_CALIBRATION_WIDTHS,
                                      samples=min(samples, 2), min_seconds=0.05)
    else:
        calibration = decision_errors(held_out_model, graphs, samples=samples)
    margin, caution = decision_rule(calibration)
    return {"decision_margin": margin, "decision_caution": caution}, calibration


def _profile(args: argparse.Namespace) -> int:
    from gnnforge.plan._cost import MODELS_DIR
    from gnnforge.plan._fingerprint import fingerprint
    from gnnforge.plan._profile import fit, held_out_errors, limit_threads

    limit_threads(args.threads)
    start = time.perf_counter()
    records = _records(args)
    if args.no_fit:
        print(f"{len(records)} timings in {time.perf_counter() - start:.0f} s"
              + (f", written to {args.records}" if args.records else " (not written: no "
                 "--records)"))
        return 0
    from gnnforge._plan_calibration import layer_overheads

    held_out = _held_out(args, records)
    # fitted once: for the held-out errors and for the calibration's predictions
    held_out_model = fit([r for r in records if r["graph"] not in held_out])
    errors = held_out_errors(records, held_out, model=held_out_model)
    overheads = layer_overheads()
    rule, calibration = _calibrate(held_out_model, held_out, args.calibration_samples,
                                   overheads, errors, args.quick)
    model = fit(records)
    model.info = {"records": len(records), "graphs": sorted({r["graph"] for r in records}),
                  "held_out_graphs": list(held_out), "held_out_errors": errors,
                  **rule, "calibration": calibration,
                  "layer_overhead_s": overheads,
                  "command": "gnnforge plan " + " ".join(sys.argv[2:]) if len(sys.argv) > 2
                  else "gnnforge plan profile",
                  "torch_threads": args.threads,
                  # what the timings depend on: planning measures instead where it differs
                  "fingerprint": _records_fingerprint(records, fingerprint())}
    # the shipped folder for the thread count fitted (`shipped_models_dir`)
    out = args.out or (MODELS_DIR if args.threads == 1
                       else MODELS_DIR / f"threads-{args.threads}")
    model.save(out)
    print(f"{len(records)} timings on {len(model.info['graphs'])} graphs; "
          f"{time.perf_counter() - start:.0f} s; models written to {out}")
    print(f"held-out graphs: {', '.join(held_out) or 'none (no model errors measured)'}")
    print(f"{'primitive':14s} {'calls':>6s} {'median err':>11s} {'mean err':>9s} {'<=1.5x':>7s} "
          f"{'log rms':>8s}")
    for name, e in errors.items():
        print(f"{name:14s} {e['calls']:6d} {e['median_rel_error']:10.1%} "
              f"{e['mean_rel_error']:9.1%} {e['within_1_5x']:7.1%} {e['log_rms']:8.3f}")
    _print_calibration(calibration, model)
    return 0


def _records_fingerprint(records: list[dict], here: dict) -> dict:
    """The fingerprint of the process(es) that timed `records` (chunks timed elsewhere
    are fitted here): the union of theirs (kernel choices accumulate as kernel classes
    are first measured), this process's when none has one.

    Raises:
        SystemExit: when two chunks disagree on a key (another machine or setting).
    """
    merged: dict = {}
    for record in records:
        for key, value in (record.get("fingerprint") or {}).items():
            if merged.setdefault(key, value) != value:
                print(f"gnnforge plan profile: the records were timed on different "
                      f"configurations ({key}: {merged[key]} vs {value}); fit chunks of "
                      "one machine only", file=sys.stderr)
                raise SystemExit(2)
    return merged or here


def _print_calibration(calibration: list[dict], model) -> None:
    from gnnforge.plan._calibrate import CAUTION_QUANTILE, decision_margin, rule_losses

    if not calibration:
        print("decision rule: not measured (margin 0, caution 0)")
        return
    over = sorted(r["predicted_gain"] - r["measured_gain"] for r in calibration)
    wrong = sum((r["predicted_gain"] > 0) != (r["measured_gain"] > 0) for r in calibration)
    print(f"plan-ratio error on held-out graphs ({len(over)} candidate-vs-default pairs): "
          f"median |log error| {statistics.median(abs(v) for v in over):.3f}, mean "
          f"{statistics.fmean(over):+.3f} (positive: gains over-predicted), sign wrong in "
          f"{wrong}")
    caution, margin = model.decision_caution, model.decision_margin
    lost = rule_losses(calibration, margin, caution)
    noise = statistics.median(r.get("timing_noise", 0.0) for r in calibration)
    print(f"decision rule: leave the default when predicted gain - {caution:.2f} x spread > "
          f"{margin:.3f} (caution: the {CAUTION_QUANTILE:.0%} quantile of (predicted - measured "
          f"gain) / spread); "
          f"on the calibration configurations its pick loses > 5% to the default in "
          f"{len(lost)}; a margin-only rule would need a margin of "
          f"{decision_margin(calibration):.3f}; timing noise of a measured gain (odd vs even "
          f"rounds): median {noise:.3f}")


def run(args: argparse.Namespace) -> int:
    if args.plan_command == "profile":
        return _profile(args)
    if args.explain:
        return _explain(args)
    print("gnnforge plan: give --explain or the profile subcommand (see --help)", file=sys.stderr)
    return 2
