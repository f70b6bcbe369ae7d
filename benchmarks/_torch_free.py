"""gnnforge helpers that need no torch, loaded from their files, not through the package.

A benchmark child on a torch that gnnforge does not support (GraphBolt's venv: DGL 2.1's
GraphBolt has libraries for torch 2.0-2.2 only, gnnforge needs >= 2.4) cannot import
`gnnforge.train`, whose package imports the ops; it can still measure itself the same way.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

__all__ = ["peak_rss_mib"]

_ROOT = Path(__file__).resolve().parents[1]


def _load(relative: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_torch_free_{Path(relative).stem}",
                                                  _ROOT / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


peak_rss_mib = _load("gnnforge/train/_resources.py").peak_rss_mib
