"""The machine line under each table: CPU, cores, load, time, commit, interpreter.

Everything here is read from the machine (/proc, os, git, the interpreter that ran the
benchmark), never typed in, so a table cannot carry another machine's description.
"""

from __future__ import annotations

import os
import platform
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

__all__ = ["Machine", "describe_machine", "git_commit", "interpreter_versions", "machine_line",
           "utc_now"]

# A 1-minute load average at or above this before a run means other jobs were running.
_SHARED_LOAD = 0.5

# Printed by the interpreter a run uses: its Python, torch and, where they import, the
# peers. A peer that fails to import says why in one line (DGL needs patching for new
# torch builds, ../shared/peers/install_peers.sh).
_PROBE = r"""
import importlib, platform, sys
parts = ["Python " + platform.python_version()]
modules = [("torch", "torch")]
if sys.argv[1] == "peers":
    modules += [("dgl", "DGL"), ("torch_geometric", "PyG")]
for module, label in modules:
    try:
        parts.append(label + " " + importlib.import_module(module).__version__)
    except Exception as error:
        parts.append(label + " unavailable (" + type(error).__name__ + ")")
print(", ".join(parts))
"""


@dataclass(frozen=True)
class Machine:
    """What the machine line says about the hardware."""

    cpu: str
    cores: int  # physical cores
    threads: int  # logical CPUs (hardware threads)
    memory_gib: float


def _cpuinfo() -> list[dict[str, str]]:
    path = Path("/proc/cpuinfo")
    if not path.exists():
        return []
    blocks = []
    for block in path.read_text().split("\n\n"):
        fields = {}
        for line in block.splitlines():
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        if fields.get("processor"):
            blocks.append(fields)
    return blocks


def describe_machine() -> Machine:
    """CPU model, physical cores, logical CPUs and memory of this machine."""
    blocks = _cpuinfo()
    cpu = next((b["model name"] for b in blocks if b.get("model name")), "") \
        or platform.processor() or platform.machine()
    threads = os.cpu_count() or len(blocks) or 1
    cores = len({(b.get("physical id"), b.get("core id")) for b in blocks
                 if "core id" in b}) or threads
    memory_gib = 0.0
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gib = int(line.split()[1]) / 2**20
    return Machine(cpu, cores, threads, memory_gib)


def git_commit(root: Path) -> str:
    """HEAD's short hash, with "+ uncommitted changes" when the tree differs from it (aside
    from report.py's own output: BENCHMARKS.md and the details files); "unknown (not a
    git checkout)" outside one."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, text=True,
                              capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", ".",
                                ":(exclude)BENCHMARKS.md", ":(exclude)benchmarks/results"],
                               cwd=root, text=True, capture_output=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + (" + uncommitted changes" if dirty else "")


@lru_cache(maxsize=None)
def interpreter_versions(python: str, peers: bool) -> str:
    """One line of versions as `python` sees them, with DGL's and PyG's when `peers` (asked
    once per process: importing torch takes seconds)."""
    try:
        result = subprocess.run([python, "-c", _PROBE, "peers" if peers else "-"], text=True,
                                capture_output=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"interpreter {python} failed to start ({type(error).__name__})"
    if result.returncode != 0:
        return f"interpreter {python} failed (exit {result.returncode})"
    return result.stdout.strip()


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def machine_line(machine: Machine, load_before: float, load_after: float,
                 start: datetime, end: datetime, commit: str, versions: str) -> str:
    """The line printed under a run's command; says "shared with other jobs" when the load
    before the run shows them."""
    span = f"{start:%Y-%m-%d %H:%M}-{end:%H:%M} UTC"
    shared = (", shared with other jobs" if load_before >= _SHARED_LOAD else ", quiet")
    return (f"Machine: {machine.cpu}, {machine.cores} cores / {machine.threads} hardware "
            f"threads, {machine.memory_gib:.0f} GiB; load average (1 min) "
            f"{load_before:.2f} before, {load_after:.2f} after{shared}; {span}; "
            f"commit {commit}; {versions}.")
