"""`gnnforge datasets`: list the built-in and discovered datasets with measured statistics.

The first run parses every dataset once (a progress bar counts them) and caches graphs,
meta and statistics; later runs read only the cached meta. Features are not loaded here
(their width is reported); `load_dataset` loads them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any


from gnnforge.data._paths import cache_dir, shared_datasets_dir
from gnnforge.data._table import format_number, format_table

if TYPE_CHECKING:  # the registry imports torch: only `run` loads it
    from gnnforge.data._sources import DatasetSource

DESCRIPTION = "List built-in and discovered datasets with statistics measured from the data."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="show one dataset in detail")
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="folder to discover datasets in (default: the shared datasets folder)",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="re-parse instead of reading the cache"
    )
    parser.add_argument("--symmetrize", action="store_true", help="detail view: add reverse edges")
    parser.add_argument("--dedup", action="store_true", help="detail view: drop duplicate edges")
    parser.add_argument(
        "--remove-self-loops", action="store_true", help="detail view: drop self-loops"
    )
    parser.add_argument(
        "--plot",
        type=Path,
        default=None,
        metavar="FILE.png",
        help="detail view: save the in-degree histogram (and graph sizes) as a picture",
    )


def _listing_options(source: DatasetSource) -> dict[str, Any]:
    # Statistics do not depend on features; skipping them keeps the cache small.
    return {"features": "none"} if "features" in source.options else {}


def _meta(source: DatasetSource, use_cache: bool, root: Path | None, **options) -> dict[str, Any]:
    from gnnforge.data._registry import cached_dataset_meta, load_dataset
    from gnnforge.data._sources import PRODUCTS_FORMAT

    if source.fmt == PRODUCTS_FORMAT:  # never generated (minutes, GBs) just to be listed
        return _products_meta(source)
    options = {**_listing_options(source), **options}
    if use_cache:
        meta = cached_dataset_meta(source, **options)
        if meta is not None:
            return meta
    return load_dataset(source.name, root, use_cache=use_cache, **options).meta


def _products_meta(source: DatasetSource) -> dict[str, Any]:
    """synthetic-products' meta from its folder when generated (statistics measured then),
    else its expected sizes, marked "not generated yet"."""
    from gnnforge.data._mapped_products import generated_meta

    meta = generated_meta(source.options["num_nodes"], source.options["seed"])
    if meta is not None:
        degree = meta["stats"]
        stats = {"num_nodes": meta["num_nodes"], "num_edges": meta["num_edges"],
                 "in_degree": degree, "self_loops": 0, "duplicate_edges": 0,
                 "isolated_nodes": degree["isolated_nodes"]}
        return {**meta, "stats": stats}
    pending = "not generated yet"
    stats = {"num_nodes": source.options["num_nodes"], "num_edges": pending,
             "in_degree": {"mean": pending, "median": "", "max": ""}, "self_loops": "",
             "duplicate_edges": "", "isolated_nodes": ""}
    return {"stats": stats}


def _row(source: DatasetSource, meta: dict[str, Any]) -> list[object]:
    stats = meta["stats"]
    graphs = stats.get("num_graphs", 1)
    per_nodes = stats.get("nodes_per_graph")
    sizes = f"{per_nodes['mean']:.1f} / {int(per_nodes['max']):,}" if per_nodes else ""
    per_edges = stats.get("edges_per_graph")
    edge_sizes = f"{per_edges['mean']:.1f} / {int(per_edges['max']):,}" if per_edges else ""
    degree = stats["in_degree"]
    return [
        source.name,
        source.fmt,
        graphs,
        stats["num_nodes"],
        stats["num_edges"],
        sizes,
        edge_sizes,
        degree["mean"],
        degree["median"],
        degree["max"] if isinstance(degree["max"], str) else int(degree["max"]),
        stats["self_loops"],
        stats["duplicate_edges"],
        stats["isolated_nodes"],
    ]


_HEADERS = [
    "name",
    "format",
    "graphs",
    "nodes",
    "edges",
    "nodes/graph mean/max",
    "edges/graph mean/max",
    "in-deg mean",
    "median",
    "max",
    "self-loops",
    "dup edges",
    "isolated",
]


def _list(args: argparse.Namespace) -> int:
    from gnnforge.data._progress import progress_bar
    from gnnforge.data._registry import list_datasets

    root = args.root if args.root is not None else shared_datasets_dir()
    if args.root is not None and not args.root.is_dir():
        print(f"gnnforge datasets: --root {args.root} is not a directory", file=sys.stderr)
        return 2
    sources = list_datasets(root)
    rows = []
    start = time.perf_counter()
    for source in progress_bar(sources, desc="datasets"):
        rows.append(_row(source, _meta(source, not args.no_cache, root)))
    print(format_table(_HEADERS, rows, left=(0, 1, 5, 6)))
    print()
    if root is None:
        print(
            "No shared datasets folder was found (looked for $GNNFORGE_DATASETS, "
            "../shared/datasets and shared/datasets); only built-in datasets are listed."
        )
    else:
        print(
            f"Discovered under {root}: {len(sources) - sum(s.builtin for s in sources)} datasets."
        )
    print(
        f"Statistics measured from the data; cache: {cache_dir()} "
        f"({time.perf_counter() - start:.1f} s). Degrees are in-degrees (edges u -> v count "
        "for v); edges are as stored. Details: gnnforge datasets NAME"
    )
    return 0


def _degree_rows(stats: dict[str, Any]) -> list[list[object]]:
    rows = [
        [kind] + [stats[key][field] for field in ("min", "mean", "median", "max", "std", "skew")]
        for kind, key in (("in-degree", "in_degree"), ("out-degree", "out_degree"))
    ]
    for kind, key in (
        ("nodes per graph", "nodes_per_graph"),
        ("edges per graph", "edges_per_graph"),
    ):
        if key in stats:
            rows.append(
                [kind]
                + [stats[key][field] for field in ("min", "mean", "median", "max", "std", "skew")]
            )
    return rows


def _detail(args: argparse.Namespace) -> int:
    from gnnforge.data._registry import find_dataset

    root = args.root
    try:
        source = find_dataset(args.name, root)
    except KeyError as error:
        print(f"gnnforge datasets: {error.args[0]}", file=sys.stderr)
        return 2
    from gnnforge.data._sources import PRODUCTS_FORMAT

    if source.fmt == PRODUCTS_FORMAT:
        return _products_detail(source)
    clean = {
        "symmetrize": args.symmetrize,
        "dedup": args.dedup,
        "self_loops": "remove" if args.remove_self_loops else "keep",
    }
    meta = _meta(source, not args.no_cache, root, **clean)
    stats = meta["stats"]
    print(f"{source.name}: {source.description}")
    facts = {
        k: v
        for k, v in meta.items()
        if k not in ("stats", "files", "options", "name", "format", "drops", "members")
    }
    lines = [("format", meta.get("format", source.fmt))]
    lines += [("file", f"{path} ({path.stat().st_size:,} bytes)") for path in source.files]
    lines += [("options", meta.get("options"))] + list(facts.items())
    lines += [("cleaning", meta.get("drops"))]
    width = max(len(key) for key, _ in lines) + 2
    for key, value in lines:
        print(f"  {key + ':':<{width}}{_short(value, limit=200)}")
    print()
    overview = [
        [key, stats[key]]
        for key in (
            "num_graphs",
            "num_nodes",
            "num_edges",
            "undirected_edges",
            "self_loops",
            "duplicate_edges",
            "isolated_nodes",
            "reciprocity",
            "bandwidth",
        )
        if key in stats
    ]
    print(format_table(["statistic", "value"], overview))
    print()
    print(
        format_table(
            ["distribution", "min", "mean", "median", "max", "std", "skew"], _degree_rows(stats)
        )
    )
    print()
    headers = ["bin", "nodes with this in-degree"]
    if "nodes_per_graph_histogram" in stats:
        headers.append("graphs with this many nodes")
    print(format_table(headers, _histogram_rows(stats)))
    if args.plot is not None:
        _plot(args.plot, source.name, stats)
        print(f"\nwrote {args.plot}")
    return 0


def _products_detail(source: DatasetSource) -> int:
    """synthetic-products' parameters and, once generated, its measured sizes."""
    meta = _products_meta(source)
    print(f"{source.name}: {source.description}")
    if "spec" not in meta:
        print(f"  not generated yet with {source.options}; `load_synthetic_products()` or "
              "`gnnforge train --dataset synthetic-products` generates it (docs/data.md)")
        return 0
    facts = [("folder", meta.get("folder", "")), ("parameters", meta["spec"]),
             ("generator version", meta["version"]), ("nodes", meta["num_nodes"]),
             ("edges (directed, both directions)", meta["num_edges"]),
             ("in-degree", meta["stats"]["in_degree"]), ("split", meta["split"]),
             ("self-loops removed", meta["self_loops_removed"]),
             ("duplicates removed", meta["duplicates_removed"]),
             ("generation seconds", meta["seconds"]), ("file bytes", meta["bytes"])]
    width = max(len(key) for key, _ in facts) + 2
    for key, value in facts:
        print(f"  {key + ':':<{width}}{_short(value, limit=200)}")
    return 0


