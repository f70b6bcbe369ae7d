"""Run a child process under a memory limit: a cgroup of its own (v1 or v2).

The limit covers everything the kernel charges to the cgroup: the child's anonymous
memory and the page cache it brings in, memory-mapped file pages included. So a child
reading a larger-than-limit file through a memory map keeps at most the limit resident
(the kernel evicts its clean file pages) and is killed only if its own allocations pass
it. Pages already in the page cache stay charged to whoever read them first, which is
why `evict_from_page_cache` exists: call it on the files first, or the limit is partly
bypassed.

A cgroup is created under this process's own (writable on a root shell in a VM or a
container with its own cgroup namespace); where that fails the error says so, and
`systemd-run --scope -p MemoryMax=...` around the whole benchmark is the alternative.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LimitedRun", "evict_from_page_cache", "run_limited"]

_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class LimitedRun:
    """How a child ran under its limit.

    Attributes:
        returncode, stdout, stderr: the child's.
        limit_bytes: the limit it ran under.
        peak_bytes: the cgroup's high-water mark (anonymous memory + page cache), None
            where the kernel does not keep one (cgroup v2 before Linux 5.19).
        limit_hits: times the cgroup reached its limit and the kernel had to reclaim
            (v1 `memory.failcnt`; v2 `memory.events` max), so the limit was binding.
        oom_kills: processes the kernel killed in the cgroup for memory.
    """

    returncode: int
    stdout: str
    stderr: str
    limit_bytes: int
    peak_bytes: int | None
    limit_hits: int
    oom_kills: int


def run_limited(command: list[str], limit_bytes: int, env: dict[str, str] | None = None,
                ) -> LimitedRun:
    """Run `command` in a new memory cgroup capped at `limit_bytes` and wait for it.

    Raises:
        PermissionError: when no cgroup can be created here (the message says why).
    """
    group = _create_group(limit_bytes)
    try:
        run = subprocess.run(command, capture_output=True, text=True, env=env,
                             preexec_fn=lambda: group.joinpath("cgroup.procs").write_text(
                                 str(os.getpid())))
        peak, hits, kills = _read_counters(group)
        return LimitedRun(run.returncode, run.stdout, run.stderr, limit_bytes, peak, hits,
                          kills)
    finally:
        group.rmdir()


def evict_from_page_cache(paths: list[Path]) -> None:
    """Drop the clean cached pages of `paths` (posix_fadvise DONTNEED), so the next reader
    reads them from storage and has them charged to its own cgroup."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)  # dirty pages are not dropped: write them first
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _create_group(limit_bytes: int) -> Path:
    """A new child cgroup of this process's, with its memory limit set."""
    version, parent = _own_memory_group()
    group = parent / f"gnnforge-limit-{os.getpid()}"
    try:
        group.mkdir()
    except OSError as error:
        raise PermissionError(f"cannot create a memory cgroup under {parent} ({error}); run "
                              f"the benchmark under `systemd-run --scope -p MemoryMax=...` "
                              f"instead") from error
    limit_file = "memory.limit_in_bytes" if version == 1 else "memory.max"
    try:
        group.joinpath(limit_file).write_text(str(limit_bytes))
    except OSError as error:
        group.rmdir()
        raise PermissionError(f"cannot set {group / limit_file} ({error})") from error
    return group


def _own_memory_group() -> tuple[int, Path]:
    """(1 or 2, the directory of this process's memory cgroup)."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    for line in lines:  # v1: "ID:memory:/path" (a hybrid machine has both kinds of lines)
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return 1, _ROOT / "memory" / path.lstrip("/")
    for line in lines:  # v2: "0::/path", the memory controller enabled on the root
        _, controllers, path = line.split(":", 2)
        if controllers == "" and "memory" in _read(_ROOT / "cgroup.controllers").split():
            return 2, _ROOT / path.lstrip("/")
    raise PermissionError("this machine has no memory cgroup controller (/proc/self/cgroup)")


def _read_counters(group: Path) -> tuple[int | None, int, int]:
    """(peak bytes or None, limit hits, OOM kills) of a finished group."""
    if group.joinpath("memory.max_usage_in_bytes").exists():  # v1
        oom = dict(line.split() for line in _read(group / "memory.oom_control").splitlines())
        return (int(_read(group / "memory.max_usage_in_bytes")),
                int(_read(group / "memory.failcnt")), int(oom.get("oom_kill", 0)))
    events = dict(line.split() for line in _read(group / "memory.events").splitlines())
    peak = _read(group / "memory.peak") if group.joinpath("memory.peak").exists() else ""
    return (int(peak) if peak else None, int(events.get("max", 0)),
            int(events.get("oom_kill", 0)))


def _read(path: Path) -> str:
    return path.read_text().strip() if path.exists() else ""
