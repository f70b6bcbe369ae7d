"""Backend selection: one explicit table keyed by (op family, device), and `use_backend`.

Backends:
    reference: plain PyTorch gather/scatter (`_reference`), any device, autograd by PyTorch.
    native:    C++ pull kernels over CSR (`_native`, built on first use), CPU tensors only.
               CPU default when its library builds; ops it lacks run numba's kernels.
    numba:     compiled pull kernels over CSR (`_cpu`), CPU tensors only. CPU default
               when the native library cannot be built.
    triton:    Triton kernels (`_triton`), CUDA tensors; CUDA default when triton imports.
               CPU tensors only under TRITON_INTERPRET=1 (Triton's interpreter, for tests).
    torch:     chunked PyTorch ops over CSR (`_torch_path`), any device. CUDA default when
               triton is not installed.

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
from gnnforge.ops._native import available as native_available
from gnnforge.ops._native import gsddmm_native, gspmm_native
from gnnforge.ops._native_build import unavailable_reason
from gnnforge.ops._torch_path import gsddmm_torch, gspmm_torch
from gnnforge.ops._triton import available as triton_available
from gnnforge.ops._triton import gsddmm_triton, gspmm_triton, interpreting

__all__ = ["BACKENDS", "KERNELS", "Choice", "choose", "use_backend"]

BACKENDS = ("reference", "native", "numba", "torch", "triton")

# (op family, backend) -> kernel. Each kernel takes CSR arrays and padded operands.
KERNELS = {
    ("gspmm", "native"): gspmm_native,   # CPU; copy ops native, the rest numba's
    ("gsddmm", "native"): gsddmm_native,
    ("gspmm", "numba"): gspmm_cpu,     # CPU; float32/float64 (others computed in float32)
    ("gsddmm", "numba"): gsddmm_cpu,
    ("gspmm", "torch"): gspmm_torch,   # any device and dtype PyTorch's scatter supports
    ("gsddmm", "torch"): gsddmm_torch,
    ("gspmm", "triton"): gspmm_triton,   # CUDA (CPU under TRITON_INTERPRET=1); imports lazily
    ("gsddmm", "triton"): gsddmm_triton,
}

# (op family, device type) -> default backend; devices not listed run the reference.
# "native" falls back to "numba" when its library cannot be built (`_native_build`),
# "triton" to "torch" when triton is not installed (the `gpu` extra).
DEFAULTS = {
    ("gspmm", "cpu"): "native",
    ("gsddmm", "cpu"): "native",
    ("gspmm", "cuda"): "triton",
    ("gsddmm", "cuda"): "triton",
}
_FALLBACKS = {"native": ("numba", native_available), "triton": ("torch", triton_available)}

# Devices each backend can run on (None: any); "triton" also takes CPU tensors while
# TRITON_INTERPRET=1 (see `_devices`).
_DEVICES = {"reference": None, "native": ("cpu",), "numba": ("cpu",), "torch": None,
            "triton": ("cuda",)}


class Choice(NamedTuple):
    backend: str
    index_dtype: torch.dtype | None  # None: int32 when the graph fits, else int64


_FORCED: contextvars.ContextVar[Choice | None] = contextvars.ContextVar(
    "gnnforge_ops_backend", default=None)


@contextlib.contextmanager
def use_backend(name: str, index_dtype: torch.dtype | None = None) -> Iterator[None]:
    """Force every gnnforge.ops call inside the block onto one backend.

    Args:
        name: 'reference', 'native' (C++, CPU), 'numba' (CPU), 'torch' (PyTorch ops,
            any device) or 'triton' (Triton kernels: CUDA, or CPU tensors through
            Triton's interpreter when TRITON_INTERPRET=1).
        index_dtype: torch.int32 or torch.int64 for the CSR indices the kernels read;
            None picks int32 whenever the graph fits.

    Raises:
        ValueError: unknown backend name or index dtype.
        RuntimeError: 'native' when its library could not be built (the reason named);
            'triton' when triton is not installed.

    Example:
        >>> with gnnforge.ops.use_backend("reference"):
        ...     out = gnnforge.ops.copy_u_sum(graph, x)
    """
    if name not in BACKENDS:
        raise ValueError(f"use_backend: name must be one of {BACKENDS}, got {name!r}")
    if index_dtype not in (None, torch.int32, torch.int64):
        raise ValueError(f"use_backend: index_dtype must be torch.int32, torch.int64 or None, "
                         f"got {index_dtype}")
    if name == "native" and not native_available():
        raise RuntimeError(f"use_backend: the native kernels are unavailable "
                           f"({unavailable_reason()}); use 'numba'")
    if name == "triton" and not triton_available():
        raise RuntimeError("use_backend: the 'triton' backend needs triton; install it with: "
                           "pip install -c constraints.txt 'gnnforge[gpu]'")
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
        backend = DEFAULTS.get((family, device.type), "reference")
        if backend in _FALLBACKS and not _FALLBACKS[backend][1]():
            backend = _FALLBACKS[backend][0]
        return Choice(backend, None)
    devices = _devices(forced.backend)
    if devices is not None and device.type not in devices:
        hint = (" (CPU tensors only under TRITON_INTERPRET=1, Triton's interpreter)"
                if forced.backend == "triton" else "")
        raise ValueError(f"backend {forced.backend!r} runs on {devices} tensors{hint}, got "
                         f"tensors on {device}; use 'torch' or 'reference' there")
    return forced


def _devices(backend: str) -> tuple[str, ...] | None:
    if backend == "triton" and interpreting():
        return ("cuda", "cpu")
    return _DEVICES[backend]
