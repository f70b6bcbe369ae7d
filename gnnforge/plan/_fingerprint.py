"""What the cost models were fitted on, and whether this process still matches it.

A cost model is valid for the machine, kernels and thread count it was timed on: the
shipped models once learned a native kernel that ran 3-4x slower on another machine of
the same kind, and GCN decisions there lost to the default order. `fingerprint()` names
everything that changes primitive costs: the CPU (model, instruction-set flags, cores),
the kernel variants the kernel calibration chose (`gnnforge.ops.kernel_choices`), the
aggregation backend in force (`gnnforge.ops.use_backend` changes it), torch threads and
library versions. `gnnforge plan profile` stores it in the models' info.json; planning
compares it (`mismatches`) and measures instead of predicting when it differs.

Only the kernel classes the planned layers run are compared (`PLANNED_KERNELS`): the
kernel calibration records every class it ever measured (max/min reductions, their
gradients, the binary g-SpMM add, ...), and a re-tune of one the planned layers never
call changes nothing the models predict. A class the models recorded but this machine
has not measured yet is not a mismatch by itself: with the CPU, instruction-set flags,
native sources and versions equal (all compared), its calibration measures the same
candidates on the same hardware; if it then chooses another variant, the next process
sees the difference.

The machine part comes from `gnnforge.ops.machine_fingerprint` when the ops package has
it, else from a local reading of /proc/cpuinfo (the same fields).
"""

from __future__ import annotations

import hashlib
import os
import platform
from collections.abc import Mapping
from functools import cache

import torch

__all__ = ["IGNORED_KEYS", "PLANNED_KERNELS", "current_fingerprint", "fingerprint",
           "fingerprint_is_read", "is_planned_kernel", "kernel_choices", "machine_fingerprint",
           "mismatches"]

# Keys that describe a run without changing what primitives cost.
IGNORED_KEYS = frozenset({"gnnforge", "python"})

# (primitive, reduce) of the kernel classes the planned layers' calls run (gnnforge.ops
# class keys read "primitive.reduce.dtype.index.wNB[.stream]"; every dtype, width and
# size class of these counts). The composed edge softmax's copy_rhs max runs only where
# the native library is missing, and then numba is its one candidate: not listed.
PLANNED_KERNELS = frozenset({
    ("copy_lhs", "sum"),   # A X (GCN dynamic, GIN, SAGE/RGCN sum); every copy-sum backward
    ("copy_lhs", "mean"),  # M X (SAGE, RGCN mean)
    ("mean_grad", "-"),    # M X's backward
    ("mul", "sum"),        # weighted SpMM: Â X precomputed, one-head attention, RGCN's
                           # fused relation sum; and their input gradients
    ("mul_heads", "sum"),  # multi-head attention (and RGCN basis) aggregation, backward
    ("sddmm_add", "-"),    # attention scores (GAT, GATv2)
    ("sddmm_mul", "-"),    # GCN's edge normalisation; edge-weight gradients
    ("sddmm_dot", "-"),    # attention-weight gradients (grouped dot)
    ("copy_rhs", "sum"),   # the score SDDMM's gradients (edge values summed onto nodes)
})


def _cpuinfo() -> dict[str, str]:
    try:
        with open("/proc/cpuinfo") as handle:
            text = handle.read()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def _versions() -> dict[str, str]:
    import numpy

    out = {"torch": torch.__version__.split("+")[0], "numpy": numpy.__version__}
    try:
        import numba

        out["numba"] = numba.__version__
    except ImportError:
        pass
    return out


@cache
def _local_machine() -> dict[str, str]:
    info = _cpuinfo()
    flags = " ".join(sorted(info.get("flags", "").split()))
    return {"cpu_model": info.get("model name", platform.processor() or platform.machine()),
            "cpu_flags": hashlib.sha256(flags.encode()).hexdigest()[:16],
            "cores": str(os.cpu_count() or 0), **_versions()}


def machine_fingerprint() -> dict[str, str]:
    """CPU model, instruction-set flags digest, cores and library versions."""
    try:
        from gnnforge.ops import machine_fingerprint as from_ops
    except ImportError:
        return dict(_local_machine())
    return {k: str(v) for k, v in from_ops().items()}


def kernel_choices() -> dict[str, str]:
    """Kernel class -> the variant the kernel calibration chose (empty without one)."""
    try:
        from gnnforge.ops import kernel_choices as from_ops
    except ImportError:
        return {}
    return {k: str(v) for k, v in from_ops().items()}


def _backend() -> str:
    from gnnforge.ops._dispatch import choose

    return choose("gspmm", torch.device("cpu")).backend


def fingerprint() -> dict[str, str]:
    """Everything the cost models' validity depends on, for this process now."""
    out = {k: v for k, v in machine_fingerprint().items() if k != "threads"}
    if "torch" in out:  # "2.13.0+cpu" and "2.13.0" are one build for the kernels' costs
        out["torch"] = out["torch"].split("+")[0]
    out.update({f"kernel:{k}": v for k, v in kernel_choices().items()})
    out["backend"] = _backend()
    out["threads"] = str(torch.get_num_threads())
    return out


_CURRENT: dict[tuple, dict[str, str]] = {}


def _current_key() -> tuple:
    return (torch.get_num_threads(), os.environ.get("GNNFORGE_ISA", ""), _backend())


def fingerprint_is_read() -> bool:
    """Whether `current_fingerprint()` is already read for this process's threads,
    instruction-set restriction and backend (the next call is then a lookup)."""
    return _current_key() in _CURRENT


def current_fingerprint() -> dict[str, str]:
    """`fingerprint()`, read once per process for each (threads, instruction-set
    restriction, backend): reading it hashes the native sources and the kernel record
    (about 1 ms, most of a planning step), and within a process only those three change
    what it says. Kernel classes first measured later in the process are not compared
    (`mismatches` compares the keys both sides have)."""
    key = _current_key()
    if key not in _CURRENT:
        _CURRENT[key] = fingerprint()
    return _CURRENT[key]


def is_planned_kernel(key: str) -> bool:
    """Whether a fingerprint key is compared: every non-kernel key, and "kernel:CLASS"
    when CLASS's (primitive, reduce) is one the planned layers run."""
    if not key.startswith("kernel:"):
        return True
    primitive, _, rest = key.removeprefix("kernel:").partition(".")
    return (primitive, rest.partition(".")[0]) in PLANNED_KERNELS


def mismatches(recorded: Mapping[str, str] | None, current: Mapping[str, str]
               ) -> list[str]:
    """The keys on which two fingerprints differ ("key: recorded -> current"); a missing
    fingerprint is one mismatch ("no fingerprint"). Not compared: keys in `IGNORED_KEYS`,
    kernel classes the planned layers never run (`is_planned_kernel`), and keys only one
    side has (a newer fingerprint with more fields; a kernel class not measured yet)."""
    if not recorded:
        return ["no fingerprint (models profiled before fingerprints were recorded)"]
    return [f"{key}: {recorded[key]} -> {current[key]}" for key in sorted(recorded)
            if key in current and key not in IGNORED_KEYS and is_planned_kernel(key)
            and str(recorded[key]) != current[key]]
