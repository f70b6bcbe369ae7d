"""Backend selection: one explicit table keyed by (op family, device), and `use_backend`.

Backends:
    reference: plain PyTorch gather/scatter (`_reference`), any device, autograd by PyTorch.
    numba:     compiled pull kernels over CSR (`_cpu`), CPU tensors only. CPU default.
    torch:     chunked PyTorch ops over CSR (`_torch_path`), any device. CUDA default.

The fast backends run behind the `gnnforge::gspmm` / `gnnforge::gsddmm` custom ops
(`_custom_ops`), which carry autograd; the reference backend does not need them.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import NamedTuple

import torch

from gnnforge.ops._cpu import gsddmm_cpu, gspmm_cpu
from gnnforge.ops._torch_path import gsddmm_torch, gspmm_torch

__all__ = ["BACKENDS", "KERNELS", "Choice", "choose", "use_backend"]

BACKENDS = ("reference", "numba", "torch")

# (op family, backend) -> kernel. Each kernel takes CSR arrays and padded operands.
KERNELS = {
    ("gspmm", "numba"): gspmm_cpu,     # CPU; float32/float64 (others computed in float32)
    ("gsddmm", "numba"): gsddmm_cpu,
    ("gspmm", "torch"): gspmm_torch,   # any device and dtype PyTorch's scatter supports
    ("gsddmm", "torch"): gsddmm_torch,
}

# (op family, device type) -> default backend; devices not listed run the reference.
DEFAULTS = {
    ("gspmm", "cpu"): "numba",
    ("gsddmm", "cpu"): "numba",
    ("gspmm", "cuda"): "torch",
    ("gsddmm", "cuda"): "torch",
}

# Devices each backend can run on (None: any).
_DEVICES = {"reference": None, "numba": ("cpu",), "torch": None}


class Choice(NamedTuple):
    backend: str
    index_dtype: torch.dtype | None  # None: int32 when the graph fits, else int64


_FORCED: contextvars.ContextVar[Choice | None] = contextvars.ContextVar(
    "gnnforge_ops_backend", default=None)


@contextlib.contextmanager
def use_backend(name: str, index_dtype: torch.dtype | None = None) -> Iterator[None]:
    """Force every gnnforge.ops call inside the block onto one backend.

    Args:
        name: 'reference', 'numba' (CPU) or 'torch' (PyTorch ops, the CUDA path).
        index_dtype: torch.int32 or torch.int64 for the CSR indices the kernels read;
            None picks int32 whenever the graph fits.

    Raises:
        ValueError: unknown backend name or index dtype.

    Example:
        >>> with gnnforge.ops.use_backend("reference"):
        ...     out = gnnforge.ops.copy_u_sum(graph, x)
    """
    if name not in BACKENDS:
        raise ValueError(f"use_backend: name must be one of {BACKENDS}, got {name!r}")
    if index_dtype not in (None, torch.int32, torch.int64):
        raise ValueError(f"use_backend: index_dtype must be torch.int32, torch.int64 or None, "
                         f"got {index_dtype}")
    token = _FORCED.set(Choice(name, index_dtype))
    try:
        yield
    finally:
        _FORCED.reset(token)


def choose(family: str, device: torch.device) -> Choice:
    """The backend for `family` on `device`: the forced one, else the table's default.

    Raises:
        ValueError: when the forced backend cannot run on `device`.
    """
    forced = _FORCED.get()
    if forced is None:
        return Choice(DEFAULTS.get((family, device.type), "reference"), None)
    devices = _DEVICES[forced.backend]
    if devices is not None and device.type not in devices:
        raise ValueError(f"backend {forced.backend!r} runs on {devices} tensors, got tensors on "
                         f"{device}; use 'torch' or 'reference' there")
    return forced
