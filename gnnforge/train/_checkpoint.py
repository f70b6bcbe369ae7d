"""Checkpoints written atomically, and the random state they must carry for exact resume."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["capture_rng", "load_checkpoint", "restore_rng", "save_checkpoint"]


def capture_rng() -> dict[str, Any]:
    """The global torch, numpy and Python random states, as tensors/ints (safe to load)."""
    kind, keys, position, has_gauss, gauss = np.random.get_state()
    return {"torch": torch.get_rng_state(),
            "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)),
                      "position": int(position), "has_gauss": int(has_gauss),
                      "gauss": float(gauss)},
            "python": list(_python_state())}


def _python_state() -> tuple:
    version, internal, gauss = random.getstate()
    return version, list(internal), gauss


def restore_rng(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    numpy = state["numpy"]
    np.random.set_state((numpy["kind"], numpy["keys"].numpy().astype(np.uint32),
                         numpy["position"], numpy["has_gauss"], numpy["gauss"]))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> None:
    """Write `payload` to `path` atomically: a killed writer leaves the old file intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(temporary, "wb") as handle:
            torch.save(payload, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)  # only left behind when writing failed


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by `save_checkpoint` (tensors and plain values only)."""
    return torch.load(path, map_location="cpu", weights_only=True)
