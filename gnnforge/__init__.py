"""gnnforge: fast graph neural network training and inference on PyTorch.

The names below are imported on first use (PEP 562), so `import gnnforge` and the
`gnnforge` command's `--help` do not pay for importing torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gnnforge._version import __version__

if TYPE_CHECKING:
    from gnnforge.graph import BipartiteGraph, Graph, GraphBatch, GraphError, Subgraph

__all__ = ["BipartiteGraph", "Graph", "GraphBatch", "GraphError", "Subgraph", "__version__",
           "doctor"]

_LAZY = {name: "gnnforge.graph" for name in __all__ if name not in ("__version__", "doctor")}
_LAZY["doctor"] = "gnnforge._doctor"


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        try:  # a subpackage, as `import gnnforge; gnnforge.nn` worked when it was eager
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
