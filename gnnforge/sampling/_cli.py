"""`gnnforge sample`: what a sampler samples, per layer and per epoch, vs batch size."""

from __future__ import annotations

import argparse

from gnnforge.sampling._datasets import GRAPHS, load
from gnnforge.sampling._measure import SAMPLER_NAMES, format_table, plot_curve, work_curve

DESCRIPTION = "Sample minibatches (NS, LABOR-0, LABOR-*, random walks) and report their size"


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, got {text!r}") from error


def _names(choices):
    def parse(text: str) -> list[str]:
        names = [x for x in text.split(",") if x]
        bad = [n for n in names if n not in choices]
        if bad or not names:
            raise argparse.ArgumentTypeError(
                f"unknown {bad or text!r}; choose from {', '.join(choices)}")
        return names
    return parse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--graph", type=_names(GRAPHS), default=["rmat-small"],
                        help=f"comma list of {', '.join(GRAPHS)} (real ones need shared/datasets)")
    parser.add_argument("--sampler", type=_names(SAMPLER_NAMES), default=list(SAMPLER_NAMES),
                        help="comma list of " + ", ".join(SAMPLER_NAMES))
    parser.add_argument("--fanouts", type=_int_list, default=[10, 10, 10],
                        help="per layer, input first")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--curve", action="store_true", help="sweep --batch-sizes instead")
    parser.add_argument("--batch-sizes", type=_int_list, default=[64, 256, 1024, 4096])
    parser.add_argument("--batches", type=int, default=5, help="batches averaged per point")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", metavar="FILE.png", help="save the work-vs-batch-size figure")


def run(args: argparse.Namespace) -> int:
    graphs = {name: load(name).graph for name in args.graph}
    sizes = args.batch_sizes if args.curve else [args.batch_size]
    points = work_curve(graphs, args.sampler, args.fanouts, sizes, args.batches, args.seed)
    print(format_table(points))
    if args.plot:
        plot_curve(points, args.plot)
        print(f"wrote {args.plot}")
    return 0
