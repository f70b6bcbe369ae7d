"""`gnnforge pack`: pack a dataset's size histogram, search limits, or print the report."""

from __future__ import annotations

import argparse
import time

from gnnforge._cli_errors import CommandError
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

DESCRIPTION = "tuple packing of small graphs: plan, limit search (--search) or report (--report)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", default="nci",
                        help="size source: a graph collection named as `gnnforge datasets` "
                             "prints it (e.g. nci-molecules, tox21, mutag, reddit10k, "
                             "python-programs), the packing report's names (nci, moses, "
                             "python_stdlib_programs) or a CSV/SMI path (default nci)")
    parser.add_argument("--limits", type=int, nargs=2, metavar=("NODES", "EDGES"),
                        help="pack limits (default: the dataset maximum)")
    parser.add_argument("--max-graphs", type=int, default=256,
                        help="graphs per pack at most (0: no cap; default 256 as in the paper)")
    parser.add_argument("--method", default="lpfhp",
                        help="lpfhp, spfhp, none, nodes_only, edges_only")
    parser.add_argument("--heuristic", default="product",
                        help="product, sum, max, min, nodes, edges")
    parser.add_argument("--no-improve", action="store_true", help="skip the improvement step")
    parser.add_argument("--refine", type=float, metavar="SECONDS",
                        help="LP refinement budget: column-generation bound and LP rounding "
                             "(default: 0 for a plan, 30 per dataset for --report)")
    parser.add_argument("--oversized", default="error", choices=["error", "drop"])
    parser.add_argument("--report", action="store_true",
                        help="print the Table-2-like report for every size source")
    parser.add_argument("--search", action="store_true",
                        help="search (nodes, edges) limits over a grid")
    parser.add_argument("--node-factors", type=float, nargs="+",
                        default=[1, 1.25, 1.5, 2, 3, 4, 6, 8],
                        help="search grid: node limits as multiples of the largest graph")
    parser.add_argument("--edge-factors", type=float, nargs="+",
                        default=[1, 1.25, 1.5, 2, 3, 4, 6, 8],
                        help="search grid: edge limits as multiples of the largest graph")
    parser.add_argument("--target", type=float, default=0.95,
                        help="search: efficiency to reach (harmonic mean; see --per-component)")
    parser.add_argument("--per-component", action="store_true",
                        help="search: the target applies to nodes and edges separately")
    parser.add_argument("--plot", metavar="FILE.png", help="search: save the efficiency heatmap")


def _load_sizes(source: str) -> np.ndarray:
    from pathlib import Path

    import numpy as np

    from gnnforge.packing._sources import size_sources

    sources = size_sources()
    if source in sources:
        return np.asarray(sources[source](), dtype=np.int64).reshape(-1, 2)
    if Path(source).exists():
        from gnnforge.data import molecule_sizes

        return molecule_sizes(source)[0]
    from gnnforge.data import find_dataset, load_dataset

    try:
        found = find_dataset(source)
    except KeyError as error:
        raise CommandError(f"--source: {error.args[0]}; or one of {sorted(sources)}") from None
    graphs = load_dataset(found.name).graphs
    return np.array([(g.num_nodes, g.num_edges) for g in graphs], dtype=np.int64).reshape(-1, 2)


def _run_search(args: argparse.Namespace, sizes: np.ndarray, cap: int | None) -> int:
    from gnnforge.packing._histogram import size_histogram
    from gnnforge.packing._search import search_limits

    import numpy as np

    largest = sizes.max(axis=0)
    nodes = sorted({int(np.ceil(largest[0] * f)) for f in args.node_factors if f >= 1})
    edges = sorted({int(np.ceil(largest[1] * f)) for f in args.edge_factors if f >= 1})
    start = time.perf_counter()
    result = search_limits(size_histogram(sizes), nodes, edges, heuristic=args.heuristic,
                           method=args.method, max_graphs_per_pack=cap, target=args.target,
                           per_component=args.per_component)
    print(f"searched {len(nodes)} x {len(edges)} limits in {time.perf_counter() - start:.1f}s")
    print("| node limit \\ edge limit | " + " | ".join(map(str, edges)) + " |")
    print("|---|" + "---|" * len(edges))
    for i, n in enumerate(nodes):
        print(f"| {n} | " + " | ".join(f"{100 * h:.1f}%" for h in result.harmonic[i]) + " |")
    print("Pareto front (nodes, edges, node eff, edge eff, harmonic):")
    for n, e, a, b, h in result.pareto:
        print(f"  {n:>6} {e:>6}  {100 * a:6.2f}% {100 * b:6.2f}% {100 * h:6.2f}%")
    if result.best is None:
        print(f"no limits in the grid reach {100 * args.target:.1f}%")
    else:
        n, e, a, b, h = result.best
        print(f"smallest limits reaching {100 * args.target:.1f}%: nodes {n}, edges {e} "
              f"({100 * a:.2f}% / {100 * b:.2f}%, harmonic {100 * h:.2f}%)")
    if args.plot:
        result.plot(args.plot)
        print(f"wrote {args.plot}")
    return 0


def run(args: argparse.Namespace) -> int:
    cap = args.max_graphs or None
    if args.report:
        from gnnforge.packing._report import DEFAULT_REFINE_SECONDS, packing_report
        from gnnforge.packing._sources import size_sources

        refine = DEFAULT_REFINE_SECONDS if args.refine is None else args.refine
        packing_report(size_sources(), cap, refine_seconds=refine)
        return 0
    sizes = _load_sizes(args.source)
    if args.search:
        return _run_search(args, sizes, cap)
    from gnnforge.packing._histogram import size_histogram
    from gnnforge.packing._pack import pack

    start = time.perf_counter()
    histogram = size_histogram(sizes)
    limits = args.limits or sizes.max(axis=0).tolist()
    plan = pack(histogram, limits, args.heuristic, args.method, cap, oversized=args.oversized,
                improve=not args.no_improve, refine=args.refine or 0.0)
    print(f"{args.source}: {sizes.shape[0]:,} graphs, {len(histogram)} size bins, limits "
          f"{list(limits)}, {time.perf_counter() - start:.3f}s")
    print(plan.summary())
    if plan.improved_from is not None:
        print(f"improvement step: {plan.improved_from} -> {plan.num_packs} packs")
    if plan.lp is not None:
        lp = plan.lp
        print(f"LP refinement: bound {lp.bound} ({lp.lp_lower:.3f} <= LP <= {lp.lp_value:.3f}, "
              f"{'final' if lp.converged else 'not final'}), {lp.iterations} LP solves, "
              f"{lp.seconds:.1f}s; {plan.num_packs} packs = {100 * plan.best_gap:.2f}% above "
              "the proven bound")
    return 0
