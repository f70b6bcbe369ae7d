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
    """
    candidates = []
    if os.environ.get("GNNFORGE_DATASETS"):
        candidates.append(Path(os.environ["GNNFORGE_DATASETS"]))
    candidates += [_REPO_ROOT.parent / "shared" / "datasets", _REPO_ROOT / "shared" / "datasets"]
    for path in candidates:
        if path.is_dir():
            return path
    return None


def cache_dir() -> Path:
    """Folder for processed datasets: $GNNFORGE_CACHE, else .gnnforge_cache in the checkout."""
    path = Path(os.environ.get("GNNFORGE_CACHE", _REPO_ROOT / ".gnnforge_cache"))
    path.mkdir(parents=True, exist_ok=True)
    return path