def _histogram_rows(stats: dict[str, Any]) -> list[list[object]]:
    # Both histograms use the same power-of-two bins, so the longer one labels the rows.
    columns = [stats["in_degree_histogram"]]
    if "nodes_per_graph_histogram" in stats:
        columns.append(stats["nodes_per_graph_histogram"])
    labels = max((column["bins"] for column in columns), key=len)
    return [
        [label] + [c["counts"][i] if i < len(c["counts"]) else 0 for c in columns]
        for i, label in enumerate(labels)
    ]


def _plot(path: Path, name: str, stats: dict[str, Any]) -> None:
    from gnnforge._compat import require

    matplotlib = require("matplotlib", "plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("in-degree", "nodes", stats["in_degree_histogram"])]
    if "nodes_per_graph_histogram" in stats:
        panels.append(("nodes per graph", "graphs", stats["nodes_per_graph_histogram"]))
    figure, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4), squeeze=False)
    for axis, (what, unit, histogram) in zip(axes[0], panels):
        axis.bar(range(len(histogram["counts"])), histogram["counts"], color="tab:blue")
        axis.set_xticks(range(len(histogram["bins"])), histogram["bins"], rotation=45)
        axis.set_yscale("log")
        axis.set_xlabel(f"{what} (power-of-two bins)")
        axis.set_ylabel(f"{unit} (log scale)")
        axis.set_title(f"{name}: {what}")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _short(value: object, limit: int = 90) -> str:
    text = format_number(value) if not isinstance(value, (list, dict)) else str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run(args: argparse.Namespace) -> int:
    return _detail(args) if args.name else _list(args)
