"""`gnnforge doctor`: what this machine runs and why, in one report.

Versions, the CPU as the kernels see it, the native library's variants, every kernel
class measured on this machine (each candidate's time and the choice), the datasets
found, the caches, and whether the planner's shipped cost models were fitted on a
machine like this one. `doctor()` returns the same report as text.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import platform
import sys

__all__ = ["doctor"]

DESCRIPTION = "Print versions, the CPU, the kernels chosen on this machine and the data found."

_OPTIONAL = ("numpy", "scipy", "numba", "tqdm", "rdkit", "torch_geometric", "pymetis",
             "xgboost", "matplotlib", "triton", "hypothesis")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tune", action="store_true",
                        help="measure the common kernel classes first (gnnforge tune)")


def run(args: argparse.Namespace) -> int:
    if args.tune:
        from gnnforge.ops import tune

        tune(progress=True)
    print(doctor())
    return 0


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name.replace("_", "-"))
    except importlib.metadata.PackageNotFoundError:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"


def _versions() -> list[str]:
    import torch

    from gnnforge import __version__

    lines = [f"gnnforge {__version__}, Python {platform.python_version()}, "
             f"torch {torch.__version__} (CUDA {'available' if torch.cuda.is_available() else 'not available'})"]
    lines += [f"  {name}: {_version(name)}" for name in _OPTIONAL]
    return lines


def _machine() -> list[str]:
    from gnnforge.ops import machine_fingerprint
    from gnnforge.ops._native_build import cpu_flags

    fingerprint = machine_fingerprint()
    wide = [flag for flag in ("sse2", "avx", "avx2", "fma", "avx512f", "avx512bw", "neon", "asimd")
            if flag in cpu_flags()]
    return [f"CPU: {fingerprint['cpu_model']} ({fingerprint['machine']}), "
            f"{fingerprint['cores']} cores, torch threads {fingerprint['threads']}",
            f"  vector extensions: {' '.join(wide) or 'unknown'}; "
            f"GNNFORGE_ISA: {fingerprint['isa']}"]


def _native() -> list[str]:
    from gnnforge.ops._native_build import available_variants, build, unavailable_reason
    from gnnforge.ops._native_build import load

    lines = []
    for variant in available_variants():
        library = load(variant.name)
        state = (f"built ({build(variant.name).name})" if library is not None
                 else f"unavailable: {unavailable_reason(variant.name)}")
        lines.append(f"  native:{variant.name}: {state}")
    return ["native kernel library:"] + lines


def _kernels() -> list[str]:
    from gnnforge.ops import measured_classes, tuning_record_path
    from gnnforge.ops._tuning_record import measured_keys
    from gnnforge.ops._dispatch import forced

    measured = measured_classes()
    choice = forced()
    lines = [f"kernel selection: record {tuning_record_path()}"]
    if choice is not None:
        lines.append(f"  forced backend: {choice.backend} (GNNFORGE_BACKEND or use_backend)")
    if not measured:
        lines.append("  no kernel class measured yet: they are measured on first use, or all "
                     "at once with `gnnforge tune`")
    # Kernel classes, then the GEMM product classes (`ops.dense_product`).
    for key, entry in {**measured, **measured_keys()}.items():
        times = ", ".join(f"{name} {ms:.3g}" for name, ms in
                          sorted(entry.get("min_ms", entry.get("median_ms", {})).items(),
                                 key=lambda item: item[1]))
        lines.append(f"  {key:34s} -> {entry['choice']:12s} (ms: {times})")
    busy = [key for key, entry in measured.items() if entry.get("descheduled_runs", 0)]
    if busy:
        lines.append(f"  {len(busy)} class(es) measured while other processes had the cores "
                     f"(timed calls descheduled even after retries, e.g. {busy[0]}): their "
                     f"choice may be arbitrary; `gnnforge tune --force` on a quieter "
                     f"machine measures them again")
    return lines


def _datasets() -> list[str]:
    from gnnforge.data import cache_dir, shared_datasets_dir

    folder = shared_datasets_dir()
    lines = [f"cache: {cache_dir()}"]
    if folder is None:
        return lines + ["datasets: no shared datasets folder (set GNNFORGE_DATASETS); the "
                        "built-in generators and molecule sets still work"]
    names = sorted(path.name for path in folder.iterdir() if path.is_dir())
    return lines + [f"datasets: {folder} ({len(names)} folders: {', '.join(names)})"]


def _planner() -> list[str]:
    try:
        plan = importlib.import_module("gnnforge.plan")
    except ImportError as error:
        return [f"planner: unavailable ({error})"]
    status = getattr(plan, "model_status", None)
    if status is None:
        return []
    return [f"planner: {status()}"]


def doctor() -> str:
    """The report `gnnforge doctor` prints, as text."""
    sections = [_versions(), _machine(), _native(), _kernels(), _datasets(), _planner()]
    return "\n".join(line for section in sections for line in section)


if __name__ == "__main__":
    sys.exit(run(argparse.Namespace(tune=False)))
