"""The `gnnforge` command: one subcommand per capability.

Each subcommand lives beside its capability in a `_cli.py` module that defines
`DESCRIPTION`, `configure(parser)` and `run(args) -> int`; this file only routes.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# subcommand -> module implementing it (imported only when that subcommand runs)
COMMANDS = {
    "datasets": "gnnforge.data._cli",
    "train": "gnnforge.train._cli",
    "pack": "gnnforge.packing._cli",
    "reorder": "gnnforge.banded._cli",
    "sample": "gnnforge.sampling._cli",
    "plan": "gnnforge.plan._cli",
    "tune": "gnnforge.ops._tune_cli",
    "doctor": "gnnforge._doctor",
}


def _available_commands() -> dict[str, object]:
    modules = {}
    for name, module_name in COMMANDS.items():
        try:
            modules[name] = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name is None or not module_name.startswith(error.name):
                raise  # a real missing dependency inside an existing command
    return modules


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, object]]:
    parser = argparse.ArgumentParser(prog="gnnforge", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = _available_commands()
    for name, module in modules.items():
        sub = subparsers.add_parser(name, help=module.DESCRIPTION, description=module.DESCRIPTION)
        module.configure(sub)
    return parser, modules


def main(argv: Sequence[str] | None = None) -> int:
    parser, modules = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return int(modules[args.command].run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
