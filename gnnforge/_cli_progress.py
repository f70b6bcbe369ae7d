"""`--progress/--no-progress` for every long `gnnforge` command.

Progress bars are drawn by many modules (dataset readers, samplers, the training loop),
each with its own `progress` argument; the command-line switch turns every one of them
off for the run at once, without threading a flag through each reader.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

__all__ = ["add_progress_flag", "progress_switch"]


def add_progress_flag(parser: argparse.ArgumentParser, default: object = None) -> None:
    """Add `--progress/--no-progress` unless the command defines its own, also to its
    nested subcommands (`gnnforge plan profile --no-progress`)."""
    if not any(action.dest == "progress" for action in parser._actions):
        parser.add_argument("--progress", action=argparse.BooleanOptionalAction,
                            default=default,
                            help="progress bars on stderr (default: shown on a terminal only)")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                # SUPPRESS: a child that is not given the flag keeps the parent's value
                add_progress_flag(child, argparse.SUPPRESS)


@contextlib.contextmanager
def progress_switch(enabled: bool | None) -> Iterator[None]:
    """While active, `enabled=False` disables every tqdm bar; None or True changes nothing."""
    if enabled is not False:
        yield
        return
    from tqdm import std

    original = std.tqdm.__init__

    def quiet_init(self, *args, **kwargs):
        kwargs["disable"] = True
        original(self, *args, **kwargs)

    std.tqdm.__init__ = quiet_init
    try:
        yield
    finally:
        std.tqdm.__init__ = original
