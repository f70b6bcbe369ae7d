"""Optional dependencies, probed in one place.

`require(module, extra)` raises an ImportError naming the extra to install, so a user
who lacks an optional package learns exactly which `pip install gnnforge[...]` fixes it.
"""

from __future__ import annotations

import importlib
import importlib.util
from functools import cache
from types import ModuleType

__all__ = ["available", "require"]


@cache
def available(module: str) -> bool:
    """True when `module` can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require(module: str, extra: str) -> ModuleType:
    """Import and return `module`, or raise ImportError naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"{module} is needed here but is not installed; "
            f"install it with: pip install -c constraints.txt 'gnnforge[{extra}]'"
        ) from error
