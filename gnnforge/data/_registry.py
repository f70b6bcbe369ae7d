"""Find datasets by name and load them through the on-disk cache.

`list_datasets(root)` returns the built-in sources and those discovered under `root`
(default: `shared_datasets_dir()`). `load_dataset(name, root, **options)` builds the
dataset once, stores graphs, meta and statistics in the cache (keyed by the source files'
identity and every option) and afterwards reads it back from there.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gnnforge.data._clean import CleanOptions
from gnnforge.data._paths import shared_datasets_dir
from gnnforge.data._sources import DISCOVERY_RULES, DatasetSource, builtin_sources
from gnnforge.data._stats import collection_stats, graph_stats
from gnnforge.data._store import cached_graphs, cached_meta
from gnnforge.graph import Graph

__all__ = [
    "Dataset",
    "cache_options",
    "cached_dataset_meta",
    "discover_datasets",
    "find_dataset",
    "list_datasets",
    "load_dataset",
]

_CLEAN_KEYS = ("symmetrize", "dedup", "self_loops")
# Part of every cache key: bump it whenever a reader's output or the meta/stats change,
# so caches written by older code are rebuilt instead of served.
PROCESSING_VERSION = 3
_MAX_DEPTH = 3


@dataclass(frozen=True)
class Dataset:
    """A loaded dataset: its graphs and what is known about them.

    Attributes:
        name: the source's name.
        graphs: the graphs (a single-graph dataset holds one).
        meta: format, files, options, drops (edges removed or added by cleaning, counted),
            format-specific facts (feature_dim, classes, split sizes) and `stats`.
    """

    name: str
    graphs: list[Graph]
    meta: dict[str, Any]

    @property
    def graph(self) -> Graph:
        """The graph of a single-graph dataset."""
        if len(self.graphs) != 1:
            raise ValueError(f"dataset {self.name!r} holds {len(self.graphs)} graphs; use .graphs")
        return self.graphs[0]

    @property
    def stats(self) -> dict[str, Any]:
        return self.meta["stats"]

    def __len__(self) -> int:
        return len(self.graphs)

    def __getitem__(self, index: int) -> Graph:
        return self.graphs[index]

    def __iter__(self) -> Iterator[Graph]:
        return iter(self.graphs)

    def __repr__(self) -> str:
        stats = self.meta.get("stats", {})
        return (
            f"Dataset({self.name!r}, graphs={len(self.graphs)}, "
            f"nodes={stats.get('num_nodes')}, edges={stats.get('num_edges')})"
        )


def _walk(root: Path) -> list[Path]:
    found = []
    for depth in range(_MAX_DEPTH + 1):
        found += [p for p in root.glob("/".join(["*"] * (depth + 1))) if p.is_file()]
    return sorted(found)


def discover_datasets(root: str | Path) -> list[DatasetSource]:
    """Sources for the data files under `root` (up to 3 folders deep).

    Raises:
        FileNotFoundError: when `root` is not a directory.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"dataset root {str(root)!r} is not a directory")
    claimed: set[Path] = set()
    sources: list[DatasetSource] = []
    names = {source.name for source in builtin_sources()}
    files = _walk(root)
    # Rules outside, files inside: an earlier rule wins a name (Planetoid's "cora" over
    # the gnn-benchmark "cora.npz", which becomes "cora-npz").
    for rule in DISCOVERY_RULES:
        for path in files:
            if path in claimed:
                continue
            source = rule(path)
            if source is None:
                continue
            claimed.update(source.files)
            name = _unique_name(source, names)
            names.add(name)
            sources.append(dataclasses.replace(source, name=name))
    return sorted(sources, key=lambda source: source.files[0])


def _unique_name(source: DatasetSource, taken: set[str]) -> str:
    name, suffix = source.name, 2
    if name in taken:
        name = f"{source.name}-{source.fmt}"
    while name in taken:
        name, suffix = f"{source.name}-{source.fmt}{suffix}", suffix + 1
    return name


def list_datasets(root: str | Path | None = None) -> list[DatasetSource]:
    """Built-in sources followed by those discovered under `root` (default: the shared
    folder; only built-ins when there is none)."""
    root = root if root is not None else shared_datasets_dir()
    return builtin_sources() + (discover_datasets(root) if root is not None else [])


def find_dataset(name: str, root: str | Path | None = None) -> DatasetSource:
    """The source called `name` (case-insensitive).

    Raises:
        KeyError: naming the closest known names.
    """
    sources = list_datasets(root)
    for source in sources:
        if source.name.lower() == name.lower():
            return source
    known = [source.name for source in sources]
    close = difflib.get_close_matches(name.lower(), known, n=3)
    where = root if root is not None else shared_datasets_dir()
    where = where if where is not None else "no shared datasets folder: set GNNFORGE_DATASETS"
    raise KeyError(
        f"no dataset {name!r} (searched built-ins and {where}); "
        + (f"did you mean {', '.join(close)}? " if close else "")
        + f"known: {', '.join(known)}"
    )


def _split_options(
    source: DatasetSource, options: dict[str, Any]
) -> tuple[CleanOptions, dict[str, Any]]:
    clean = CleanOptions(**{k: options[k] for k in _CLEAN_KEYS if k in options})
    extra = {k: v for k, v in options.items() if k not in _CLEAN_KEYS}
    unknown = sorted(set(extra) - set(source.options))
    if unknown:
        raise TypeError(
            f"dataset {source.name!r} does not take option(s) {unknown}; it takes "
            f"{sorted(source.options) + list(_CLEAN_KEYS)}"
        )
    return clean, {**source.options, **extra}


def cache_options(
    source: DatasetSource, clean: CleanOptions, extra: dict[str, Any]
) -> dict[str, Any]:
    """Everything that changes the processed result (progress switches excluded)."""
    keep = {k: v for k, v in extra.items() if k != "progress"}
    return {"source": source.name, "format": source.fmt, "version": PROCESSING_VERSION,
            **clean.as_dict(), **keep}


def load_dataset(
    name: str, root: str | Path | None = None, *, use_cache: bool = True, **options: Any
) -> Dataset:
    """Load a dataset by name, from the cache when it was built before.

    Args:
        name: see `list_datasets()`; case-insensitive.
        root: folder to discover datasets in (default: the shared datasets folder).
        use_cache: False rebuilds from the files and writes nothing.
        **options: `symmetrize`, `dedup`, `self_loops` (all sources; see CleanOptions)
            and the source's own options (`DatasetSource.options`, e.g. `features`).

    Raises:
        KeyError: unknown name. TypeError: an option the source does not take.
        DataFormatError: a malformed file (named, with the line where known).
    """
    source = find_dataset(name, root)
    clean, extra = _split_options(source, options)

    def build():
        graphs, meta = source.build(clean, **extra)
        stats = collection_stats(graphs) if source.collection else graph_stats(graphs[0])
        meta.update(name=source.name, options=cache_options(source, clean, extra), stats=stats)
        return graphs, meta

    graphs, meta = cached_graphs(
        source.name, source.files, cache_options(source, clean, extra), build, use_cache=use_cache
    )
    return Dataset(source.name, graphs, meta)


def cached_dataset_meta(source: DatasetSource, **options: Any) -> dict[str, Any] | None:
    """The meta (with stats) of `source` if it is cached with these options, else None."""
    clean, extra = _split_options(source, options)
    return cached_meta(source.name, source.files, cache_options(source, clean, extra))
