"""How the `gnnforge` command reports a bad value: one line on stderr, exit status 2."""

from __future__ import annotations

import argparse
import sys

__all__ = ["CommandError", "int_list", "non_negative_int", "positive_int", "print_error"]


class CommandError(Exception):
    """A bad argument value or combination, found while a command runs; the message names it."""


def print_error(command: str, error: BaseException) -> None:
    """`gnnforge COMMAND: error: MESSAGE` on stderr (KeyError's quotes left off)."""
    message = error.args[0] if isinstance(error, KeyError) and error.args else str(error)
    first = str(message).strip().splitlines()[0] if str(message).strip() else type(error).__name__
    print(f"gnnforge {command}: error: {first}", file=sys.stderr)


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _int_at_least(text, 0)


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
    return value


def int_list(text: str, low: int = 1) -> list[int]:
    """argparse type: comma-separated integers, each >= `low` (at least one)."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}")
    try:
        values = [int(part) for part in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected integers separated by commas, got {text!r}") from None
    bad = [v for v in values if v < low]
    if bad:
        raise argparse.ArgumentTypeError(f"every entry must be >= {low}, got {bad[0]} in {text!r}")
    return values
