"""Loading a benchmark script (benchmarks/NAME.py) as a module, for tests of its pieces."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_script(name: str) -> ModuleType:
    """benchmarks/`name`.py, executed as a fresh module (it is not a package)."""
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark",
                                                  ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
