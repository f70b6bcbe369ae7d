"""Whether the cost models fit this machine: a line for `gnnforge doctor`."""

from __future__ import annotations

from typing import Any

from gnnforge.plan._fingerprint import fingerprint, mismatches

__all__ = ["model_status", "models_match"]


def _load(cost_model: Any) -> Any:
    if cost_model is not None:
        return cost_model
    from gnnforge.plan._optimize import _default_model

    return _default_model()


def models_match(cost_model: Any = None) -> bool:
    """True when the cost models were fitted on what this process runs (CPU, kernel
    variants, backend, threads, versions): their predictions are then used as they are.

    Raises:
        FileNotFoundError: when there are no cost models.
    """
    recorded = getattr(_load(cost_model), "info", {}).get("fingerprint")
    return not mismatches(recorded, fingerprint())


def model_status(cost_model: Any = None) -> str:
    """One paragraph: do the planner's cost models match this machine, and would
    refitting them (`gnnforge plan profile --quick`) help? For `gnnforge doctor`.

    Starts with "match", "mismatch" or "missing", so a caller can branch on the word.
    """
    try:
        model = _load(cost_model)
    except FileNotFoundError as error:
        return (f"missing: no planner cost models ({error}); planned layers measure their "
                "candidates on first use. `gnnforge plan profile --quick` fits models here.")
    info = getattr(model, "info", {})
    recorded = info.get("fingerprint")
    wrong = mismatches(recorded, fingerprint())
    if not wrong:
        return (f"match: planner cost models were fitted on this configuration "
                f"({recorded.get('cpu_model', '?')}, {recorded.get('backend', '?')} kernels, "
                f"{recorded.get('threads', '?')} thread(s)); layers trust their predictions "
                "and measure only where a predicted gain is within the models' error. "
                "No refit needed.")
    return ("mismatch: planner cost models were fitted on another configuration ("
            + "; ".join(wrong) + "). Planned layers measure their candidates on first use "
            "instead of trusting predictions (bounded at 2% of a 100-iteration run). "
            "A refit would help: `gnnforge plan profile --quick` (about a minute on 2 cores) "
            "fits models for this configuration; run it with the threads you train with "
            "(--threads).")
