"""Load a subcommand's `_cli` module without running its package's `__init__` (torch).

`gnnforge.train._cli` lives in `gnnforge.train`, whose `__init__` imports torch. To keep
`--help` and argument errors fast, the packages on the way to a command module are
created from their specs but not executed; the command module and the light modules it
imports load normally. `run_deferred()` executes those packages' `__init__` (outermost
first) in the same module objects before a command runs, so identity and attributes are
as after a plain import.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["abandon_deferred", "command_description", "load_command", "run_deferred"]

_DEFERRED: list[tuple[ModuleType, importlib.machinery.ModuleSpec]] = []


def _defer_parents(module_name: str) -> None:
    parts = module_name.split(".")
    for depth in range(2, len(parts)):
        name = ".".join(parts[:depth])
        if name in sys.modules:
            continue
        parent = sys.modules[".".join(parts[:depth - 1])]
        spec = importlib.machinery.PathFinder.find_spec(name, parent.__path__)
        if spec is None:
            raise ModuleNotFoundError(f"no module named {name!r}", name=name)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        setattr(parent, parts[depth - 1], module)
        _DEFERRED.append((module, spec))


def load_command(module_name: str) -> ModuleType:
    """Import `module_name` with its not-yet-imported parent packages left unexecuted."""
    importlib.import_module(module_name.split(".")[0])
    _defer_parents(module_name)
    return importlib.import_module(module_name)


def run_deferred() -> None:
    """Execute the `__init__` of every package `load_command` left unexecuted."""
    while _DEFERRED:
        module, spec = _DEFERRED.pop(0)
        spec.loader.exec_module(module)


def abandon_deferred() -> None:
    """Forget the unexecuted packages and the modules loaded under them (after `--help` or
    an argument error inside a longer-lived process), so a later import starts clean."""
    while _DEFERRED:
        module, _ = _DEFERRED.pop()
        name = module.__name__
        for loaded in [key for key in sys.modules if key == name or key.startswith(name + ".")]:
            del sys.modules[loaded]
        parent, _, child = name.rpartition(".")
        if parent in sys.modules and getattr(sys.modules[parent], child, None) is module:
            delattr(sys.modules[parent], child)


def command_description(module_name: str) -> str:
    """The module's literal `DESCRIPTION`, read from its source without importing it."""
    root = importlib.import_module(module_name.split(".")[0])
    path = Path(root.__file__).parent.joinpath(*module_name.split(".")[1:]).with_suffix(".py")
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except OSError:
        return ""
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "DESCRIPTION"):
            try:
                return str(ast.literal_eval(node.value))
            except ValueError:
                return ""
    return ""
