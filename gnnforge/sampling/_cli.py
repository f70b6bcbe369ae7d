"""`gnnforge sample`: what a sampler samples, per layer and per epoch, vs batch size."""

from __future__ import annotations

import argparse

from gnnforge._cli_errors import CommandError, int_list, positive_int

DESCRIPTION = "Sample minibatches (NS, LABOR-0, LABOR-*, random walks) and report their size"

# The short names `make_sampler` takes (checked against it by the tests; kept here so that
# parsing the command line does not import torch).
SAMPLERS = ("ns", "labor0", "labor*", "rw")


def _names(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected names separated by commas, got {text!r}")
    return names


def _samplers(text: str) -> list[str]:
    names = _names(text)
    bad = [n for n in names if n not in SAMPLERS]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown sampler {bad[0]!r}; choose from "
                                         f"{', '.join(SAMPLERS)}")
    return names


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--graph", type=_names, default=["rmat"],
                        help="comma list of single-graph dataset names as `gnnforge datasets` "
                             "prints them (e.g. rmat, cora, musae-git, email-enron; real ones "
                             "need the shared datasets folder); default rmat (generated)")
    parser.add_argument("--sampler", type=_samplers, default=list(SAMPLERS),
                        help="comma list of " + ", ".join(SAMPLERS) + " (default: all)")
    parser.add_argument("--fanouts", type=int_list, default=[10, 10, 10],
                        help="neighbours per layer, input layer first (default 10,10,10)")
    parser.add_argument("--batch-size", type=positive_int, default=1024,
                        help="seed vertices per minibatch (default 1024)")
    parser.add_argument("--curve", action="store_true", help="sweep --batch-sizes instead")
    parser.add_argument("--batch-sizes", type=int_list, default=[64, 256, 1024, 4096],
                        help="the batch sizes --curve sweeps (default 64,256,1024,4096)")
    parser.add_argument("--batches", type=positive_int, default=5,
                        help="batches averaged per point (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    parser.add_argument("--plot", metavar="FILE.png", help="save the work-vs-batch-size figure")


def run(args: argparse.Namespace) -> int:
    from gnnforge.sampling._datasets import load, resolve_name
    from gnnforge.sampling._measure import format_table, plot_curve, work_curve

    try:
        names = [resolve_name(name) for name in args.graph]
    except KeyError as error:
        raise CommandError(f"--graph: {error.args[0]}") from None
    graphs = {name: load(name).graph for name in names}
    sizes = args.batch_sizes if args.curve else [args.batch_size]
    points = work_curve(graphs, args.sampler, args.fanouts, sizes, args.batches, args.seed)
    print(format_table(points))
    if args.plot:
        plot_curve(points, args.plot)
        print(f"wrote {args.plot}")
    return 0
