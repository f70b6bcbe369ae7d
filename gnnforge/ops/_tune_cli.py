"""`gnnforge tune`: measure the kernel candidates on this machine now, not on first use."""

from __future__ import annotations

import argparse
import time

DESCRIPTION = "Time the kernel candidates of every common kernel class and record the winners."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true",
                        help="measure again every class that has a recorded choice "
                        "(the common ones and those measured on first use)")


def run(args: argparse.Namespace) -> int:
    from gnnforge.ops._auto_kernels import tune
    from gnnforge.ops._tuning_record import machine_fingerprint, measured_classes, record_path

    start = time.perf_counter()
    tune(force=args.force, progress=getattr(args, "progress", None) is not False)
    seconds = time.perf_counter() - start
    measured = measured_classes()
    counts: dict[str, int] = {}
    for entry in measured.values():
        counts[entry["choice"]] = counts.get(entry["choice"], 0) + 1
    fingerprint = machine_fingerprint()
    print(f"tuned {len(measured)} kernel classes in {seconds:.1f} s on {fingerprint['cpu_model']} "
          f"({fingerprint['threads']} threads, ISA {fingerprint['isa']})")
    print("chosen: " + ", ".join(f"{name} x{count}" for name, count in sorted(counts.items())))
    print(f"record: {record_path()} (`gnnforge doctor` lists every class)")
    return 0
