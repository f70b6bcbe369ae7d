"""Named sources of size tuples for the packing report and the CLI.

A source is a function returning an [n, k] int64 array of (nodes, edges) per graph. It
may raise ImportError or FileNotFoundError when its data is not on this machine; the
report then prints the reason and goes on. Other packages add theirs with
`register_size_source`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

__all__ = ["register_size_source", "size_sources"]

SizeSource = Callable[[], np.ndarray]
_EXTRA: dict[str, SizeSource] = {}


def register_size_source(name: str, source: SizeSource) -> None:
    """Add a named size source (a no-argument function returning [n, k] sizes)."""
    if not callable(source):
        raise TypeError(f"register_size_source: source for {name!r} must be callable")
    _EXTRA[name] = source


def _molecules(name: str, path: object) -> SizeSource:
    def load() -> np.ndarray:
        from gnnforge.data import molecule_sizes

        with warnings.catch_warnings():  # invalid SMILES are reported by the report's row
            warnings.simplefilter("ignore")
            sizes, _ = molecule_sizes(path)
        return sizes

    load.__name__ = f"molecules_{name}"
    return load


def _programs() -> np.ndarray:
    try:
        from gnnforge.data import program_graph_sizes
    except ImportError as error:
        raise ImportError("gnnforge.data has no program_graph_sizes yet (program graphs of "
                          "the Python standard library land with the data issue)") from error
    return program_graph_sizes()


def size_sources() -> dict[str, SizeSource]:
    """Every known source: RDKit NCI, MOSES, shared molecule files, program graphs, extras.

    Built-in molecule sources that are absent (no RDKit, no molsets, no shared datasets)
    appear as functions raising the reason.
    """
    from gnnforge.data import molecule_files

    sources: dict[str, SizeSource] = {}
    files = molecule_files()
    for name in ("nci", "moses"):
        sources[name] = _molecules(name, files[name]) if name in files else _missing(name)
    for name, path in files.items():
        if name not in sources:
            sources[name] = _molecules(name, path)
    sources["python_stdlib_programs"] = _programs
    sources.update(_EXTRA)
    return sources


def _missing(name: str) -> SizeSource:
    def load() -> np.ndarray:
        from gnnforge.data import molecule_sizes

        return molecule_sizes(name)[0]  # raises the ImportError/FileNotFoundError that says why

    return load
