"""`CompiledLoss`: a training step's loss under torch.compile, and the counts that prove it.

`gnnforge train --compile` runs each task's loss (forward, and through AOTAutograd its
backward) under `torch.compile(fullgraph=True, dynamic=False)`: one graph per distinct
input shape, no graph breaks (fullgraph raises on one), and no recompiles beyond one per
shape. The counts come from torch._dynamo's counters, as deltas over the run:

- frames: graphs dynamo compiled (`counters["stats"]["unique_graphs"]`): one per compile
  of the step (fullgraph: one frame, one graph).
- graph_breaks: sum of `counters["graph_break"]` (0 by construction under fullgraph).
- recompiles: frames beyond one per distinct input signature (shapes, dtypes, devices of
  the tensors passed in; the model's mode, grad and autocast state): a compile that a
  shape change does not explain.

A call whose signature was compiled before skips dynamo's guard evaluation
(`torch.compiler.set_stance(skip_guard_eval_unsafe=True)`): the signature already says
which cached graph applies. It therefore holds everything the guards would check,
including the ops backend the graph was traced under (`gnnforge.ops._dispatch.state()`:
a `use_backend` block or a changed GNNFORGE_BACKEND compiles anew).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from gnnforge.ops import _dispatch

__all__ = ["CompiledLoss", "dynamo_counts"]


def dynamo_counts() -> tuple[int, int]:
    """(frames compiled, graph breaks) so far in this process, from torch._dynamo."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())


class CompiledLoss:
    """`function(model, *inputs)` compiled once per input shape, with a report.

    Args:
        function: returns the scalar loss; every argument after the model is tensors (or
            dataclasses, tuples and dicts of them) whose shapes the data fix.
        backend: torch.compile's backend (inductor; tests of the counts use 'aot_eager',
            which traces the same graphs without generating code).
    """

    def __init__(self, function: Callable[..., torch.Tensor], backend: str = "inductor") -> None:
        self.compiled = torch.compile(function, fullgraph=True, dynamic=False, backend=backend)
        self.signatures: set[tuple] = set()
        self.start = dynamo_counts()

    def __call__(self, model: torch.nn.Module, *inputs: Any) -> torch.Tensor:
        signature = (_state(model), _signature(inputs))
        if signature not in self.signatures:
            self.signatures.add(signature)
            return self.compiled(model, *inputs)
        # A signature compiled before: its graph is in dynamo's cache, so dynamo's guards
        # need not run. They cost 0.27 ms per step of the main job (every parameter and
        # module attribute is checked: 4% of its step), which made the compiled step 2%
        # slower than the eager one on CPU. What else the guards check (the model's mode,
        # grad and autocast state, its parameters' dtype and device, the ops backend's
        # generation) is in the signature.
        with torch.compiler.set_stance(skip_guard_eval_unsafe=True):
            return self.compiled(model, *inputs)

    def counts(self) -> tuple[int, int, int]:
        """(frames, graph_breaks, recompiles) since this object was made."""
        frames, breaks = (now - then for now, then in zip(dynamo_counts(), self.start))
        return frames, breaks, max(frames - len(self.signatures), 0)

    def report(self) -> str:
        """The run's last line: `compile: frames=N graph_breaks=M recompiles=K`."""
        frames, breaks, recompiles = self.counts()
        return f"compile: frames={frames} graph_breaks={breaks} recompiles={recompiles}"


def _state(model: torch.nn.Module) -> tuple:
    """What a compiled step depends on besides its inputs' shapes: train/eval mode, grad
    mode, autocast, the parameters' dtype and device, and the ops backend (the kernels
    traced into the graph; dynamo guards on its generation, which skipped guards miss)."""
    parameter = next(model.parameters(), None)
    return (model.training, torch.is_grad_enabled(), torch.is_autocast_enabled("cpu"),
            torch.is_autocast_enabled("cuda"),
            None if parameter is None else (parameter.dtype, parameter.device),
            _dispatch.state())


def _signature(value: Any) -> Any:
    """Shapes, dtypes and devices of every tensor in `value` (dataclasses looked into)."""
    if isinstance(value, torch.Tensor):
        return tuple(value.shape), value.dtype, value.device
    if dataclasses.is_dataclass(value):
        value = [getattr(value, field.name) for field in dataclasses.fields(value)]
    leaves, spec = tree_flatten(value)
    if len(leaves) == 1 and leaves[0] is value:
        return type(value)
    return str(spec), tuple(_signature(leaf) for leaf in leaves)
