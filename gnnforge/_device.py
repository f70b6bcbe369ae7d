"""Where a run computes: `--device` parsing and host-to-device copies, for every command.

Samplers, packers and loaders build their tensors on the CPU; `to_device` hands them to the
target device. Copies to a GPU go through page-locked (pinned) memory and are issued
non-blocking, so they overlap the kernels already queued; a copy to the CPU is a no-op.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads only when a device is resolved: `--help` never imports it
    import torch
    from torch import Tensor

__all__ = ["resolve_device", "to_device"]

_PATTERN = re.compile(r"cpu|cuda(:\d+)?")


def resolve_device(text: str | torch.device, option: str = "--device") -> torch.device:
    """The torch.device `text` names ('cpu', 'cuda' or 'cuda:N'), checked on this machine.

    Raises:
        ValueError: one line naming `option`, the value and what this machine has.
    """
    import torch

    name = str(text).strip()
    if not _PATTERN.fullmatch(name):
        raise ValueError(f"{option} must be 'cpu', 'cuda' or 'cuda:N', got {name!r}")
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            build = ("this torch build has no CUDA support" if torch.version.cuda is None
                     else "no CUDA device is visible")
            raise ValueError(f"{option} {name}: CUDA is not available ({build}); use "
                             f"{option} cpu")
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise ValueError(f"{option} {name}: this machine has {count} CUDA device(s) "
                             f"(cuda:0 to cuda:{count - 1})")
    return device


def to_device(tensor: Tensor, device: torch.device) -> Tensor:
    """`tensor` on `device`; from the CPU to a GPU through pinned memory, non-blocking."""
    if tensor.device == device:
        return tensor
    if device.type == "cuda" and tensor.device.type == "cpu":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)
