"""The tuner's sum/mean classes at F >= 32: is each wider build at least as fast as the
narrower one (issue 31)?

For every float32/int32 class of `gnnforge tune` that sums or averages rows of at least
32 floats (copy_lhs sum and mean, in cache and streaming, and the mean gradient), times
the native builds on the class's calibration input (the tuner's own runner), in
interleaved rounds after a warm-up each, and prints min and median per build and the
ratio SSE2 / AVX2 (>= 1: the AVX2 build is at least as fast). The AVX-512 build is shown
where this CPU has it.

    python benchmarks/tuner_isa.py --rounds 15
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gnnforge.ops import _cpu_kernels  # noqa: E402
from gnnforge.ops._calibration_inputs import runner  # noqa: E402
from gnnforge.ops._kernel_class import REPRESENTATIVE_BYTES, STREAMS, KernelClass  # noqa: E402
from gnnforge.ops._native_build import available_variants  # noqa: E402

WIDE_CLASSES = (2, 3)  # width classes of 256 and 1024 bytes: F = 64 and 256 float32


def classes() -> list[KernelClass]:
    out = []
    for width in WIDE_CLASSES:
        for reduce in ("sum", "mean"):
            out.append(KernelClass("copy_lhs", reduce, "float32", "int32", width))
            out.append(KernelClass("copy_lhs", reduce, "float32", "int32", width, STREAMS))
        out.append(KernelClass("mean_grad", "-", "float32", "int32", width))
    return out


def time_builds(kernel_class: KernelClass, builds: list[str], rounds: int) -> dict[str, list]:
    """Seconds per call of each build, interleaved rounds after one warm-up call each."""
    runs = {build: runner(build, kernel_class, _cpu_kernels) for build in builds}
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {build: [] for build in builds}
    for _ in range(rounds):
        for build, run in runs.items():
            start = time.perf_counter()
            run()
            times[build].append(time.perf_counter() - start)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    builds = [f"native:{isa}" for isa in ("sse2", "avx2", "avx512")
              if isa in {variant.name for variant in available_variants()}]
    if "native:avx2" not in builds:
        print("this CPU has no AVX2: nothing to compare")
        return 0
    print(f"builds: {', '.join(builds)}; {args.rounds} interleaved rounds per class, "
          "times in ms (min / median)")
    head = " | ".join(f"{build} ms" for build in builds)
    print(f"| class | F | {head} | SSE2 / AVX2 (min) | SSE2 / AVX2 (median) |")
    print("|---|---|" + "---|" * len(builds) + "---|---|")
    ratios = []
    for kernel_class in classes():
        times = time_builds(kernel_class, builds, args.rounds)
        cells = [f"{1e3 * min(times[b]):.3f} / {1e3 * statistics.median(times[b]):.3f}"
                 for b in builds]
        by_min = min(times["native:sse2"]) / min(times["native:avx2"])
        by_median = (statistics.median(times["native:sse2"])
                     / statistics.median(times["native:avx2"]))
        ratios.append(by_min)
        floats = REPRESENTATIVE_BYTES[kernel_class.width_class] // 4
        print(f"| {kernel_class.key()} | {floats} | {' | '.join(cells)} | {by_min:.2f} | "
              f"{by_median:.2f} |", flush=True)
    slower = sum(ratio < 1.0 for ratio in ratios)
    print(f"AVX2 at least as fast as SSE2 (by the min) in {len(ratios) - slower} of "
          f"{len(ratios)} classes; lowest SSE2 / AVX2 {min(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
