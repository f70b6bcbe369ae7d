"""`gnnforge partition`: write a partitioned dataset directory for `train --partitioned`."""

from __future__ import annotations

import argparse

from gnnforge._cli_errors import CommandError, positive_int

DESCRIPTION = ("partition a graph dataset into per-rank parts on disk (METIS or random), "
               "for gnnforge train --partitioned")

NODE_DATASETS = ("cora", "citeseer", "pubmed", "sbm")


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1], got {value}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", default="sbm",
                        help="a node-classification dataset (cora, citeseer, pubmed, sbm: "
                             "features, labels and splits as `train --task node` uses them) or "
                             "a single-graph name as `gnnforge sample --graph` takes (rmat, "
                             "rmat_s17_e21, musae-git, ...: random features, labels and splits "
                             "from --seed); default sbm")
    parser.add_argument("--parts", type=positive_int,
                        help="number of parts (the processes that will cooperate); required")
    parser.add_argument("--method", choices=("metis", "random"), default="metis",
                        help="metis (fewer cut edges, balanced on nodes, in-edges and training "
                             "seeds; needs pymetis) or random (default metis)")
    parser.add_argument("--out", metavar="DIR", help="directory to write; required")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the partitioner and of generated data (default 0)")
    parser.add_argument("--tolerance", type=_fraction, default=0.05,
                        help="metis: allowed excess of a part over the mean load (default 0.05)")
    parser.add_argument("--feature-dim", type=positive_int, default=128,
                        help="width of generated features for graphs without any (default 128)")
    parser.add_argument("--num-classes", type=positive_int, default=8,
                        help="classes of generated labels for graphs without any (default 8)")
    parser.add_argument("--train-fraction", type=_fraction, default=0.1,
                        help="generated splits: fraction of vertices for training, and as many "
                             "for validation and for test (default 0.1)")


def run(args: argparse.Namespace) -> int:
    import time

    from gnnforge.distributed._partition import balance, edge_cut, partition_nodes, \
        vertex_weights
    from gnnforge.train._partition_source import load_node_data
    from gnnforge.distributed._store import write_partitions

    for flag, value in (("--parts", args.parts), ("--out", args.out)):
        if value is None:
            raise CommandError(f"{flag} is required (e.g. gnnforge partition --dataset sbm "
                               "--parts 4 --out parts/)")
    start = time.perf_counter()
    try:
        graph, features, labels, masks = load_node_data(
            args.dataset, args.seed, args.feature_dim, args.num_classes, args.train_fraction)
    except KeyError as error:
        raise CommandError(f"--dataset: {error.args[0]}") from None
    owner = partition_nodes(graph, args.parts, args.method, seed=args.seed,
                            train_mask=masks["train"], tolerance=args.tolerance)
    achieved = balance(owner, vertex_weights(graph, masks["train"]), args.parts)
    cut = edge_cut(graph, owner)
    try:
        manifest = write_partitions(args.out, graph, owner, features, labels, masks,
                                    method=args.method, seed=args.seed, balance=achieved,
                                    edge_cut=cut)
    except FileExistsError as error:
        raise CommandError(str(error)) from None
    print(f"wrote {args.out}: {args.dataset}, {graph.num_nodes} nodes, {graph.num_edges} edges, "
          f"{manifest['feature_dim']}-wide features, {args.parts} parts ({args.method}), "
          f"{time.perf_counter() - start:.1f} s")
    print("part  nodes  in-edges  train")
    for part, sizes in enumerate(manifest["parts"]):
        print(f"{part:>4}  {sizes['nodes']:>5}  {sizes['edges']:>8}  {sizes['train']:>5}")
    over = [k for k, v in achieved.items() if v > 1.0 + args.tolerance + 1e-9]
    print("balance (largest part / mean): "
          + ", ".join(f"{k} {v:.3f}" for k, v in achieved.items())
          + (f" (above the tolerance {1.0 + args.tolerance:.3f}: {', '.join(over)})"
             if over and args.method == "metis" else ""))
    print(f"edge cut: {cut} of {graph.num_edges} edges ({manifest['edge_cut_fraction']:.1%})")
    return 0
