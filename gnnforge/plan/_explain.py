"""`gnnforge plan --explain`: every enumerated tree, its primitives, and what pruning kept."""

from __future__ import annotations

from gnnforge.plan._candidates import all_verdicts
from gnnforge.plan._expressions import (gat_expression, gatv2_expression, gcn_expression,
                                        gin_expression, rgcn_expression, sage_expression,
                                        sgc_expression, tag_expression)
from gnnforge.plan._ir import Node
from gnnforge.plan._primitives import primitives
from gnnforge.plan._rewrites import RULES

__all__ = ["LAYER_EXPRESSIONS", "explain"]

LAYER_EXPRESSIONS = {
    "gcn": gcn_expression,
    "sgc": lambda: sgc_expression(2),
    "tag": lambda: tag_expression(3),
    "gat": gat_expression,
    "gatv2": gatv2_expression,
    "sage": sage_expression,
    "sage-sum": lambda: sage_expression("sum"),
    "gin": gin_expression,
    "rgcn": rgcn_expression,
    "rgcn-basis": lambda: rgcn_expression("mean", "basis"),
    "rgcn-block": lambda: rgcn_expression("mean", "block"),
}


def explain(expression: Node, show_dropped: bool = True) -> str:
    """A report: the default tree, each composition with its primitives and verdict."""
    verdicts = all_verdicts(expression)
    kept = [v for v in verdicts if v.kept]
    lines = [f"default: {expression!r}",
             f"rewrite rules: {', '.join(name for name, _ in RULES)}",
             f"{len(verdicts)} compositions enumerated, {len(kept)} kept by pruning", ""]
    for v in verdicts:
        if not (v.kept or show_dropped):
            continue
        status = f"KEPT, can win when {' or '.join(v.wins_when)}" if v.kept else v.reason
        if v.index == 0:
            status += " (the default: costed for every width all the same)"
        lines.append(f"#{v.index:<4d} {status}")
        lines.append(f"      {v.composition}")
        lines.append("      " + ", ".join(str(p) for p in primitives(v.composition)))
    return "\n".join(lines)
