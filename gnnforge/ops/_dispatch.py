"""Backend selection: one explicit table keyed by (op family, device), and `use_backend`.

Backends:
    reference: plain PyTorch gather/scatter (`_reference`), any device, autograd by PyTorch.
    auto:      the CPU default: per kernel class, the candidate measured fastest on this
               machine (`_calibration`, `_trials`, `_auto_kernels`; candidates are the native
               variants, numba and mkl).
    native:    C++ pull kernels over CSR (`_native`, built on first use), CPU tensors only,
               the host's widest instruction-set variant; 'native:sse2', 'native:avx2',
               'native:avx512' (x86) force one variant. Ops it lacks run numba's kernels.
    numba:     compiled pull kernels over CSR (`_cpu`), CPU tensors only.
    mkl:       copy_u sum/mean as torch.sparse.mm (MKL), the rest numba's; CPU only.
    triton:    Triton kernels (`_triton`), CUDA tensors; CUDA default when triton imports.
               CPU tensors only under TRITON_INTERPRET=1 (Triton's interpreter, for tests).
    torch:     chunked PyTorch ops over CSR (`_torch_path`), any device. CUDA default when
               triton is not installed.

`GNNFORGE_BACKEND=NAME` forces a backend for the whole process (a `use_backend` block
still wins inside it). The fast backends run behind the `gnnforge::gspmm` /
`gnnforge::gsddmm` custom ops (`_custom_ops`), which carry autograd and look up each
backend name's kernels (`_custom_ops.kernel`); the reference backend does not need them.
This module chooses a name and imports no kernels, only whether a backend can run here,
so the public functions reach it without stacking it on the kernel selection.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from collections.abc import Iterator
from typing import NamedTuple

import torch

from gnnforge.ops._native import available as native_available
from gnnforge.ops._native_build import available_variants, unavailable_reason
from gnnforge.ops._triton import available as triton_available
from gnnforge.ops._triton import interpreting

__all__ = ["BACKENDS", "Choice", "choose", "forced", "state", "use_backend"]

BACKENDS = ("reference", "auto", "native", "numba", "mkl", "torch", "triton")

# (op family, device type) -> default backend; devices not listed run the reference.
# "triton" falls back to "torch" when triton is not installed (the `gpu` extra).
DEFAULTS = {
    ("gspmm", "cpu"): "auto",
    ("gsddmm", "cpu"): "auto",
    ("gspmm", "cuda"): "triton",
    ("gsddmm", "cuda"): "triton",
}
_FALLBACKS = {"triton": ("torch", triton_available)}

# Devices each backend can run on (None: any; not listed: CPU); "triton" also takes CPU
# tensors while TRITON_INTERPRET=1 (see `_devices`).
_DEVICES = {"reference": None, "torch": None, "triton": ("cuda",)}


class Choice(NamedTuple):
    backend: str
    index_dtype: torch.dtype | None  # None: int32 when the graph fits, else int64


_FORCED: contextvars.ContextVar[Choice | None] = contextvars.ContextVar(
    "gnnforge_ops_backend", default=None)


def _check_name(name: str, where: str) -> None:
    if name.startswith("native:"):
        variants = [variant.name for variant in available_variants()]
        if name.split(":", 1)[1] not in variants:
            raise ValueError(f"{where}: {name!r} is not a native variant this CPU can run; "
                             f"available: {['native:' + v for v in variants]}")
    elif name not in BACKENDS:
        raise ValueError(f"{where}: backend must be one of {BACKENDS} or 'native:VARIANT', "
                         f"got {name!r}")
    variant = name.split(":", 1)[1] if name.startswith("native:") else None
    if name.startswith("native") and not native_available(variant):
        raise RuntimeError(f"{where}: the native kernels are unavailable "
                           f"({unavailable_reason(variant)}); use 'auto' or 'numba'")
    if name == "triton" and not triton_available():
        raise RuntimeError(f"{where}: the 'triton' backend needs triton; install it with: "
                           "pip install -c constraints.txt 'gnnforge[gpu]'")


@contextlib.contextmanager
def use_backend(name: str, index_dtype: torch.dtype | None = None) -> Iterator[None]:
    """Force every gnnforge.ops call inside the block onto one backend.

    Args:
        name: 'reference', 'auto' (measured per kernel class), 'native' (C++, CPU; or
            'native:sse2' / 'native:avx2' / 'native:avx512' for one variant), 'numba'
            (CPU), 'mkl' (CPU), 'torch' (PyTorch ops, any device) or 'triton' (Triton
            kernels: CUDA, or CPU tensors through Triton's interpreter when
            TRITON_INTERPRET=1).
        index_dtype: torch.int32 or torch.int64 for the CSR indices the kernels read;
            None picks int32 whenever the graph fits.

    Raises:
        ValueError: unknown backend name, variant or index dtype.
        RuntimeError: a native backend when its library could not be built (the reason
            named); 'triton' when triton is not installed.

    Example:
        >>> with gnnforge.ops.use_backend("reference"):
        ...     out = gnnforge.ops.copy_u_sum(graph, x)
    """
    _check_name(name, "use_backend")
    if index_dtype not in (None, torch.int32, torch.int64):
        raise ValueError(f"use_backend: index_dtype must be torch.int32, torch.int64 or None, "
                         f"got {index_dtype}")
    global _GENERATION
    token = _FORCED.set(Choice(name, index_dtype))
    _GENERATION += 1
    try:
        yield
    finally:
        _FORCED.reset(token)
        _GENERATION += 1


# Bumped whenever a `use_backend` block opens or closes. torch.compile cannot read a
# ContextVar (nor trace the native library's loader), so traced code takes the choice as a
# constant (`_traced_choice`) and reads this global, on which dynamo guards: a function
# compiled under one backend recompiles when called under another.
_GENERATION = 0


@functools.lru_cache(maxsize=4)
def _environment_backend(value: str) -> Choice | None:
    if not value:
        return None
    _check_name(value, "GNNFORGE_BACKEND")
    return Choice(value, None)


# GNNFORGE_BACKEND as `state` last read it; a different value bumps `_GENERATION`.
_LAST_ENVIRONMENT: str | None = None


def state() -> tuple[int, Choice | None]:
    """(generation, forced backend): what a compiled function's graph depends on here.

    A change of GNNFORGE_BACKEND within the process bumps the generation, as a
    `use_backend` block does, so dynamo's guard on `_GENERATION` recompiles for it too.
    Callers that skip dynamo's guards for a known signature (`CompiledLoss`) key on this.
    """
    global _GENERATION, _LAST_ENVIRONMENT
    value = os.environ.get("GNNFORGE_BACKEND", "").strip()
    if value != _LAST_ENVIRONMENT:
        _LAST_ENVIRONMENT = value
        _GENERATION += 1
    return _GENERATION, forced()


def forced() -> Choice | None:
    """The backend forced by `use_backend` or, outside any block, by GNNFORGE_BACKEND."""
    choice = _FORCED.get()
    if choice is None:
        choice = _environment_backend(os.environ.get("GNNFORGE_BACKEND", "").strip())
    return choice


def choose(family: str, device: torch.device) -> Choice:
    """The backend for `family` on `device`: the forced one, else the table's default.

    Raises:
        ValueError: when the forced backend cannot run on `device`.
    """
    if torch.compiler.is_compiling():
        return Choice(*_traced_choice(family, device.type, _GENERATION))
    return _choose(family, device)


@torch.compiler.assume_constant_result
def _traced_choice(family: str, device_type: str, generation: int) -> tuple:
    return tuple(_choose(family, torch.device(device_type)))


def _choose(family: str, device: torch.device) -> Choice:
    choice = forced()
    if choice is None:
        backend = DEFAULTS.get((family, device.type), "reference")
        if backend in _FALLBACKS and not _FALLBACKS[backend][1]():
            backend = _FALLBACKS[backend][0]
        return Choice(backend, None)
    devices = _devices(choice.backend)
    if devices is not None and device.type not in devices:
        hint = (" (CPU tensors only under TRITON_INTERPRET=1, Triton's interpreter)"
                if choice.backend == "triton" else "")
        raise ValueError(f"backend {choice.backend!r} runs on {devices} tensors{hint}, got "
                         f"tensors on {device}; use 'torch' or 'reference' there")
    return choice


def _devices(backend: str) -> tuple[str, ...] | None:
    if backend == "triton" and interpreting():
        return ("cuda", "cpu")
    return _DEVICES.get(backend, ("cpu",))
