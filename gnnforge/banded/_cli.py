"""`gnnforge reorder`: bandwidth statistics of the program graphs before and after RCM."""

from __future__ import annotations

import argparse

DESCRIPTION = "RCM-reorder program graphs; bandwidth statistics (paper Fig. 1), ours vs scipy"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", default=None,
                        help="directory of .py files (default: the Python standard library)")
    parser.add_argument("--max-files", type=int, default=200,
                        help="parse only this many files (0: all; default 200)")
    parser.add_argument("--methods", default="gnnforge,scipy",
                        help="comma-separated RCM implementations to compare")
    parser.add_argument("--block-size", type=int, default=256,
                        help="S for the out-of-band edge report (default 256)")
    parser.add_argument("--num-blocks", type=int, default=8, help="K blocks per supergraph")
    parser.add_argument("--plot", default=None, metavar="FILE.png",
                        help="save bandwidth and N/B histograms to this PNG")


def run(args: argparse.Namespace) -> int:
    from gnnforge.banded._dataset import compile_dataset
    from gnnforge.banded._stats import bandwidth_stats, plot_bandwidth_histograms
    from gnnforge.data import program_graphs

    corpus = program_graphs(args.root, max_files=args.max_files or None)
    print(corpus.report())
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    stats = bandwidth_stats(corpus.graphs, methods)
    print(stats.table())
    compiled = compile_dataset(corpus.graphs, args.block_size, args.num_blocks,
                               method=methods[0])
    print(compiled.report())
    if args.plot:
        plot_bandwidth_histograms(stats, args.plot, methods[0])
        print(f"histograms written to {args.plot}")
    return 0
