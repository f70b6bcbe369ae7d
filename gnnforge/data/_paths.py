"""Where data lives: the shared real datasets and the on-disk cache of processed ones."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "shared_datasets_dir"]

_REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_datasets_dir() -> Path | None:
    """The shared real-data folder, or None when this machine has none.

    Looked up in order: $GNNFORGE_DATASETS, then `../shared/datasets` beside the checkout
    (where CI places it), then `shared/datasets` inside it.

    Raises:
        NotADirectoryError: $GNNFORGE_DATASETS is set to something that is not a folder
            (a typo would otherwise fall back to another folder, or to none, silently).
    """
    if os.environ.get("GNNFORGE_DATASETS"):
        path = Path(os.environ["GNNFORGE_DATASETS"])
        if not path.is_dir():
            raise NotADirectoryError(f"GNNFORGE_DATASETS={str(path)!r} is not a directory; "
                                     "point it at the datasets folder or unset it")
        return path
    for path in (_REPO_ROOT.parent / "shared" / "datasets", _REPO_ROOT / "shared" / "datasets"):
        if path.is_dir():
            return path
    return None


def cache_dir() -> Path:
    """Folder for processed datasets, compiled kernels and kernel timings.

    $GNNFORGE_CACHE, else $XDG_CACHE_HOME/gnnforge, else ~/.cache/gnnforge: the user's
    cache, never the installed package's folder (site-packages may be read-only and is
    shared by every user of an environment).
    """
    if os.environ.get("GNNFORGE_CACHE"):
        path = Path(os.environ["GNNFORGE_CACHE"])
    else:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        path = Path(base) / "gnnforge"
    path.mkdir(parents=True, exist_ok=True)
    return path
