"""Checkpoints written atomically, and the random state they must carry for exact resume."""

from __future__ import annotations

import os
import pickle
import random
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["CheckpointError", "capture_rng", "check_out_dir", "load_checkpoint", "restore_rng",
           "save_checkpoint"]


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or does not fit this run; the message names the file."""


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
    """Read a checkpoint written by `save_checkpoint` (tensors and plain values only).

    Raises:
        CheckpointError: naming the file, when it is empty, truncated, not a torch file,
            holds anything but tensors and plain values, or is not a dict.
        FileNotFoundError: when there is no file.
    """
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except (RuntimeError, OSError, EOFError, ValueError, TypeError, KeyError, AttributeError,
            IndexError, pickle.UnpicklingError, zipfile.BadZipFile) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise CheckpointError(f"{path}: not a readable checkpoint ({type(error).__name__}: "
                              f"{reason}); delete it or use another --out-dir") from error
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: not a checkpoint (holds a {type(state).__name__}, not "
                              "a dict); delete it or use another --out-dir")
    return state


def check_out_dir(out_dir: str | Path) -> None:
    """Create `out_dir` and prove a file can be written there, before any training.

    Raises:
        ConfigError: naming the folder and the reason (a file in the way, no permission,
            a read-only file system).
    """
    from gnnforge.train._config import ConfigError

    folder = Path(out_dir)
    probe = folder / f".write-test-{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise ConfigError(f"--out-dir {folder}: cannot write there ({error.strerror or error})"
                          ) from error
