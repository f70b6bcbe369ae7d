"""One switch for progress bars: None shows them on a terminal only, True/False forces."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tqdm.auto import tqdm

__all__ = ["progress_bar"]


def progress_bar(
    iterable: Iterable[Any] | None = None,
    *,
    total: int | None = None,
    desc: str = "",
    progress: bool | None = None,
) -> tqdm:
    """A tqdm bar; `progress=None` lets tqdm hide it when stderr is not a terminal."""
    disable = None if progress is None else not progress
    return tqdm(iterable, total=total, desc=desc, disable=disable, leave=False)
