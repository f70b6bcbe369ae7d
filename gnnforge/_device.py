"""Where a run computes: `--device` parsing and host-to-device copies, for every command.

Samplers, packers and loaders build their tensors on the CPU; `to_device` hands them to the
target device. Copies to a GPU go through page-locked (pinned) memory and are issued
non-blocking, so they overlap the kernels already queued; a copy to the CPU is a no-op.
`pin` does the page-locking alone, so a background thread can take it off the critical
path. Under torchrun, `process_device` gives each process its own GPU (`cuda` means
`cuda:LOCAL_RANK`, as DDP expects). 'xla' is torch_xla's device (a TPU, or the CPU under
PJRT_DEVICE=CPU), from the separate XLA environment (`make xla-env`).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads only when a device is resolved: `--help` never imports it
    import torch
    from torch import Tensor

__all__ = ["pin", "process_device", "resolve_device", "to_device", "use_process_device"]

_PATTERN = re.compile(r"cpu|cuda(:\d+)?|xla(:\d+)?")


def resolve_device(text: str | torch.device, option: str = "--device") -> torch.device:
    """The torch.device `text` names ('cpu', 'cuda', 'cuda:N' or 'xla'), checked on this
    machine. 'xla' imports torch_xla and is its current device (xla:0).

    Raises:
        ValueError: one line naming `option`, the value and what this machine has.
    """
    import torch

    name = str(text).strip()
    if not _PATTERN.fullmatch(name):
        raise ValueError(f"{option} must be 'cpu', 'cuda', 'cuda:N' or 'xla', got {name!r}")
    if name.startswith("xla"):
        return _xla_device(name, option)
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


def _xla_device(name: str, option: str) -> torch.device:
    """torch_xla's device for 'xla' / 'xla:0'; a one-line error without torch_xla."""
    try:
        import torch_xla
    except ImportError:
        raise ValueError(f"{option} {name}: torch_xla is not installed in this environment; "
                         "build the XLA one with `make xla-env` and run .venv-xla/bin/gnnforge "
                         "(PJRT_DEVICE=CPU without a TPU)") from None
    device = torch_xla.device()
    if name not in ("xla", str(device)):
        raise ValueError(f"{option} {name}: this process has one XLA device, {device}; "
                         f"use {option} xla")
    return device


def process_device(text: str | torch.device, option: str = "--device") -> torch.device:
    """The device this process computes on: `text` resolved, one GPU per process under torchrun.

    Under torchrun (LOCAL_RANK set) a bare 'cuda' means cuda:LOCAL_RANK: each process of
    a node takes its own GPU, as DDP users expect (NCCL refuses two processes on one GPU).
    An explicit 'cuda:N' is kept, unless several processes of the node would share it.
    Without torchrun, or for 'cpu', this is `resolve_device(text)`.

    Raises:
        ValueError: one line naming `option`, the value and what this machine has.
    """
    import torch

    device = resolve_device(text, option)
    if device.type != "cuda" or "LOCAL_RANK" not in os.environ:
        return device
    local_rank = int(os.environ["LOCAL_RANK"])
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if device.index is not None:
        if local_world > 1:
            raise ValueError(f"{option} {text}: the {local_world} processes of this node would "
                             f"all use cuda:{device.index}; use {option} cuda (each process "
                             "takes cuda:LOCAL_RANK)")
        return device
    count = torch.cuda.device_count()
    if local_rank >= count:
        raise ValueError(f"{option} cuda: process LOCAL_RANK={local_rank} needs cuda:"
                         f"{local_rank}, but this machine has {count} CUDA device(s); start "
                         f"at most {count} processes per node")
    return torch.device("cuda", local_rank)


def use_process_device(text: str | torch.device, option: str = "--device") -> torch.device:
    """`process_device(text)`, made this process's current CUDA device when it names one.

    NCCL, DDP and the Triton kernels work on the current CUDA device, not on the tensors'
    one: without this, every rank of a node would also create a context on cuda:0.

    Raises:
        ValueError: as `process_device`.
    """
    device = process_device(text, option)
    if device.type == "cuda" and device.index is not None:
        import torch

        torch.cuda.set_device(device)
    return device


def pin(tensor: Tensor, device: torch.device) -> Tensor:
    """`tensor` in page-locked memory when it will be copied from the CPU to a GPU, else
    itself: the staging copy of `to_device`, done ahead (e.g. in a prefetching thread)."""
    if device.type == "cuda" and tensor.device.type == "cpu":
        import torch

        with torch.cuda.device(device):  # no CUDA context on another GPU from this thread
            return tensor.pin_memory()
    return tensor


def to_device(tensor: Tensor, device: torch.device) -> Tensor:
    """`tensor` on `device`; from the CPU to a GPU through pinned memory, non-blocking."""
    if tensor.device == device:
        return tensor
    if device.type == "cuda" and tensor.device.type == "cpu":
        # pin_memory() returns a tensor that `pin` already page-locked as it is.
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)
