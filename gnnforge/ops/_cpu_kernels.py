"""The CPU kernels by backend name, and which of them can run a kernel class.

Names: 'native' (the host's widest variant), 'native:VARIANT' (one instruction-set build,
see `_native_build`), 'native:VARIANT/srcNMiB' (its copy_u sum/mean and the mean's
gradient in passes over source ranges of N MiB: `_native.gspmm_source_blocked`, the same
bits), 'native:VARIANT/deep' (its copy_u sum/mean with the deep prefetch:
`_native.gspmm_deep`, the same bits), 'numba' and 'mkl'
(copy_u sum/mean through torch.sparse.mm). Every
kernel here has the contract of `_cpu.gspmm_cpu` / `gsddmm_cpu` / `mean_grad_cpu` /
`extreme_grad_cpu`. The native and MKL backends compute the calls they cover
(`_native.spmm_covered`, `_native_binary.spmm_covered`, ...) and this module runs numba's
kernels for the rest, so each name is a complete backend while the backends import none of
each other (nor the native copy kernels the binary ones: both sit side by side here).
These are the candidates the calibration times (`_auto_kernels` hands this module to it
as a `_calibration_inputs.CandidateKernels`) and the per-graph trials and 'auto' choose
among (the trials also time the calibrated choice's source-blocked `forms`); this module
knows nothing of choosing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

from gnnforge.ops import _cpu, _mkl, _native, _native_binary, _native_build
from gnnforge.ops._buffers import pooled_empty
from gnnforge.ops._cpu import extreme_grad_cpu, gsddmm_cpu, gspmm_cpu, mean_grad_cpu
from gnnforge.ops._kernel_class import KernelClass, last_level_cache_bytes

__all__ = ["candidates", "fixed_extreme_grad", "fixed_gather", "fixed_mean_grad", "fixed_sddmm",
           "fixed_spmm", "forms", "native_variants", "source_block_forms"]

_ISA_ORDER = _native_build.ISA_ORDER
GATHER = "gather_rows"  # the kernel class primitive of `fixed_gather`
# Source-range sizes of the blocked copy sum/mean, as shares of the last-level cache
# (synthetic-products at F=64 on a 260 MiB L3, one thread: 2^21's 512 MiB of rows ran
# best in 64 MiB ranges, 1.37x one pass; 2^18's 64 MiB in 32 MiB ones, 1.25x). Which
# one wins, if any, is measured on the real graph (`_trials`).
_SOURCE_BLOCK_SHARES = (8, 4)
_SOURCE_FORM = "/src"
_DEEP_FORM = "/deep"


def _variant(name: str) -> str | None:
    return name.split(":", 1)[1] if name.startswith("native:") else None


def _source_form(name: str) -> tuple[str, int | None]:
    """(backend name, source-range bytes) of 'native:VARIANT/srcNMiB'; (name, None) for
    any other name."""
    if _SOURCE_FORM not in name:
        return name, None
    base, _, form = name.partition(_SOURCE_FORM)
    if not form.endswith("MiB") or not form[:-3].isdigit() or not base.startswith("native"):
        raise ValueError(f"unknown kernel name {name!r}: a source-blocked form is "
                         f"'native:VARIANT{_SOURCE_FORM}NMiB'")
    return base, int(form[:-3]) * 2**20


def source_block_forms(name: str) -> list[str]:
    """The source-blocked forms of native backend `name` for this machine's cache."""
    llc_mib = last_level_cache_bytes() // 2**20
    sizes = sorted({max(1, llc_mib // share) for share in _SOURCE_BLOCK_SHARES})
    return [f"{name}{_SOURCE_FORM}{mib}MiB" for mib in sizes]


def _native_spmm(rowptr: Tensor, col: Tensor, eids: Tensor, lhs: Tensor | None,
                 rhs: Tensor | None, op: str, reduce: str, record_args: bool = True,
                 variant: str | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """The native g-SpMM where it covers the call (copy ops `_native`'s, binary ones
    `_native_binary`'s), else numba's with its int64 binary max/min winners narrowed to
    the index dtype like the native ones (numba's kernels are looked up on `_cpu` at each
    call: tests replace them to see that none runs)."""
    if op in ("copy_lhs", "copy_rhs"):
        if _native.spmm_covered(lhs, rhs, op, reduce):
            return _native.gspmm_native(rowptr, col, eids, lhs, rhs, op, reduce, record_args,
                                        variant)
    elif _native_binary.spmm_covered(lhs, rhs, op):
        return _native_binary.gspmm_binary_native(rowptr, col, eids, lhs, rhs, op, reduce,
                                                  record_args, variant)
    out, arg_lhs, arg_rhs = _cpu.gspmm_cpu(rowptr, col, eids, lhs, rhs, op, reduce,
                                           record_args)
    if op not in ("copy_lhs", "copy_rhs") and arg_lhs.numel():
        arg_lhs, arg_rhs = arg_lhs.to(rowptr.dtype), arg_rhs.to(rowptr.dtype)
    return out, arg_lhs, arg_rhs


def _native_sddmm(lhs_row: Tensor, rhs_row: Tensor, lhs: Tensor, rhs: Tensor, op: str,
                  variant: str | None = None) -> Tensor:
    """The native g-SDDMM where it covers the call, else numba's."""
    if _native_binary.sddmm_covered(lhs, rhs, op):
        return _native_binary.gsddmm_binary_native(lhs_row, rhs_row, lhs, rhs, op, variant)
    return _cpu.gsddmm_cpu(lhs_row, rhs_row, lhs, rhs, op)


def _source_blocked_spmm(rowptr: Tensor, col: Tensor, eids: Tensor, lhs: Tensor | None,
                         rhs: Tensor | None, op: str, reduce: str, record_args: bool = True,
                         variant: str | None = None, block_bytes: int = 0
                         ) -> tuple[Tensor, Tensor, Tensor]:
    """The native copy sum/mean in source ranges of `block_bytes` where it covers the call,
    else the variant's own g-SpMM."""
    if _native.source_blocks_cover(op, reduce):
        out = _native.gspmm_source_blocked(rowptr, col, lhs, reduce, block_bytes, variant)
        # two empty winners, not one twice: a custom op's returns may not alias
        return out, torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int64)
    return _native_spmm(rowptr, col, eids, lhs, rhs, op, reduce, record_args, variant)


def _deep_spmm(rowptr: Tensor, col: Tensor, eids: Tensor, lhs: Tensor | None,
               rhs: Tensor | None, op: str, reduce: str, record_args: bool = True,
               variant: str | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """The native copy sum/mean with the deep prefetch where it covers the call, else the
    variant's own g-SpMM."""
    if _native.source_blocks_cover(op, reduce) and _native.spmm_covered(lhs, rhs, op, reduce):
        out = _native.gspmm_deep(rowptr, col, lhs, reduce, variant)
        return out, torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int64)
    return _native_spmm(rowptr, col, eids, lhs, rhs, op, reduce, record_args, variant)


def _mkl_spmm(rowptr: Tensor, col: Tensor, eids: Tensor, lhs: Tensor | None,
              rhs: Tensor | None, op: str, reduce: str,
              record_args: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """MKL's copy_u sum/mean where it covers the call, else numba's g-SpMM."""
    if _mkl.covered(lhs, op, reduce):
        return _mkl.gspmm_mkl(rowptr, col, eids, lhs, rhs, op, reduce, record_args)
    return _cpu.gspmm_cpu(rowptr, col, eids, lhs, rhs, op, reduce, record_args)


@functools.lru_cache(maxsize=None)
def fixed_spmm(name: str) -> Callable:
    """The g-SpMM kernel of backend `name` ('native[:VARIANT]', 'numba' or 'mkl')."""
    if name == "numba":
        return gspmm_cpu
    if name == "mkl":
        return _mkl_spmm
    if name.endswith(_DEEP_FORM) and name.startswith("native"):
        return functools.partial(_deep_spmm, variant=_variant(name.removesuffix(_DEEP_FORM)))
    base, block_bytes = _source_form(name)
    if block_bytes is not None:
        return functools.partial(_source_blocked_spmm, variant=_variant(base),
                                 block_bytes=block_bytes)
    return functools.partial(_native_spmm, variant=_variant(name))


@functools.lru_cache(maxsize=None)
def fixed_sddmm(name: str) -> Callable:
    """The g-SDDMM kernel of backend `name`: numba's for numba and mkl, else the native
    library's."""
    if name in ("numba", "mkl"):
        return gsddmm_cpu
    return functools.partial(_native_sddmm, variant=_variant(name))


@functools.lru_cache(maxsize=None)
def fixed_mean_grad(name: str) -> Callable:
    """The copy_u-mean gradient kernel of backend `name` (mkl has none: numba's)."""
    if name in ("numba", "mkl"):
        return mean_grad_cpu
    base, block_bytes = _source_form(name)
    return functools.partial(_native.mean_grad_native, variant=_variant(base),
                             block_bytes=block_bytes)


@functools.lru_cache(maxsize=None)
def fixed_extreme_grad(name: str) -> Callable:
    """The copy_u max/min gradient kernel of backend `name` (mkl has none: numba's)."""
    if name in ("numba", "mkl"):
        return extreme_grad_cpu
    return functools.partial(_native.extreme_grad_native, variant=_variant(name))


def native_variants() -> list[str]:
    """Native variants allowed on this host under GNNFORGE_ISA that load, narrowest first
    (built on first use: `_native_build.load`)."""
    return [name for name in allowed_native_variants() if _native_build.load(name) is not None]


def allowed_native_variants() -> list[str]:
    """Native variants this host can run under GNNFORGE_ISA's ceiling, narrowest first."""
    names = [variant.name for variant in _native_build.available_variants()]
    ceiling = _native_build.isa_restriction()
    if ceiling is not None:
        names = [name for name in names
                 if name not in _ISA_ORDER or _ISA_ORDER.index(name) <= _ISA_ORDER.index(ceiling)]
    return names


@functools.lru_cache(maxsize=None)
def fixed_gather(name: str) -> Callable[[Tensor, Tensor], Tensor]:
    """x[index] for 2-D contiguous x and 1-D index, by backend `name`: 'torch'
    (index_select) or a native build's copy-sum over one in-edge per row (the same values:
    a row of at least one vector is loaded as it is, its partial last vector too; a row
    narrower than one vector is added to 0, so a -0.0 there comes back as +0.0).

    Both write into the native kernels' reused output buffers (`_buffers`), so the race
    compares the copies, not whether an output is faulted in afresh: on a products-sized
    gather (580k random 400-byte rows) a fresh index_select output cost as much as the copy.
    """
    if name == "torch":
        return _pooled_index_select
    kernel = fixed_spmm(name)

    def gather(x: Tensor, index: Tensor) -> Tensor:
        rowptr = torch.arange(index.shape[0] + 1, dtype=index.dtype)
        return kernel(rowptr, index, index, x, None, "copy_lhs", "sum", False)[0]
    return gather


def _pooled_index_select(x: Tensor, index: Tensor) -> Tensor:
    out = pooled_empty((index.shape[0], x.shape[1]), x.dtype)
    return torch.index_select(x, 0, index, out=out)


def _source_blocks_cover(kernel_class: KernelClass) -> bool:
    """Whether the native kernels of `kernel_class` have source-blocked forms (copy_u sum
    and mean, and the mean's gradient, the weighted sum over the CSC)."""
    return kernel_class.primitive == "mean_grad" or (
        kernel_class.primitive == "copy_lhs" and kernel_class.reduce in ("sum", "mean"))


def candidates(kernel_class: KernelClass) -> list[str]:
    """Backend names that can run `kernel_class`, e.g. ['native:sse2', 'numba', 'mkl']: what
    the calibration times. The source-blocked forms are not among them (`forms`)."""
    if kernel_class.primitive == GATHER:  # copies of the values: the native builds and torch
        return [f"native:{name}" for name in native_variants()] + ["torch"]
    names = []
    if _native.supports(kernel_class.primitive, kernel_class.reduce):
        names += [f"native:{name}" for name in native_variants()]
    names.append("numba")
    if kernel_class.primitive == "copy_lhs" and kernel_class.reduce in ("sum", "mean"):
        names.append("mkl")
    return names


def forms(kernel_class: KernelClass, name: str) -> list[str]:
    """The other ways to compute native backend `name`'s bits for `kernel_class`: for copy_u
    sum and mean and the mean's gradient, its base and the base's source-blocked forms
    (`source_block_forms`), and for copy_u sum and mean the base's deep prefetch
    ('/deep'), without `name` itself; [] for other classes and backends.

    The trials time them on each real graph (`_trials.contenders`); the calibration does
    not: its graph has two in-edges a row, so few gathers share a source range and a form
    ties its base there, and a tie would flip the recorded choice (and with it the
    planner's fingerprint, `plan._fingerprint`) between identical kernels.
    """
    base, _ = _source_form(name.removesuffix(_DEEP_FORM))
    if not base.startswith("native") or not _source_blocks_cover(kernel_class):
        return []
    deep = [base + _DEEP_FORM] if kernel_class.primitive == "copy_lhs" else []
    return [other for other in [base, *source_block_forms(base), *deep] if other != name]
