"""The kernel-class vocabulary: what a CPU kernel's speed depends on, coarsely enough to
measure each class once per machine.

A class is primitive x reduce x dtype x index dtype x width class x size class
(`KernelClass`). Width classes group rows by bytes (one 64-byte vector, up to four, up to
sixteen, 1 KiB and up); size classes say whether the rows a call gathers fit in the
last-level cache. Each class has a representative input size and width, on which the
calibration (`_calibration`) times it, and a string key under which the per-machine
record (`_tuning_record`) stores its choice.

This module is the bottom of kernel selection: it imports nothing from gnnforge, so the
record, the calibration, the per-graph trials and dispatch all share it one way.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import NamedTuple

import torch

__all__ = ["FITS", "KernelClass", "REPRESENTATIVE_BYTES", "REPRESENTATIVE_EDGES",
           "REPRESENTATIVE_NODES", "STREAMS", "WIDTH_CLASS_BYTES", "calibration_heads",
           "classify", "last_level_cache_bytes", "parse_key", "representative_size",
           "representative_work", "size_class", "width_class"]

# Row bytes at which a new width class starts, and each class's representative row bytes:
# below one 64-byte vector; one to four; four to sixteen (register-blocked rows); 1 KiB up
# (rows tiled through L1). In float32: F < 16, 16-63, 64-255, >= 256 (measured at 8, 16,
# 64 and 256, the grid widths).
WIDTH_CLASS_BYTES = (0, 64, 256, 1024)
REPRESENTATIVE_BYTES = (32, 64, 256, 1024)

# The in-cache representative graph (`_calibration_inputs`): 2^17 edges at F=256 take
# about 3 ms a call on 2 cores.
REPRESENTATIVE_NODES = 2**14
REPRESENTATIVE_EDGES = 2**17

# Size classes: whether the rows a kernel gathers fit in the last-level cache. The winner
# changes there (restricted to AVX2 on a 32 MiB-L3 EPYC: numba fastest on Pubmed's 5-20 MiB
# of features, the SSE2 build 2x faster on R-MAT's 32-128 MiB; BENCHMARKS.md). Streaming
# classes are timed on a graph whose rows are 1.5x the cache, two edges a node (the rows
# miss the cache; the call stays around 10-30 ms).
FITS, STREAMS = 0, 1
_STREAM_NODES_MAX = 2**21

# Per-head classes ('mul_heads', ...: [N, H, D] rows times [E, H, 1] weights) are keyed by
# one head's row, D: the kernels rank by it, not by H x D (Pubmed, H x D = 64 floats:
# with 8 heads of 8 the SSE2 build ran 0.66 ms and the AVX-512 one 3.2; with 4 heads of
# 16, 0.63 and 0.37). Their calibration input has `_CALIBRATION_HEADS` heads, fewer for
# 1 KiB heads so that a node's row stays within 2 KiB.
_CALIBRATION_HEADS = 8
_CALIBRATION_HEADS_ROW_BYTES = 2048

_DTYPE_NAMES = {torch.float64: "float64"}  # everything else computes in float32


class KernelClass(NamedTuple):
    """What a kernel's speed depends on, coarsely enough to measure each once."""

    primitive: str        # 'copy_lhs', 'copy_rhs', 'mean_grad', 'extreme_grad', 'add',
                          # 'mul' (binary g-SpMM), 'sddmm_dot', 'sddmm_add', 'sddmm_mul', ...
    reduce: str           # 'sum', 'mean', 'max', 'min' ('-' where there is none)
    dtype: str            # 'float32', 'float64'
    index: str            # 'int32', 'int64'
    width_class: int      # index into WIDTH_CLASS_BYTES
    size: int = FITS      # FITS or STREAMS: do the gathered rows fit in the LLC

    def key(self) -> str:
        parts = [self.primitive, self.reduce, self.dtype, self.index,
                 f"w{REPRESENTATIVE_BYTES[self.width_class]}B"]
        return ".".join(parts + (["stream"] if self.size == STREAMS else []))


def parse_key(key: str) -> KernelClass | None:
    """The class whose `key()` is `key`, or None for a key this version does not know."""
    parts = key.split(".")
    size = FITS
    if len(parts) == 6 and parts[5] == "stream":
        parts, size = parts[:5], STREAMS
    if len(parts) != 5 or not parts[4].startswith("w") or not parts[4].endswith("B"):
        return None
    representative = int(parts[4][1:-1])
    if representative not in REPRESENTATIVE_BYTES:
        return None
    return KernelClass(*parts[:4], REPRESENTATIVE_BYTES.index(representative), size)


def width_class(width: int, dtype: torch.dtype) -> int:
    """The width class of rows of `width` elements of `dtype`."""
    row_bytes = width * dtype.itemsize
    return sum(row_bytes >= start for start in WIDTH_CLASS_BYTES[1:])


@functools.lru_cache(maxsize=1)
def last_level_cache_bytes() -> int:
    """The largest CPU cache's size from sysfs (32 MiB where it cannot be read)."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = path.read_text().strip().upper()
            scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
            sizes.append(int(text.rstrip("KMG")) * scale)
        except (OSError, ValueError):
            continue
    return max(sizes, default=32 * 2**20)


def size_class(gathered_bytes: int) -> int:
    """STREAMS when a call gathers rows totalling more than the LLC, else FITS."""
    return STREAMS if gathered_bytes > last_level_cache_bytes() else FITS


@functools.lru_cache(maxsize=4096)
def classify(primitive: str, reduce: str, dtype: torch.dtype, index: torch.dtype, width: int,
             gathered_bytes: int) -> KernelClass:
    """The class of a call gathering `gathered_bytes` of rows of `width` elements.

    Cached: a call's selection costs one lookup here and one in `_calibration.choice`.
    """
    return KernelClass(primitive, reduce, _DTYPE_NAMES.get(dtype, "float32"),
                       "int64" if index == torch.int64 else "int32",
                       width_class(width, dtype), size_class(gathered_bytes))


def calibration_heads(kernel_class: KernelClass) -> int:
    """Heads of a per-head class's calibration input (1 for every other class)."""
    if not kernel_class.primitive.endswith("_heads"):
        return 1
    head_bytes = REPRESENTATIVE_BYTES[kernel_class.width_class]
    return max(2, min(_CALIBRATION_HEADS, _CALIBRATION_HEADS_ROW_BYTES // head_bytes))


def representative_size(kernel_class: KernelClass) -> tuple[int, int]:
    """(nodes, edges) of the graph a class is timed on."""
    if kernel_class.size == FITS:
        return REPRESENTATIVE_NODES, REPRESENTATIVE_EDGES
    row_bytes = REPRESENTATIVE_BYTES[kernel_class.width_class] * calibration_heads(kernel_class)
    nodes = min(_STREAM_NODES_MAX, max(REPRESENTATIVE_NODES,
                                       3 * last_level_cache_bytes() // (2 * row_bytes)))
    return nodes, 2 * nodes


def representative_work(kernel_class: KernelClass) -> int:
    """Elements a calibration call of `kernel_class` gathers (edges x representative
    width): how far a real call's size is from what the calibration measured."""
    itemsize = 8 if kernel_class.dtype == "float64" else 4
    width = max(1, REPRESENTATIVE_BYTES[kernel_class.width_class] // itemsize)
    return representative_size(kernel_class)[1] * width * calibration_heads(kernel_class)
