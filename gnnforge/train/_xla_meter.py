"""`XlaMeter`: the step boundaries of a run on XLA, and the counts that show it stayed static.

On XLA every op is recorded into a graph that runs when the step ends; `sync` ends it
(`torch_xla.sync()`, once per optimizer step and once per evaluation batch). XLA compiles
one executable per distinct graph and caches it, so a run with static shapes compiles a
few times and then only executes. The counts come from `torch_xla.debug.metrics`, as
deltas since the meter was made:

- compiles: the 'CompileTime' metric's count (graphs XLA compiled).
- executions: the 'ExecuteTime' metric's count (compiled graphs run); per sync it is 1
  when nothing cuts a step (a host read in the middle runs the graph so far early).
- fallbacks: the sum of the 'aten::*' counters (ops torch_xla could not lower, run on
  the CPU with a round trip to the host).

The report is the run's last line: `xla: compiles=N executions_per_step=E fallbacks=F`.
"""

from __future__ import annotations

__all__ = ["XlaMeter", "accumulator_dtype", "format_counts"]


def accumulator_dtype(device):
    """float32 on XLA (TPUs have no float64), float64 elsewhere: the dtype of the running
    sums (epoch loss, evaluation totals) a loop keeps on its device."""
    import torch

    return torch.float32 if device.type == "xla" else torch.float64


def xla_counts() -> tuple[int, int, int]:
    """(compiles, executions, CPU fallbacks) so far in this process, from torch_xla."""
    import torch_xla.debug.metrics as metrics

    def count(name: str) -> int:
        data = metrics.metric_data(name)
        return 0 if data is None else int(data[0])

    fallbacks = sum(metrics.counter_value(name) or 0 for name in metrics.counter_names()
                    if name.startswith("aten::"))
    return count("CompileTime"), count("ExecuteTime"), int(fallbacks)


class XlaMeter:
    """Ends XLA steps (`sync`) and reports compiles, executions per step and fallbacks."""

    def __init__(self) -> None:
        self.start = xla_counts()
        self.syncs = 0

    def sync(self) -> None:
        """End the step: compile (first time) and run everything recorded since the last."""
        import torch_xla

        torch_xla.sync()
        self.syncs += 1

    def mark(self) -> tuple[tuple[int, int, int], int]:
        """A point to count from (`counts(since=...)`): the totals so far and the syncs."""
        import torch_xla.core.xla_model as xm

        xm.wait_device_ops()
        return xla_counts(), self.syncs

    def counts(self, since: tuple[tuple[int, int, int], int] | None = None
               ) -> dict[str, float]:
        """compiles, executions_per_step and fallbacks since this meter was made, or since
        `since` (a `mark`); waits for the queued executions, whose counts land when they
        finish."""
        start, syncs = (self.start, 0) if since is None else since
        now, synced = self.mark()
        compiles, executions, fallbacks = (a - b for a, b in zip(now, start))
        return {"compiles": compiles,
                "executions_per_step": executions / max(synced - syncs, 1),
                "fallbacks": fallbacks}

    def report(self) -> str:
        """`xla: compiles=N executions_per_step=E fallbacks=F` (E over every sync: training
        steps and evaluation batches)."""
        return format_counts(self.counts())


def format_counts(counts: dict[str, float], label: str = "xla") -> str:
    """`LABEL: compiles=N executions_per_step=E fallbacks=F` from `XlaMeter.counts`."""
    return (f"{label}: compiles={counts['compiles']} "
            f"executions_per_step={counts['executions_per_step']:.2f} "
            f"fallbacks={counts['fallbacks']}")
