"""The `gnnforge` command: one subcommand per capability.

Each subcommand lives beside its capability in a `_cli.py` module that defines
`DESCRIPTION`, `configure(parser)` and `run(args) -> int`; this file only routes.
`configure` must stay light (no torch at module level or in `configure`): `--help` and
argument errors never import torch; `run` imports what the command needs. A module may
also define `starting(args) -> str | None`: a line printed on stderr before torch is
imported, so a long command says what it does from its first second.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gnnforge._cli_errors import CommandError, print_error
from gnnforge._cli_modules import (abandon_deferred, command_description, load_command,
                                    run_deferred)
from gnnforge._cli_progress import add_progress_flag, progress_switch
from gnnforge._version import __version__

# subcommand -> module implementing it (imported only when that subcommand is parsed)
COMMANDS = {
    "datasets": "gnnforge.data._cli",
    "train": "gnnforge.train._cli",
    "recipes": "gnnforge.train._recipes_cli",
    "pack": "gnnforge.packing._cli",
    "reorder": "gnnforge.banded._cli",
    "sample": "gnnforge.sampling._cli",
    "plan": "gnnforge._plan_cli",
    "partition": "gnnforge._partition_cli",
    "tune": "gnnforge.ops._tune_cli",
    "doctor": "gnnforge._doctor",
}

# Errors a command raises for a bad value the user gave (a name, a number, a file): one
# line and exit status 2 instead of a traceback. GNNFORGE_TRACEBACK=1 shows the traceback.
USER_ERRORS = (CommandError, ValueError, KeyError, FileNotFoundError, NotADirectoryError)


def _version_line() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        torch = version("torch")
    except PackageNotFoundError:
        torch = "not installed"
    python = ".".join(map(str, sys.version_info[:3]))
    return f"gnnforge {__version__} (torch {torch}, python {python})"


class _VersionAction(argparse.Action):
    """`--version`, with the torch version read only when asked (importlib.metadata is a
    noticeable import on a busy machine)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="print the versions of gnnforge, torch and Python and exit"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version_line())
        parser.exit()


def _chosen(argv: Sequence[str]) -> str | None:
    """The subcommand named in `argv` (the top-level parser takes no option values)."""
    for token in argv:
        if not token.startswith("-"):
            return token if token in COMMANDS else None
    return None


def build_parser(argv: Sequence[str] = ()) -> tuple[argparse.ArgumentParser, dict[str, object]]:
    """The parser, with the subcommand named in `argv` configured (others listed only)."""
    parser = argparse.ArgumentParser(prog="gnnforge", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action=_VersionAction)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = _chosen(argv)
    modules = {}
    for name, module_name in COMMANDS.items():
        if name == chosen:
            module = load_command(module_name)
            modules[name] = module
            description = module.DESCRIPTION
        else:
            description = command_description(module_name)
        sub = subparsers.add_parser(name, help=description, description=description)
        if name == chosen:
            modules[name].configure(sub)
            add_progress_flag(sub)
    return parser, modules


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser, modules = build_parser(argv)
        args = parser.parse_args(argv)
    except BaseException:  # --help, --version or a bad argument: torch was never needed
        abandon_deferred()
        raise
    if args.command is None:
        abandon_deferred()
        parser.print_help()
        return 2
    starting = getattr(modules[args.command], "starting", None)
    line = starting(args) if starting is not None and args.progress is not False else None
    if line:
        print(line, file=sys.stderr, flush=True)
    try:
        run_deferred()
        with progress_switch(getattr(args, "progress", None)):
            return int(modules[args.command].run(args) or 0)
    except USER_ERRORS as error:
        if os.environ.get("GNNFORGE_TRACEBACK"):
            raise
        print_error(args.command, error)
        return 2
    except KeyboardInterrupt:
        print(f"gnnforge {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
